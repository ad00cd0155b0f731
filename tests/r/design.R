# Shared by the reference scripts: read IN.csv (y, fixed-effect columns x_*, the intercept among
# them, random-intercept factors g_*) and fit lmer with tight optimizer tolerances (the
# comparisons are to 1e-6, tighter than lme4's defaults).
read_design <- function(path) {
  d <- read.csv(path)
  xs <- grep("^x_", names(d), value = TRUE)
  gs <- grep("^g_", names(d), value = TRUE)
  for (g in gs) d[[g]] <- factor(d[[g]])
  list(d = d, xs = xs, gs = gs)
}

lmer_formula <- function(design) {
  as.formula(paste("y ~ 0 +", paste(design$xs, collapse = " + "), "+",
                   paste0("(1|", design$gs, ")", collapse = " + ")))
}

fit_lmer <- function(design, lmer_function = lme4::lmer) {
  ctrl <- lme4::lmerControl(optimizer = "bobyqa",
                            optCtrl = list(rhobeg = 0.2, rhoend = 1e-12, maxfun = 1e5),
                            calc.derivs = FALSE)
  lmer_function(lmer_formula(design), data = design$d, REML = TRUE, control = ctrl)
}

