"""Group-sequential boundaries from an alpha-spending function (Lan & DeMets 1983).

A design looks at the data ``K`` times, at information fractions ``0 < t_1 < ... < t_K = 1``
(the share of the final information each look has: its share of the planned bundles when the
slots are exchangeable). The spending function ``alpha(t)`` says how much of the type I error
the looks up to ``t`` may use; look ``k``'s critical value ``c_k`` is the one at which the
probability under H0 of crossing first at look ``k`` equals ``alpha(t_k) - alpha(t_{k-1})``.

Spending functions, as R ``rpact`` defines them (``typeOfDesign = "asOF"`` / ``"asP"``), for a
one-sided ``alpha``:

- O'Brien-Fleming type: ``alpha(t) = 2 (1 - Phi(z_{1 - alpha/2} / sqrt(t)))``;
- Pocock type: ``alpha(t) = alpha log(1 + (e - 1) t)``.

A two-sided design (symmetric boundaries ``|Z_k| >= c_k``) at total ``alpha`` spends
``2 alpha_1(t; alpha / 2)`` with the O'Brien-Fleming type and ``alpha log(1 + (e - 1) t)``
with the Pocock type (rpact's convention); its exit probabilities count both tails.

The exit probabilities are integrals over the joint law of the sequential z statistics
(``Z_k = S_k / sqrt(I_k)`` with independent Gaussian increments of the score ``S``), computed
by the recursive numerical integration of Armitage, McPherson & Rowe (1969) on Simpson grids,
deterministic to about 1e-10. Validated against rpact in tests/unit/test_stats_sequential.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import optimize, stats

from cueaudit.errors import InputError

Spending = Literal["obrien_fleming", "pocock"]
SPENDING: tuple[Spending, ...] = ("obrien_fleming", "pocock")

#: Grid points per unit of standard deviation, and how far the grid reaches below the mean
_POINTS_PER_SD = 60
_REACH_SD = 9.0


def alpha_spent(
    fractions: Sequence[float] | np.ndarray, alpha: float, spending: Spending, sided: int = 1
) -> np.ndarray:
    """The cumulative type I error ``alpha(t)`` the looks at ``fractions`` may have spent."""
    t = np.asarray(fractions, dtype=float)
    if spending == "obrien_fleming":
        one_sided = alpha if sided == 1 else alpha / 2
        spent = 2 * stats.norm.sf(stats.norm.isf(one_sided / 2) / np.sqrt(t))
        return spent if sided == 1 else 2 * spent
    if spending == "pocock":
        return alpha * np.log1p((np.e - 1) * t)
    raise InputError(
        "alpha spending", f"{spending!r} is unknown; known: {', '.join(SPENDING)}", "spending"
    )


@dataclass(frozen=True)
class Boundaries:
    """A group-sequential design's boundaries on the z scale, one entry per look."""

    fractions: tuple[float, ...]
    critical: tuple[float, ...]
    """Reject at look ``k`` when ``Z_k >= critical[k]`` (one-sided) or ``|Z_k| >=`` it."""
    alpha_spent: tuple[float, ...]
    """Cumulative type I error spent up to each look."""
    nominal: tuple[float, ...]
    """The nominal p-value of each look's critical value (rpact's ``stageLevels``: one-sided
    in both designs)."""
    alpha: float
    spending: Spending
    sided: int


def _check(fractions: Sequence[float], alpha: float, sided: int) -> np.ndarray:
    t = np.asarray(fractions, dtype=float)
    if t.ndim != 1 or t.size == 0:
        raise InputError("group-sequential design", "give at least one look", "fractions")
    if np.any(~np.isfinite(t)) or np.any(t <= 0) or np.any(t > 1) or np.any(np.diff(t) <= 0):
        raise InputError(
            "group-sequential design",
            f"information fractions {t.tolist()} must increase strictly within (0, 1]",
            "fractions",
        )
    if not 0 < alpha < 1:
        raise InputError("group-sequential design", f"{alpha} must lie in (0, 1)", "alpha")
    if sided not in (1, 2):
        raise InputError("group-sequential design", f"{sided} must be 1 or 2", "sided")
    return t


