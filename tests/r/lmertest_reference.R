# Reference Satterthwaite tests for cueaudit.stats.mixed: lmerTest::lmer(REML = TRUE) with
# crossed random intercepts and lmerTest::contest1D(ddf = "Satterthwaite").
# Usage: Rscript lmertest_reference.R IN.csv OUT.csv [CONTRASTS.csv]
# IN.csv as read by design.R. CONTRASTS.csv has a column name and one column per x_* (the
# weights). OUT.csv has rows kind,name,value for kind in estimate, se, df, t, p (each
# coefficient, then each contrast by its name).
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
write.csv(do.call(rbind, rows), args[2], row.names = FALSE)
