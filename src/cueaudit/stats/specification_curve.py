"""Inference on a specification curve (Simonsohn, Simmons & Nelson 2020, "Specification curve
analysis", Nature Human Behaviour 4: 1208-1214): every estimate a set of defensible analysis
choices produces, tested as a whole against the null that the effect is zero everywhere.

A curve is ``k`` specifications, each an estimate and the p-value of its own test. Its
statistics (:func:`curve_statistics`), computed over the specifications whose estimate and
p-value are both finite:

- the **median** estimate; its test statistic is ``|median|`` (two-sided);
- the **share significant**: the share of specifications with ``p < alpha``;
- the **dominant-sign count**: the number with ``p < alpha`` in the sign that has more of them
  (each curve's own dominant sign, so the statistic is symmetric in the sign; 0 when none is
  significant).

Specifications are not independent (they share the data), so their null distribution comes
from curves recomputed on data made null in a way that keeps the dependence: here permuted
data, every specification refitted under the same permutation (one row of the permuted
matrices per permutation). A statistic's p-value is the share of permuted curves at least as
extreme as the observed one, counting the observed curve itself (Phipson & Smyth 2010):
``(1 + #{T_b >= T_obs}) / (1 + B)``. When the ``B`` permutations are every distinct relabelling
but the identity this is the exact permutation p-value; when they are drawn without
replacement it is a valid one. "At least as extreme" allows a relative tolerance of
:data:`TOLERANCE`, so a permutation that reproduces the observed curve up to rounding (a swap
of two labels the contrast does not compare) counts as a tie, and ties count against the
observed. A permuted curve without any usable specification is left out of ``B``.

:func:`within_strata_permutations` draws the relabellings: labels permuted among units within
strata (race labels among name pairs of one gender), all distinct ones when there are at most
as many as asked for, else a sample without replacement. No study names, no I/O; checked
against hand-computed values in tests/unit/test_stats_specification_curve.py.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from cueaudit.errors import InputError

#: Relative tolerance of "at least as extreme".
TOLERANCE: Final = 1e-9
#: Enumerate the distinct relabellings when there are at most this many (else sample).
ENUMERATION_LIMIT: Final = 200_000
#: Draws per requested relabelling before sampling gives up on finding new distinct ones.
_DRAWS_PER_PERMUTATION: Final = 50


@dataclass(frozen=True)
class CurveStatistics:
    """The statistics of one curve over its ``specifications`` usable ones (NaN median and
    share when there are none)."""

    specifications: int
    median: float
    significant: int
    share_significant: float
    dominant_sign: int  # +1, -1, or 0 (no significant specification, or as many each way)
    dominant: int  # significant specifications in the dominant sign


@dataclass(frozen=True)
class CurveTest:
    """The observed curve's statistics and their permutation p-values over ``permutations``
    permuted curves (NaN p-values without any)."""

    observed: CurveStatistics
    p_median: float
    p_share: float
    p_dominant: float
    permutations: int


def _vectors(estimates: object, p_values: object) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(estimates, dtype=np.float64)
    p = np.asarray(p_values, dtype=np.float64)
    if y.shape != p.shape:
        raise InputError("specification curve", f"estimates {y.shape} but p-values {p.shape}")
    return y, p


def curve_statistics(
    estimates: Sequence[float] | np.ndarray,
    p_values: Sequence[float] | np.ndarray,
    alpha: float,
) -> CurveStatistics:
    """The median, share significant (``p < alpha``) and dominant-sign count of one curve,
    over the specifications with a finite estimate and p-value."""
    if not 0 < alpha < 1:
        raise InputError("specification curve", f"alpha {alpha} is not in (0, 1)", "alpha")
    y, p = _vectors(estimates, p_values)
    if y.ndim != 1:
        raise InputError("specification curve", f"one curve is a vector, got shape {y.shape}")
    usable = np.isfinite(y) & np.isfinite(p)
    y, p = y[usable], p[usable]
    if not len(y):
        return CurveStatistics(0, np.nan, 0, np.nan, 0, 0)
    significant = p < alpha
    up = int(np.sum(significant & (y > 0)))
    down = int(np.sum(significant & (y < 0)))
    sign = 1 if up > down else -1 if down > up else 0
    return CurveStatistics(
        specifications=len(y),
        median=float(np.median(y)),
        significant=int(significant.sum()),
        share_significant=float(significant.mean()),
        dominant_sign=sign,
        dominant=max(up, down),
    )


def _tests(stats: CurveStatistics) -> tuple[float, float, float]:
    """The three test statistics of a curve: |median|, share significant, dominant count."""
    if stats.specifications == 0:
        return np.nan, np.nan, np.nan
    return abs(stats.median), stats.share_significant, float(stats.dominant)


def permutation_p(observed: float, permuted: np.ndarray, tolerance: float = TOLERANCE) -> float:
    """``(1 + #{permuted >= observed}) / (1 + B)`` over the ``B`` finite permuted values, with
    ``observed`` lowered by ``tolerance`` relative to its size (ties count as extreme); NaN
    when ``observed`` is not finite or no permuted value is."""
    values = np.asarray(permuted, dtype=np.float64)
    values = values[np.isfinite(values)]
    if not np.isfinite(observed) or not len(values):
        return np.nan
    bound = observed - tolerance * max(1.0, abs(observed))
    return float((1 + np.sum(values >= bound)) / (1 + len(values)))


def curve_test(
    estimates: Sequence[float] | np.ndarray,
    p_values: Sequence[float] | np.ndarray,
    permuted_estimates: np.ndarray,
    permuted_p_values: np.ndarray,
    alpha: float,
) -> CurveTest:
    """The observed curve's statistics and their permutation p-values. ``permuted_*`` are
    ``B x k`` (one row per permutation, the specifications in the observed order; ``B`` may
    be 0)."""
    observed = curve_statistics(estimates, p_values, alpha)
    k = np.asarray(estimates).shape[0]
    ye, pe = _vectors(permuted_estimates, permuted_p_values)
    if ye.size == 0:
        ye, pe = ye.reshape(0, k), pe.reshape(0, k)
    if ye.ndim != 2 or ye.shape[1] != k:
        raise InputError(
            "specification curve", f"permuted curves of shape {ye.shape}, expected (B, {k})"
        )
    null = np.array(
        [_tests(curve_statistics(ye[b], pe[b], alpha)) for b in range(ye.shape[0])]
    ).reshape(-1, 3)
    used = int(np.isfinite(null[:, 0]).sum())
    p = [permutation_p(t, null[:, j]) for j, t in enumerate(_tests(observed))]
    return CurveTest(observed, p[0], p[1], p[2], used)


# --- relabellings ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Relabellings:
    """Permuted labels, one row per relabelling (never the identity), and how they came about:
    ``distinct`` relabellings other than the identity exist; ``exhaustive`` when the rows are
    all of them."""

    labels: np.ndarray  # B x n
    distinct: int
    exhaustive: bool


def distinct_relabellings(labels: Sequence[object], strata: Sequence[object]) -> int:
    """How many distinct labellings permuting ``labels`` within ``strata`` gives, the
    identity included: the product over strata of the multinomial coefficients."""
    total = 1
    for stratum in _strata(labels, strata).values():
        counts = Counter(stratum)
        total *= math.factorial(len(stratum)) // math.prod(
            math.factorial(c) for c in counts.values()
        )
    return total


def _strata(labels: Sequence[object], strata: Sequence[object]) -> dict[object, list[object]]:
    if len(labels) != len(strata):
        raise InputError("relabellings", f"{len(labels)} labels but {len(strata)} strata")
    groups: dict[object, list[object]] = {}
    for label, stratum in zip(labels, strata, strict=True):
        groups.setdefault(stratum, []).append(label)
    return groups


def _multiset_permutations(counts: dict[object, int], size: int) -> Iterator[tuple[object, ...]]:
    if size == 0:
        yield ()
        return
    for value in sorted(counts, key=str):
        if counts[value]:
            counts[value] -= 1
            for rest in _multiset_permutations(counts, size - 1):
                yield (value, *rest)
            counts[value] += 1


def within_strata_permutations(
    labels: Sequence[object],
    strata: Sequence[object],
    n: int,
    rng: np.random.Generator,
) -> Relabellings:
    """Up to ``n`` distinct relabellings of ``labels`` permuted within ``strata`` (each unit
    keeps its stratum), none the identity: every one when there are at most ``n``, else ``n``
    drawn without replacement (uniformly among the distinct ones)."""
    if n < 0:
        raise InputError("relabellings", f"a non-negative number of permutations, got {n}")
    values = np.asarray(list(labels), dtype=object)
    groups = _strata(labels, strata)
    where = {s: [i for i, t in enumerate(strata) if t == s] for s in groups}
    distinct = distinct_relabellings(labels, strata) - 1
    identity = tuple(values.tolist())
    if n == 0 or distinct == 0:
        return Relabellings(np.empty((0, len(values)), dtype=object), distinct, distinct == 0)
    if distinct + 1 <= ENUMERATION_LIMIT:
        per_stratum = [
            list(_multiset_permutations(dict(Counter(groups[s])), len(groups[s]))) for s in groups
        ]
        every = []
        for combination in itertools.product(*per_stratum):
            row = np.empty(len(values), dtype=object)
            for s, assigned in zip(groups, combination, strict=True):
                row[where[s]] = assigned
            if tuple(row.tolist()) != identity:
                every.append(row)
        chosen = (
            range(len(every))
            if len(every) <= n
            else sorted(rng.choice(len(every), size=n, replace=False).tolist())
        )
        rows = [every[i] for i in chosen]
        return Relabellings(np.array(rows, dtype=object), distinct, len(rows) == distinct)
    seen: set[tuple[object, ...]] = {identity}
    rows = []
    for _ in range(_DRAWS_PER_PERMUTATION * n):
        row = values.copy()
        for s in groups:
            row[where[s]] = values[where[s]][rng.permutation(len(where[s]))]
        key = tuple(row.tolist())
        if key not in seen:
            seen.add(key)
            rows.append(row)
            if len(rows) == n:
                break
    return Relabellings(np.array(rows, dtype=object).reshape(-1, len(values)), distinct, False)
