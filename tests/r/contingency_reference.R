# Reference 2 x 2 association tests for cueaudit.stats.contingency: fisher.test of each table
# (conditional MLE odds ratio, exact 95% interval, two-sided p) and mantelhaen.test of all
# tables together (Mantel-Haenszel odds ratio, its interval, the CMH test without continuity
# correction).
# Usage: Rscript contingency_reference.R IN.csv OUT.csv
# IN.csv: columns stratum, a, b, c, d (the table [[a, b], [c, d]] of each stratum).
# OUT.csv: rows kind,name,value; kind fisher_<stratum> or mh, name estimate/ci_low/ci_high/p.
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1])
rows <- list()
add <- function(kind, test) {
  data.frame(kind = kind, name = c("estimate", "ci_low", "ci_high", "p"),
             value = c(unname(test$estimate), test$conf.int[1], test$conf.int[2], test$p.value))
}
tables <- array(0, dim = c(2, 2, nrow(d)))
for (i in seq_len(nrow(d))) {
  t <- matrix(c(d$a[i], d$c[i], d$b[i], d$d[i]), nrow = 2)
  tables[, , i] <- t
  rows[[length(rows) + 1]] <- add(paste0("fisher_", d$stratum[i]), fisher.test(t))
}
if (nrow(d) > 1) rows[[length(rows) + 1]] <- add("mh", mantelhaen.test(tables, correct = FALSE))
write.csv(do.call(rbind, rows), args[2], row.names = FALSE)
