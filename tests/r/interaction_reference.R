# Reference for the decision audit's interaction fits (wording arm, paired reasoning rerun):
# lmerTest::lmer(REML = TRUE) of y ~ FACTOR * (race + gender) with a random intercept per g_*
# column, R building the interaction columns from the raw labels itself, and
# lmerTest::contest1D(ddf = "Satterthwaite") on each FACTOR:race / FACTOR:gender coefficient.
# Usage: Rscript interaction_reference.R IN.csv OUT.csv FACTOR
# IN.csv has y, race, gender, FACTOR and g_* columns. OUT.csv has rows kind,name,value for
# kind in estimate, se, df, p; name as R's coefficient (e.g. paraphrasep2:raceBlack).
suppressPackageStartupMessages(library(lmerTest))
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1])
factor_name <- args[3]
d$race <- relevel(factor(d$race), ref = "White")
d$gender <- relevel(factor(d$gender), ref = "male")
d[[factor_name]] <- factor(d[[factor_name]])
gs <- grep("^g_", names(d), value = TRUE)
for (g in gs) d[[g]] <- factor(d[[g]])
formula <- as.formula(paste("y ~", factor_name, "* (race + gender) +",
                            paste0("(1|", gs, ")", collapse = " + ")))
ctrl <- lme4::lmerControl(optimizer = "bobyqa",
                          optCtrl = list(rhobeg = 0.2, rhoend = 1e-12, maxfun = 1e5),
                          calc.derivs = FALSE)
fit <- lmerTest::lmer(formula, data = d, REML = TRUE, control = ctrl)
names_fixed <- names(lme4::fixef(fit))
rows <- list()
for (j in grep(":", names_fixed)) {
  r <- contest1D(fit, as.numeric(seq_along(names_fixed) == j), ddf = "Satterthwaite")
  rows[[length(rows) + 1]] <- data.frame(
    kind = c("estimate", "se", "df", "p"), name = names_fixed[j],
    value = c(r$Estimate, r$`Std. Error`, r$df, r$`Pr(>|t|)`))
}
write.csv(do.call(rbind, rows), args[2], row.names = FALSE)
