"""Heterogeneity of independent estimates of one effect: Cochran's Q, I² and the
DerSimonian-Laird between-estimate variance tau².

For estimates ``y_i`` with standard errors ``s_i`` and weights ``w_i = 1 / s_i^2``:

- the fixed-effect (inverse-variance) mean ``ybar = sum w y / sum w``, SE ``1 / sqrt(sum w)``;
- ``Q = sum w_i (y_i - ybar)^2``, chi-squared with ``k - 1`` degrees of freedom when every
  estimate has the same expectation and the ``s_i`` are their true SEs; ``p`` its upper tail;
- ``I² = max(0, (Q - (k - 1)) / Q)`` (Higgins & Thompson 2002), a proportion here (metafor
  prints it in percent);
- ``tau² = max(0, (Q - (k - 1)) / (sum w - sum w^2 / sum w))`` (DerSimonian & Laird 1986),
  and the random-effects mean with weights ``1 / (s_i^2 + tau²)``.

Validated against statsmodels ``combine_effects`` (``statsmodels.stats.meta_analysis``) and
metafor's BCG vaccine example (``rma(yi, vi, method = "DL")`` on ``dat.bcg``'s log risk
ratios: Q = 152.2330 on 12 df, I² = 92.12%, tau² = 0.3088) in
tests/unit/test_stats_heterogeneity.py.

Q assumes the estimates are independent. Estimates that share noise (per-model contrasts of
one design share its name pairs and profiles) covary positively, and Q is then conservative;
a joint fit's interaction test (:meth:`cueaudit.stats.mixed.MixedResult.wald_test`) accounts
for the sharing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from cueaudit.errors import InputError


@dataclass(frozen=True)
class Heterogeneity:
    """Cochran's Q over ``k`` estimates, with I², tau² and the pooled means (NaN throughout
    when fewer than two estimates are usable)."""

    k: int
    q: float
    df: int
    p: float
    i2: float
    tau2: float
    fixed: float
    fixed_se: float
    random: float
    random_se: float


def cochran_q(estimates: np.ndarray, se: np.ndarray) -> Heterogeneity:
    """Cochran's Q of ``estimates`` with standard errors ``se``; pairs with a non-finite
    estimate or a non-positive SE (a level that could not be estimated) are left out."""
    y = np.asarray(estimates, dtype=np.float64).reshape(-1)
    s = np.asarray(se, dtype=np.float64).reshape(-1)
    if y.shape != s.shape:
        raise InputError("heterogeneity", f"{len(y)} estimates but {len(s)} standard errors")
    usable = np.isfinite(y) & np.isfinite(s) & (s > 0)
    y, s = y[usable], s[usable]
    k = len(y)
    nan = float("nan")
    if k < 2:
        return Heterogeneity(k, nan, max(k - 1, 0), nan, nan, nan, nan, nan, nan, nan)
    w = 1.0 / s**2
    fixed = float(np.sum(w * y) / np.sum(w))
    q = float(np.sum(w * (y - fixed) ** 2))
    df = k - 1
    i2 = max(0.0, (q - df) / q) if q > 0 else 0.0
    tau2 = max(0.0, (q - df) / float(np.sum(w) - np.sum(w**2) / np.sum(w)))
    w_random = 1.0 / (s**2 + tau2)
    return Heterogeneity(
        k=k,
        q=q,
        df=df,
        p=float(stats.chi2.sf(q, df)),
        i2=float(i2),
        tau2=float(tau2),
        fixed=fixed,
        fixed_se=float(1.0 / np.sqrt(np.sum(w))),
        random=float(np.sum(w_random * y) / np.sum(w_random)),
        random_se=float(1.0 / np.sqrt(np.sum(w_random))),
    )
