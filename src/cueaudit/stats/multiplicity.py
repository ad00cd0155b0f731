"""Benjamini-Hochberg q-values, equivalence tests (TOST) and minimum detectable effects for
contrasts that come as an estimate and its standard error.

Conventions (validated in tests/unit/test_stats_multiplicity.py):

- BH: a NaN p-value (a contrast that could not be estimated) gives a NaN q-value and is not
  counted in the family size m. On the valid p-values the q-values equal statsmodels
  ``multipletests(method="fdr_bh")`` and scipy ``false_discovery_control``.
- TOST: two one-sided z tests of H0 ``effect <= low`` and H0 ``effect >= high``;
  ``p = max(p_low, p_high)``, equivalent to the 1 - 2 alpha (90%) interval lying inside
  (low, high). The difference test is the two-sided z test of ``effect = 0``.
- MDE: the true effect a two-sided z test at ``alpha`` detects with the given power,
  ``(z_{1-alpha/2} + z_power) SE`` = 2.8016 SE at .05 and .80 (the wrong-sign rejection
  region is ignored). Equivalence floor: the smallest symmetric margin that TOST at ``alpha``
  establishes with the given power when the true effect is 0,
  ``(z_{1-alpha} + z_{(1+power)/2}) SE`` = 2.9264 SE at .05 and .80.
- With degrees of freedom ``df`` (a Satterthwaite t test) every z quantile and tail becomes
  the t distribution's with ``df``; ``df = inf`` (the default) is the normal case above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

from cueaudit.errors import InputError

Verdict = Literal["equivalent", "different", "inconclusive"]


INF = float("inf")


def _quantile(q: float, df: float) -> float:
    return float(stats.norm.ppf(q) if not np.isfinite(df) else stats.t.ppf(q, df))


@dataclass(frozen=True)
class TTest:
    """A t test of one linear combination of coefficients (``df`` infinite: a z test)."""

    estimate: float
    se: float
    df: float
    t: float
    p: float

    def conf_int(self, level: float = 0.95) -> tuple[float, float]:
        half = _quantile(0.5 + level / 2, self.df) * self.se
        return self.estimate - half, self.estimate + half


def t_test(estimate: float, se: float, df: float) -> TTest:
    """The two-sided t test of ``estimate`` against 0; NaN throughout without a positive SE."""
    if not (np.isfinite(se) and se > 0):
        return TTest(float(estimate), np.nan, np.nan, np.nan, np.nan)
    t = float(estimate) / float(se)
    tail = stats.norm.sf(abs(t)) if not np.isfinite(df) else stats.t.sf(abs(t), df)
    return TTest(float(estimate), float(se), float(df), t, float(2.0 * tail))


def mde_factor(alpha: float = 0.05, power: float = 0.80, df: float = INF) -> float:
    return _quantile(1 - alpha / 2, df) + _quantile(power, df)


def equivalence_factor(alpha: float = 0.05, power: float = 0.80, df: float = INF) -> float:
    return _quantile(1 - alpha, df) + _quantile((1 + power) / 2, df)


MDE_FACTOR = mde_factor()  # 2.8016
EQUIVALENCE_FACTOR = equivalence_factor()  # 2.9264


def mde(
    se: float | np.ndarray, alpha: float = 0.05, power: float = 0.80, df: float = INF
) -> float | np.ndarray:
    """Minimum detectable effect of a contrast with standard error ``se`` (and ``df``)."""
    return mde_factor(alpha, power, df) * np.asarray(se, dtype=np.float64)


def equivalence_floor(
    se: float | np.ndarray, alpha: float = 0.05, power: float = 0.80, df: float = INF
) -> float | np.ndarray:
    """Smallest symmetric equivalence margin reachable with ``power`` at a true effect of 0."""
    return equivalence_factor(alpha, power, df) * np.asarray(se, dtype=np.float64)


def bh_qvalues(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values; NaN in, NaN out, NaNs not counted in m."""
    p = np.asarray(p, dtype=np.float64)
    flat = p.ravel()
    valid = ~np.isnan(flat)
    pv = flat[valid]
    if np.any((pv < 0) | (pv > 1)):
        raise InputError("Benjamini-Hochberg", "p-values must lie in [0, 1]")
    q = np.full(flat.shape, np.nan)
    m = len(pv)
    if m:
        order = np.argsort(pv)
        scaled = pv[order] * m / np.arange(1, m + 1)
        adjusted = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
        out = np.empty(m)
        out[order] = adjusted
        q[valid] = out
    return q.reshape(p.shape)


