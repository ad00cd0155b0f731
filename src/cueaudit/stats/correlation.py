"""Pearson correlations between the columns of a matrix with missing values, and their
Fisher-z confidence intervals.

Validated against scipy ``pearsonr`` and its ``confidence_interval`` (Fisher z, normal
quantile) in tests/unit/test_stats_correlation.py.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

#: |r| is clipped to this before atanh, so a perfect correlation gives a finite z.
R_CLIP = 1.0 - 1e-12
#: The status codes of :func:`pairwise_pearson`.
OK, TOO_FEW, CONSTANT = 0, 1, 2


def _pearson_block(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """r matrix of the columns of a complete (no NaN) matrix, and a mask of undefined pairs."""
    xc = x - x.mean(axis=0)
    ss = np.einsum("ij,ij->j", xc, xc)
    constant = np.ptp(x, axis=0) == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.clip((xc.T @ xc) / np.sqrt(np.outer(ss, ss)), -1.0, 1.0)
    bad = constant[:, None] | constant[None, :]
    r[bad] = np.nan
    return r, bad


def pairwise_pearson(x: np.ndarray, min_n: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pearson r between the columns of ``x`` (NaN = missing), on pairwise-complete rows.

    Returns (r, n, status), each k×k: r is NaN where undefined; status is :data:`OK`,
    :data:`TOO_FEW` (fewer than ``min_n`` shared rows) or :data:`CONSTANT` (a column is
    constant on the shared rows). The diagonal is not meaningful. Columns without any missing
    value are correlated in one matrix product; only pairs involving a column with gaps are
    computed one by one.
    """
    k = x.shape[1]
    xt = np.ascontiguousarray(x.T)
    present = ~np.isnan(xt)
    pres = present.astype(np.float64)
    n = np.rint(pres @ pres.T).astype(np.int64)
    r = np.full((k, k), np.nan)
    status = np.where(n < min_n, TOO_FEW, OK).astype(np.int8)
    complete = np.flatnonzero(present.all(axis=1))
    if complete.size >= 2 and x.shape[0] >= min_n:
        block, bad = _pearson_block(x[:, complete])
        r[np.ix_(complete, complete)] = block
        status[np.ix_(complete, complete)] = np.where(bad, CONSTANT, OK)
    is_complete = np.zeros(k, dtype=bool)
    is_complete[complete] = True
    for i in range(k):
        for j in range(i + 1, k):
            if (is_complete[i] and is_complete[j]) or n[i, j] < min_n:
                continue
            m = present[i] & present[j]
            a, b = xt[i][m], xt[j][m]
            if np.ptp(a) == 0 or np.ptp(b) == 0:
                status[i, j] = status[j, i] = CONSTANT
                continue
            ac, bc = a - a.mean(), b - b.mean()
            val = float(np.clip(ac @ bc / np.sqrt((ac @ ac) * (bc @ bc)), -1.0, 1.0))
            r[i, j] = r[j, i] = val
    return r, n, status


def fisher_ci(r: float, n: int, level: float = 0.95) -> tuple[float | None, float | None]:
    """Fisher-z confidence interval tanh(atanh(r) ± z / sqrt(n - 3)); None when n <= 3."""
    if n <= 3 or not np.isfinite(r):
        return None, None
    z = float(np.arctanh(np.clip(r, -R_CLIP, R_CLIP)))
    half = float(stats.norm.ppf(0.5 + level / 2)) / np.sqrt(n - 3)
    return float(np.tanh(z - half)), float(np.tanh(z + half))


#: How :func:`fisher_z_mean` weights each correlation's z: equally, or by n - 3 (its inverse
#: sampling variance).
FISHER_WEIGHTS = ("equal", "n_minus_3")


def fisher_z_mean(r: np.ndarray, n: np.ndarray | None = None, weights: str = "equal") -> float:
    """The average of correlations on the Fisher-z scale, ``tanh(mean(atanh(r)))``: NaN
    correlations are skipped (NaN when none is left), |r| is clipped to :data:`R_CLIP` first.

    ``weights``: ``"equal"`` averages the z values unweighted; ``"n_minus_3"`` weights each by
    its ``n`` - 3 (its inverse sampling variance; equal weights when every n - 3 is 0 or less).
    """
    if weights not in FISHER_WEIGHTS:
        raise ValueError(f"weights {weights!r} is not one of {FISHER_WEIGHTS}")
    values = np.asarray(r, dtype=np.float64)
    valid = np.isfinite(values)
    if not valid.any():
        return float("nan")
    z = np.arctanh(np.clip(values[valid], -R_CLIP, R_CLIP))
    if weights == "n_minus_3":
        if n is None:
            raise ValueError("n_minus_3 weights need each correlation's n")
        w = np.clip(np.asarray(n, dtype=np.float64)[valid] - 3.0, 0.0, None)
        if w.sum() > 0:
            return float(np.tanh((z * w).sum() / w.sum()))
    return float(np.tanh(z.mean()))
