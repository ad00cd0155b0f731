"""The likelihood-ratio (G) test that a binary outcome is independent of a group within strata.

``stratified_g_test`` sums, over strata, the G statistic of each stratum's group × outcome table
(``scipy.stats.chi2_contingency`` with ``lambda_="log-likelihood"``, no continuity correction)
and their degrees of freedom. The sum is the likelihood-ratio test of the logit model with a
stratum × group term against the model with the stratum alone, i.e. of conditional
independence of outcome and group given the stratum (validated against the deviance difference
of two statsmodels binomial GLMs in tests/unit/test_stats_contingency.py). Its maximum
likelihood estimates are the cell proportions, so it needs no iterative fit and has a finite
statistic where a logit fit separates (a group with no event at all).

A stratum with a single group or without any event (or without any non-event) carries no
information on the group and is left out, degrees of freedom included; so is a group without
rows in a stratum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from cueaudit.errors import InputError


@dataclass(frozen=True)
class GTest:
    """The summed statistic, its degrees of freedom, the chi-square p-value (NaN without
    degrees of freedom) and the number of strata that entered."""

    statistic: float
    df: int
    p_value: float
    n_strata: int


def stratified_g_test(counts: np.ndarray) -> GTest:
    """G test of ``counts`` of shape (strata, groups, 2): per stratum and group, the rows
    without and with the event (any non-negative counts)."""
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 3 or table.shape[2] != 2:
        raise InputError("G test", f"counts of shape (strata, groups, 2), got {table.shape}")
    if np.any(table < 0) or not np.all(np.isfinite(table)):
        raise InputError("G test", "counts must be finite and non-negative")
    statistic, df, used = 0.0, 0, 0
    for stratum in table:
        present = stratum[stratum.sum(axis=1) > 0]
        if present.shape[0] < 2 or np.any(present.sum(axis=0) == 0):
            continue
        g, _, dof, _ = stats.chi2_contingency(present, correction=False, lambda_="log-likelihood")
        statistic += float(g)
        df += int(dof)
        used += 1
    p_value = float(stats.chi2.sf(statistic, df)) if df else float("nan")
    return GTest(statistic, df, p_value, used)
