# Reference fit for cueaudit.stats.mixed: lme4::lmer(REML = TRUE) with crossed random intercepts.
# Usage: Rscript lmer_reference.R IN.csv OUT.csv
# IN.csv has a column y, fixed-effect columns named x_* (the intercept among them, fitted
# without R's own) and random-intercept factors named g_*. OUT.csv has rows kind,name,value
# for kind in fixef, se, vc (variance components, "residual" last) and reml.
suppressPackageStartupMessages(library(lme4))
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1])
xs <- grep("^x_", names(d), value = TRUE)
gs <- grep("^g_", names(d), value = TRUE)
for (g in gs) d[[g]] <- factor(d[[g]])
form <- as.formula(paste("y ~ 0 +", paste(xs, collapse = " + "), "+",
                         paste0("(1|", gs, ")", collapse = " + ")))
# Tight optimizer tolerances: the comparison is to 1e-6, tighter than lme4's defaults.
ctrl <- lmerControl(optimizer = "bobyqa",
                    optCtrl = list(rhobeg = 0.2, rhoend = 1e-12, maxfun = 1e5),
                    calc.derivs = FALSE)
fit <- lmer(form, data = d, REML = TRUE, control = ctrl)
vc <- as.data.frame(VarCorr(fit))
out <- rbind(
  data.frame(kind = "fixef", name = names(fixef(fit)), value = unname(fixef(fit))),
  data.frame(kind = "se", name = names(fixef(fit)), value = sqrt(diag(as.matrix(vcov(fit))))),
  data.frame(kind = "vc", name = ifelse(vc$grp == "Residual", "residual", vc$grp),
             value = vc$vcov),
  data.frame(kind = "reml", name = "criterion", value = unname(REMLcrit(fit)))
)
write.csv(out, args[2], row.names = FALSE)
