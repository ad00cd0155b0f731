# Reference fit for cueaudit.stats.mixed: lme4::lmer(REML = TRUE) with crossed random intercepts.
# Usage: Rscript lmer_reference.R IN.csv OUT.csv
# IN.csv as read by design.R. OUT.csv has rows kind,name,value for kind in fixef, se, vc
# (variance components, "residual" last) and reml.
suppressPackageStartupMessages(library(lme4))
args <- commandArgs(trailingOnly = TRUE)
source(file.path(dirname(normalizePath(sub("^--file=", "",
  grep("^--file=", commandArgs(FALSE), value = TRUE)))), "design.R"))
fit <- fit_lmer(read_design(args[1]))
vc <- as.data.frame(VarCorr(fit))
out <- rbind(
  data.frame(kind = "fixef", name = names(fixef(fit)), value = unname(fixef(fit))),
  data.frame(kind = "se", name = names(fixef(fit)), value = sqrt(diag(as.matrix(vcov(fit))))),
  data.frame(kind = "vc", name = ifelse(vc$grp == "Residual", "residual", vc$grp),
             value = vc$vcov),
  data.frame(kind = "reml", name = "criterion", value = unname(REMLcrit(fit)))
)
write.csv(out, args[2], row.names = FALSE)
