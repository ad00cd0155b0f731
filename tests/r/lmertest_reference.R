# Reference Satterthwaite tests for cueaudit.stats.mixed: lmerTest::lmer(REML = TRUE) with
# crossed random intercepts and lmerTest::contest1D(ddf = "Satterthwaite").
# Usage: Rscript lmertest_reference.R IN.csv OUT.csv [CONTRASTS.csv [L.csv]]
# IN.csv as read by design.R. CONTRASTS.csv has a column name and one column per x_* (the
# weights). OUT.csv has rows kind,name,value for kind in estimate, se, df, t, p (each
# coefficient, then each contrast by its name). With L.csv (one row per hypothesis, one column
# per x_*) also the joint F test lmerTest::contestMD(ddf = "Satterthwaite"): kind F, df1, df2,
# p, name "joint".
suppressPackageStartupMessages(library(lmerTest))
args <- commandArgs(trailingOnly = TRUE)
source(file.path(dirname(normalizePath(sub("^--file=", "",
  grep("^--file=", commandArgs(FALSE), value = TRUE)))), "design.R"))
design <- read_design(args[1])
fit <- fit_lmer(design, lmerTest::lmer)
tests <- function(name, L) {
  r <- contest1D(fit, L, ddf = "Satterthwaite")
  data.frame(kind = c("estimate", "se", "df", "t", "p"), name = name,
             value = c(r$Estimate, r$`Std. Error`, r$df, r$`t value`, r$`Pr(>|t|)`))
}
xs <- design$xs
rows <- lapply(seq_along(xs), function(j) tests(xs[j], as.numeric(seq_along(xs) == j)))
if (length(args) >= 3) {
  cs <- read.csv(args[3])
  for (i in seq_len(nrow(cs))) rows[[length(rows) + 1]] <- tests(cs$name[i], as.numeric(cs[i, xs]))
}
if (length(args) >= 4) {
  r <- contestMD(fit, as.matrix(read.csv(args[4])[, xs, drop = FALSE]), ddf = "Satterthwaite")
  rows[[length(rows) + 1]] <- data.frame(kind = c("F", "df1", "df2", "p"), name = "joint",
                                         value = c(r$`F value`, r$NumDF, r$DenDF, r$`Pr(>F)`))
}
write.csv(do.call(rbind, rows), args[2], row.names = FALSE)
