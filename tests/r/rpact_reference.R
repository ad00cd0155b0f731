# Reference group-sequential boundaries for cueaudit.stats.sequential: rpact's Lan-DeMets
# alpha-spending designs (typeOfDesign "asOF" / "asP").
# Usage: Rscript rpact_reference.R IN.csv OUT.csv
# IN.csv: columns design, look, fraction, alpha, spending (obrien_fleming / pocock), sided.
# OUT.csv: rows kind,name,value; kind <design>_<look>, name critical/alpha_spent/nominal.
suppressPackageStartupMessages(library(rpact))
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1])
types <- c(obrien_fleming = "asOF", pocock = "asP")
rows <- list()
for (name in unique(d$design)) {
  s <- d[d$design == name, ]
  s <- s[order(s$look), ]
  g <- getDesignGroupSequential(
    kMax = nrow(s), alpha = s$alpha[1], sided = s$sided[1],
    typeOfDesign = types[[s$spending[1]]], informationRates = s$fraction
  )
  for (k in seq_len(nrow(s))) {
    rows[[length(rows) + 1]] <- data.frame(
      kind = paste0(name, "_", s$look[k]), name = c("critical", "alpha_spent", "nominal"),
      value = c(g$criticalValues[k], g$alphaSpent[k], g$stageLevels[k])
    )
  }
}
write.csv(do.call(rbind, rows), args[2], row.names = FALSE)
