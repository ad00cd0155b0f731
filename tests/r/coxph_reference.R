# Reference fit for cueaudit.stats.rologit's Breslow and Efron modes: a stratified Cox model
# with rank as time, one stratum per ranking, and the cluster-robust (grouped dfbeta) variance.
# Usage: Rscript coxph_reference.R IN.csv OUT.csv TIES
# IN.csv has columns time, status, stratum, cluster and regressors named x_*; TIES is breslow
# or efron. OUT.csv has rows kind,name,value for kind in coef, se, robust_se and loglik.
suppressPackageStartupMessages(library(survival))
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1])
xs <- grep("^x_", names(d), value = TRUE)
form <- as.formula(paste("Surv(time, status) ~", paste(xs, collapse = " + "),
                         "+ strata(stratum)"))
fit <- coxph(form, data = d, ties = args[3], cluster = cluster,
             control = coxph.control(eps = 1e-12, toler.chol = 1e-14, iter.max = 100))
out <- rbind(
  data.frame(kind = "coef", name = names(coef(fit)), value = unname(coef(fit))),
  data.frame(kind = "se", name = names(coef(fit)), value = sqrt(diag(fit$naive.var))),
  data.frame(kind = "robust_se", name = names(coef(fit)), value = sqrt(diag(fit$var))),
  data.frame(kind = "loglik", name = "final", value = fit$loglik[2])
)
write.csv(out, args[2], row.names = FALSE)