class _Recursion:
    """The sub-density of the score ``S_k`` on the paths that have not yet crossed, on a
    Simpson grid, under drift ``theta`` (``S_k ~ N(theta I_k, I_k)``, ``I_k = t_k``)."""

    def __init__(self, theta: float, sided: int) -> None:
        self.theta, self.sided = theta, sided
        self.grid: np.ndarray | None = None
        self.weights: np.ndarray | None = None
        self.t_last = 0.0

    def exit_probability(self, c: float, t: float) -> float:
        """Probability of crossing first at the look at ``t`` with critical value ``c``."""
        upper = c * np.sqrt(t)
        mean_step = self.theta * (t - self.t_last)
        if self.grid is None:
            sd = np.sqrt(t)
            p = stats.norm.sf((upper - self.theta * t) / sd)
            if self.sided == 2:
                p += stats.norm.cdf((-upper - self.theta * t) / sd)
            return float(p)
        sd = np.sqrt(t - self.t_last)
        tail = stats.norm.sf((upper - self.grid - mean_step) / sd)
        if self.sided == 2:
            tail = tail + stats.norm.cdf((-upper - self.grid - mean_step) / sd)
        return float(self.weights @ tail)

    def advance(self, c: float, t: float) -> None:
        """Move the sub-density to the look at ``t``, keeping the paths below ``c``."""
        upper = c * np.sqrt(t)
        lower = -upper if self.sided == 2 else self.theta * t - _REACH_SD * np.sqrt(t)
        n = max(int((upper - lower) * _POINTS_PER_SD / np.sqrt(t)) // 2 * 2 + 1, 101)
        grid = np.linspace(lower, upper, n)
        h = (upper - lower) / (n - 1)
        simpson = np.ones(n)
        simpson[1:-1:2], simpson[2:-1:2] = 4, 2
        simpson *= h / 3
        if self.grid is None:
            density = stats.norm.pdf(grid, self.theta * t, np.sqrt(t))
        else:
            sd = np.sqrt(t - self.t_last)
            step = (grid[:, None] - self.grid[None, :] - self.theta * (t - self.t_last)) / sd
            density = (stats.norm.pdf(step) / sd) @ self.weights
        self.grid, self.weights, self.t_last = grid, simpson * density, t


def boundaries(
    fractions: Sequence[float],
    alpha: float = 0.025,
    spending: Spending = "obrien_fleming",
    sided: int = 1,
) -> Boundaries:
    """The critical values of a Lan-DeMets design at the looks ``fractions``."""
    t = _check(fractions, alpha, sided)
    spent = alpha_spent(t, alpha, spending, sided)
    increments = np.diff(spent, prepend=0.0)
    recursion = _Recursion(0.0, sided)
    critical: list[float] = []
    for t_k, a_k in zip(t, increments, strict=True):
        c = optimize.brentq(
            lambda c, t, a: recursion.exit_probability(c, t) - a, 0.0, 40.0, (t_k, a_k), xtol=1e-12
        )
        critical.append(float(c))
        recursion.advance(c, t_k)
    return Boundaries(
        fractions=tuple(float(x) for x in t),
        critical=tuple(critical),
        alpha_spent=tuple(float(x) for x in spent),
        nominal=tuple(float(stats.norm.sf(c)) for c in critical),
        alpha=alpha,
        spending=spending,
        sided=sided,
    )


def crossing_probabilities(design: Boundaries, drift: float = 0.0) -> np.ndarray:
    """Probability of stopping first at each look when ``E[Z at t = 1] = drift`` (the
    standardised effect at full information); their sum is the design's power, or its type I
    error at ``drift = 0``."""
    recursion = _Recursion(drift, design.sided)
    out = []
    for t_k, c in zip(design.fractions, design.critical, strict=True):
        out.append(recursion.exit_probability(c, t_k))
        recursion.advance(c, t_k)
    return np.asarray(out)


def reject_at(design: Boundaries, z: Sequence[float]) -> int | None:
    """The first look (0-based) whose z statistic crosses its boundary, or None. ``z`` holds
    the statistics of the looks taken so far (fewer than the design's looks at an interim)."""
    if len(z) > len(design.critical):
        raise InputError(
            "group-sequential design",
            f"{len(z)} looks taken; the design has {len(design.critical)}",
        )
    for k, (value, c) in enumerate(zip(z, design.critical, strict=False)):
        if (abs(value) if design.sided == 2 else value) >= c:
            return k
    return None