@dataclass(frozen=True)
class TostResult:
    """An equivalence test of ``estimate`` (standard error ``se``) against ``(low, high)``.

    Verdict: ``"equivalent"`` when TOST rejects (also when the estimate differs from zero:
    then ``different`` is True too, a difference smaller than the margin);
    ``"different"`` when only the difference test rejects; ``"inconclusive"`` when neither.
    """

    estimate: float
    se: float
    low: float
    high: float
    alpha: float = 0.05
    power: float = 0.80
    df: float = INF

    @property
    def _dist(self) -> Any:
        return stats.norm if not np.isfinite(self.df) else stats.t(self.df)

    @property
    def p_low(self) -> float:
        """H0: effect <= low."""
        return float(self._dist.sf((self.estimate - self.low) / self.se))

    @property
    def p_high(self) -> float:
        """H0: effect >= high."""
        return float(self._dist.cdf((self.estimate - self.high) / self.se))

    @property
    def p_tost(self) -> float:
        return max(self.p_low, self.p_high)

    @property
    def p_difference(self) -> float:
        """Two-sided, H0: effect = 0."""
        return float(2 * self._dist.sf(abs(self.estimate) / self.se))

    @property
    def ci(self) -> tuple[float, float]:
        """The 1 - 2 alpha interval that TOST inspects."""
        half = _quantile(1 - self.alpha, self.df) * self.se
        return self.estimate - half, self.estimate + half

    @property
    def bound(self) -> float:
        """The smallest symmetric margin that the data exclude at alpha: max |ci|."""
        return max(abs(self.ci[0]), abs(self.ci[1]))

    @property
    def mde(self) -> float:
        return float(mde(self.se, self.alpha, self.power, self.df))

    @property
    def floor(self) -> float:
        """The equivalence floor at the requested power."""
        return float(equivalence_floor(self.se, self.alpha, self.power, self.df))

    @property
    def equivalent(self) -> bool:
        return self.p_tost < self.alpha

    @property
    def different(self) -> bool:
        return self.p_difference < self.alpha

    @property
    def verdict(self) -> Verdict:
        if self.equivalent:
            return "equivalent"
        return "different" if self.different else "inconclusive"

    @property
    def mde_exceeds_margin(self) -> bool:
        return self.mde > min(-self.low, self.high)

    @property
    def floor_exceeds_margin(self) -> bool:
        return self.floor > min(-self.low, self.high)

    def summary(self) -> str:
        """One line: the verdict, both p-values, and whether the design could have decided."""
        text = (
            f"{self.verdict}: estimate {self.estimate:.4g} (SE {self.se:.4g}), "
            f"p_TOST = {self.p_tost:.3g} against ({self.low:.4g}, {self.high:.4g}), "
            f"p = {self.p_difference:.3g}"
        )
        if self.equivalent and self.different:
            text += "; different from zero but inside the margin"
        if self.mde_exceeds_margin:
            text += f"; the MDE {self.mde:.4g} exceeds the margin: power under {self.power:.0%} "
            text += "against an effect of the margin's size"
        if self.floor_exceeds_margin:
            text += f"; the equivalence floor {self.floor:.4g} exceeds the margin"
        return text


def tost(
    estimate: float,
    se: float,
    margin: float | tuple[float, float],
    alpha: float = 0.05,
    power: float = 0.80,
    df: float = INF,
) -> TostResult:
    """Equivalence test of a contrast against ``(-margin, margin)`` or ``(low, high)``, by
    two one-sided t tests with ``df`` degrees of freedom (z tests when infinite)."""
    if not df > 0:
        raise InputError("TOST", f"degrees of freedom must be positive, got {df}", "df")
    if not (np.isfinite(estimate) and np.isfinite(se) and se > 0):
        raise InputError("TOST", f"need a finite estimate and a positive SE, got {estimate}, {se}")
    if isinstance(margin, tuple):
        low, high = float(margin[0]), float(margin[1])
    else:
        low, high = -float(margin), float(margin)
    if not low < 0 < high:
        raise InputError("TOST", f"the margin must satisfy low < 0 < high, got ({low}, {high})")
    return TostResult(float(estimate), float(se), low, high, alpha, power, float(df))


@dataclass(frozen=True)
class WaldTest:
    """A joint Wald test of ``L beta = 0``: ``f`` is the Wald statistic over its ``df1``
    (the rank of ``L C L'``), referred to F(``df1``, ``df2``) (``df2`` infinite: chi-squared
    / ``df1``)."""

    f: float
    df1: int
    df2: float
    p: float

    @property
    def chi2(self) -> float:
        return self.f * self.df1


def wald_statistic(
    coef: np.ndarray, cov: np.ndarray, matrix: np.ndarray, *, tol: float = 1e-8
) -> tuple[float, np.ndarray]:
    """``(F, P'L)``: the Wald statistic of ``L beta = 0`` over the rank of ``L C L'``,
    computed in the eigenbasis of ``L C L' = P diag(d) P'`` as lmerTest's ``contestMD`` does
    (directions whose variance ``d`` is below ``tol`` times the largest are dropped), and the
    rotated rows ``P'L`` of the directions kept (one independent contrast each)."""
    c = np.atleast_2d(np.asarray(matrix, dtype=np.float64))
    if c.shape[1] != len(coef):
        raise InputError("wald test", f"a matrix of {len(coef)} columns, got {c.shape[1]}")
    values, vectors = np.linalg.eigh(c @ cov @ c.T)
    keep = values > tol * max(float(values.max(initial=0.0)), 0.0)
    if not keep.any():
        return np.nan, np.zeros((0, len(coef)))
    rotated = vectors[:, keep].T @ c
    estimates = rotated @ coef
    return float(np.sum(estimates**2 / values[keep]) / keep.sum()), rotated


def f_test(f: float, df1: int, df2: float) -> WaldTest:
    """The upper tail of F(``df1``, ``df2``) at ``f`` (chi-squared / df1 when ``df2`` is
    infinite); NaN without a statistic or degrees of freedom."""
    if not (np.isfinite(f) and df1 > 0 and df2 > 0):
        return WaldTest(float(f), int(df1), float(df2), np.nan)
    p = float(stats.f.sf(f, df1, df2) if np.isfinite(df2) else stats.chi2.sf(f * df1, df1))
    return WaldTest(float(f), int(df1), float(df2), p)
