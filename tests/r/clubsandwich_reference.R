# Reference CR2 tests for cueaudit.stats.robust: clubSandwich::coef_test(vcov = "CR2",
# test = "Satterthwaite") of an OLS fit (lm) or, with random-intercept factors g_*, of a REML
# lmer fit whose factors are nested in the clusters (clubSandwich refuses crossed ones).
# Usage: Rscript clubsandwich_reference.R IN.csv OUT.csv
# IN.csv as read by design.R, plus a column cluster. OUT.csv: rows kind,name,value for kind in
# estimate, se, df, p.
suppressPackageStartupMessages({library(clubSandwich); library(lme4)})
args <- commandArgs(trailingOnly = TRUE)
source(file.path(dirname(normalizePath(sub("^--file=", "",
  grep("^--file=", commandArgs(FALSE), value = TRUE)))), "design.R"))
design <- read_design(args[1])
cluster <- factor(design$d$cluster)
fit <- if (length(design$gs)) {
  fit_lmer(design)
} else {
  lm(as.formula(paste("y ~ 0 +", paste(design$xs, collapse = " + "))), data = design$d)
}
ct <- coef_test(fit, vcov = "CR2", cluster = cluster, test = "Satterthwaite")
xs <- design$xs
write.csv(rbind(
  data.frame(kind = "estimate", name = xs, value = ct$beta),
  data.frame(kind = "se", name = xs, value = ct$SE),
  data.frame(kind = "df", name = xs, value = ct$df_Satt),
  data.frame(kind = "p", name = xs, value = ct$p_Satt)
), args[2], row.names = FALSE)
