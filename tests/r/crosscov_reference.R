# Reference cross-covariances for cueaudit.stats.robust.cross_covariance: two OLS equations on
# different observations, stacked into one lm with a block-diagonal design, and
# sandwich::vcovCL (type "HC0", no cluster adjustment) clustered one way by pair, one way by
# profile, and two ways by both (Cameron, Gelbach & Miller's inclusion-exclusion, multi0 =
# FALSE: pair + profile - pair x profile). The value is the covariance of the coefficients
# named by the arguments A and B, one from each equation.
# Usage: Rscript crosscov_reference.R IN.csv OUT.csv A B
# IN.csv as read by design.R (the stacked columns x_*, zero outside their equation), plus the
# columns pair and profile. OUT.csv: rows kind,name,value for kind in pair, profile, two_way.
suppressPackageStartupMessages(library(sandwich))
args <- commandArgs(trailingOnly = TRUE)
source(file.path(dirname(normalizePath(sub("^--file=", "",
  grep("^--file=", commandArgs(FALSE), value = TRUE)))), "design.R"))
design <- read_design(args[1])
d <- design$d
d$pair <- factor(d$pair)
d$profile <- factor(d$profile)
fit <- lm(as.formula(paste("y ~ 0 +", paste(design$xs, collapse = " + "))), data = d)
covariance <- function(cluster, ...) {
  vcovCL(fit, cluster = cluster, type = "HC0", cadjust = FALSE, ...)[args[3], args[4]]
}
write.csv(data.frame(
  kind = c("pair", "profile", "two_way"),
  name = paste(args[3], args[4], sep = ":"),
  value = c(covariance(~pair), covariance(~profile), covariance(~pair + profile, multi0 = FALSE))
), args[2], row.names = FALSE)
