"""Contingency tables: tests of independence and measures of association.

The likelihood-ratio (G) test that a binary outcome is independent of a group within strata.

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

The association of two binary variables in 2 x 2 tables ``[[a, b], [c, d]]`` (rows: the
first variable yes / no; columns: the second yes / no).

One table: the conditional maximum-likelihood odds ratio with its exact interval and Fisher's
exact test (scipy's ``odds_ratio(kind="conditional")`` and ``fisher_exact``, which are R's
``fisher.test``). Several tables (strata): the Mantel-Haenszel pooled odds ratio
``sum(a d / n) / sum(b c / n)``, its Robins-Breslow-Greenland interval on the log scale and the
Cochran-Mantel-Haenszel test without continuity correction. Both are checked against R
(``fisher.test``, ``mantelhaen.test``) and statsmodels' ``StratifiedTable`` in
tests/unit/test_stats_contingency.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.stats.contingency import odds_ratio

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


@dataclass(frozen=True)
class OddsRatio:
    """An odds ratio, its interval and the p-value of no association; ``n_strata`` the tables
    that carried information (those of two or more observations)."""

    estimate: float
    ci_low: float
    ci_high: float
    p_value: float
    n_strata: int


def _tables(tables: np.ndarray | list[list[list[int]]], name: str) -> np.ndarray:
    array = np.asarray(tables, dtype=np.float64)
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3 or array.shape[1:] != (2, 2):
        raise InputError(name, f"2 x 2 tables, got shape {np.shape(tables)}", "tables")
    if np.any(~np.isfinite(array)) or np.any(array < 0) or np.any(array != np.round(array)):
        raise InputError(name, "counts must be non-negative integers", "tables")
    return array


def fisher_odds_ratio(table: np.ndarray | list[list[int]], level: float = 0.95) -> OddsRatio:
    """One table's conditional MLE odds ratio, its exact ``level`` interval and the two-sided
    Fisher exact p-value (NaN throughout for an empty table)."""
    (counts,) = _tables(table, "Fisher exact test")
    if counts.sum() == 0:
        return OddsRatio(np.nan, np.nan, np.nan, np.nan, 0)
    integers = counts.astype(np.int64)
    result = odds_ratio(integers, kind="conditional")
    interval = result.confidence_interval(confidence_level=level)
    p_value = stats.fisher_exact(integers).pvalue
    return OddsRatio(
        float(result.statistic), float(interval.low), float(interval.high), float(p_value), 1
    )


def mantel_haenszel(tables: np.ndarray | list[list[list[int]]], level: float = 0.95) -> OddsRatio:
    """The Mantel-Haenszel pooled odds ratio of ``tables`` (shape ``(k, 2, 2)``), its
    Robins-Breslow-Greenland ``level`` interval and the Cochran-Mantel-Haenszel p-value (no
    continuity correction). Tables of fewer than two observations are left out; NaN where
    the pooled ratio is 0 or infinite (no interval) or no table is left."""
    counts = _tables(tables, "Mantel-Haenszel")
    counts = counts[counts.sum(axis=(1, 2)) >= 2]
    if not len(counts):
        return OddsRatio(np.nan, np.nan, np.nan, np.nan, 0)
    a, b, c, d = counts[:, 0, 0], counts[:, 0, 1], counts[:, 1, 0], counts[:, 1, 1]
    n = a + b + c + d
    r, s = a * d / n, b * c / n
    p, q = (a + d) / n, (b + c) / n
    sum_r, sum_s = r.sum(), s.sum()
    expected = (a + b) * (a + c) / n
    variance = (a + b) * (c + d) * (a + c) * (b + d) / (n**2 * (n - 1))
    p_value = (
        float(stats.chi2.sf((a - expected).sum() ** 2 / variance.sum(), 1))
        if variance.sum() > 0
        else np.nan
    )
    if sum_r == 0 or sum_s == 0:
        estimate = np.nan if sum_r == sum_s else np.inf if sum_s == 0 else 0.0
        return OddsRatio(estimate, np.nan, np.nan, p_value, len(counts))
    log_variance = (
        (p * r).sum() / (2 * sum_r**2)
        + (p * s + q * r).sum() / (2 * sum_r * sum_s)
        + (q * s).sum() / (2 * sum_s**2)
    )
    estimate = sum_r / sum_s
    half = float(stats.norm.ppf(0.5 + level / 2)) * np.sqrt(log_variance)
    return OddsRatio(
        float(estimate),
        float(estimate * np.exp(-half)),
        float(estimate * np.exp(half)),
        p_value,
        len(counts),
    )
