# Reference joint Wald tests for cueaudit.stats.robust.ClusterRobust.wald_test:
# clubSandwich::Wald_test(vcov = "CR2", test = "Naive-F") of an OLS fit (lm).
# Usage: Rscript clubsandwich_wald_reference.R IN.csv OUT.csv L.csv
# IN.csv as read by design.R plus a column cluster; L.csv one row per hypothesis, one column
# per x_*. OUT.csv has rows kind,name,value for kind in F, df1, df2, p (name "joint").
suppressPackageStartupMessages(library(clubSandwich))
args <- commandArgs(trailingOnly = TRUE)
source(file.path(dirname(normalizePath(sub("^--file=", "",
  grep("^--file=", commandArgs(FALSE), value = TRUE)))), "design.R"))
design <- read_design(args[1])
fit <- lm(as.formula(paste("y ~ 0 +", paste(design$xs, collapse = " + "))), data = design$d)
L <- as.matrix(read.csv(args[3])[, design$xs, drop = FALSE])
w <- Wald_test(fit, constraints = L, vcov = "CR2", cluster = factor(design$d$cluster),
               test = "Naive-F")
write.csv(data.frame(kind = c("F", "df1", "df2", "p"), name = "joint",
                     value = c(w$Fstat, w$df_num, w$df_denom, w$p_val)),
          args[2], row.names = FALSE)
