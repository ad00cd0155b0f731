"""OLS with one absorbed fixed effect (the within transformation), conventional and
cluster-robust (CR1) standard errors.

Conventions (validated against statsmodels in tests/unit/test_fe.py):

- ``se_conventional``: homoskedastic, ``s^2 = SSR / (N - K - G)``: identical to OLS with
  explicit fixed-effect dummies.
- ``se_paper``: ``s^2 = SSR / (N - K)``, what plain OLS on hand-demeaned data reports (the
  authors' replication package), ignoring the absorbed degrees of freedom.
- ``se_cluster``: CR1 clustered by the fixed-effect groups with the factor
  ``G/(G-1) * (N-1)/(N-K)`` where K does not count the nested fixed effects (Stata reghdfe,
  R fixest, linearmodels ``AbsorbingLS(debiased=True)``).
- ``r2_within`` is the uncentered R^2 of the demeaned regression; AIC and BIC use the Gaussian
  log-likelihood of the demeaned regression with K parameters (statsmodels' convention).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from cueaudit.errors import InputError

ABSORBED_TOL = 1e-10  # a regressor whose within variance is below this share is absorbed


@dataclass(frozen=True)
class FEResult:
    names: list[str]
    coef: np.ndarray
    se_conventional: np.ndarray
    se_paper: np.ndarray
    se_cluster: np.ndarray
    p_conventional: np.ndarray
    p_cluster: np.ndarray
    n: int
    n_groups: int
    r2_within: float
    aic: float
    bic: float
    dropped: list[str]


def demean(values: np.ndarray, groups: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Subtract the group mean from every column of ``values`` (N or N x K)."""
    if values.ndim == 1:
        return values - (np.bincount(groups, weights=values) / counts)[groups]
    out = np.empty_like(values, dtype=np.float64)
    for j in range(values.shape[1]):
        col = values[:, j]
        out[:, j] = col - (np.bincount(groups, weights=col) / counts)[groups]
    return out


def fe_ols(y: np.ndarray, x: np.ndarray, groups: np.ndarray, names: Sequence[str]) -> FEResult:
    """Fit ``y ~ x + group FE`` by the within transformation; clusters are the groups.

    ``groups`` holds integer codes (any values; they are re-coded). Regressors absorbed by the
    fixed effects (no within-group variance) are dropped and listed in ``dropped``.
    """
    y = np.asarray(y, dtype=np.float64)
    if len(y) == 0:
        raise InputError("regression", "no observations")
    x = np.asarray(x, dtype=np.float64).reshape(len(y), -1)
    if x.shape[1] != len(names):
        raise InputError("regression", f"{x.shape[1]} regressors but {len(names)} names")
    _, g = np.unique(np.asarray(groups), return_inverse=True)
    g = g.astype(np.int64)
    counts = np.bincount(g).astype(np.float64)
    n, n_groups = len(y), len(counts)
    yd = demean(y, g, counts)
    xd = demean(x, g, counts)
    scale = np.maximum((x * x).sum(axis=0), 1e-300)
    keep = (xd * xd).sum(axis=0) > ABSORBED_TOL * scale
    dropped = [nm for nm, k in zip(names, keep, strict=True) if not k]
    xd = xd[:, keep]
    kept = [nm for nm, k in zip(names, keep, strict=True) if k]
    k = xd.shape[1]
    if k == 0:
        raise InputError("regression", "every regressor is absorbed by the fixed effects")
    xtx = xd.T @ xd
    xtx_inv = np.linalg.inv(xtx)
    coef = xtx_inv @ (xd.T @ yd)
    resid = yd - xd @ coef
    ssr = float(resid @ resid)
    df_fe = n - k - n_groups
    df_paper = n - k
    with np.errstate(divide="ignore", invalid="ignore"):
        s2_fe = ssr / df_fe if df_fe > 0 else np.nan
        s2_paper = ssr / df_paper if df_paper > 0 else np.nan
    diag = np.diag(xtx_inv)
    se_conv = np.sqrt(diag * s2_fe)
    se_paper = np.sqrt(diag * s2_paper)
    scores = np.column_stack(
        [np.bincount(g, weights=xd[:, j] * resid, minlength=n_groups) for j in range(k)]
    )
    meat = scores.T @ scores
    if n_groups > 1 and df_paper > 0:
        factor = n_groups / (n_groups - 1) * (n - 1) / df_paper
        se_cl = np.sqrt(np.diag(factor * xtx_inv @ meat @ xtx_inv))
    else:
        se_cl = np.full(k, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_conv = coef / se_conv
        t_cl = coef / se_cl
    p_conv = 2 * stats.t.sf(np.abs(t_conv), df_fe) if df_fe > 0 else np.full(k, np.nan)
    p_cl = 2 * stats.t.sf(np.abs(t_cl), n_groups - 1) if n_groups > 1 else np.full(k, np.nan)
    tss = float(yd @ yd)
    r2 = 1.0 - ssr / tss if tss > 0 else np.nan
    llf = -n / 2.0 * (np.log(2 * np.pi) + np.log(ssr / n) + 1.0) if ssr > 0 else np.inf
    return FEResult(
        names=kept,
        coef=coef,
        se_conventional=se_conv,
        se_paper=se_paper,
        se_cluster=se_cl,
        p_conventional=p_conv,
        p_cluster=p_cl,
        n=n,
        n_groups=n_groups,
        r2_within=float(r2),
        aic=float(-2 * llf + 2 * k),
        bic=float(-2 * llf + k * np.log(n)),
        dropped=dropped,
    )
