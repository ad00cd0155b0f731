"""Confidence intervals of a binomial proportion.

The Wilson score interval (validated against statsmodels
``proportion_confint(method="wilson")`` in tests/unit/test_stats_proportions.py) is preferred
to the Wald interval for rates near 0 and 1, where the Wald interval collapses to a point.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from cueaudit.errors import InputError


def wilson_interval(
    k: int | np.ndarray, n: int | np.ndarray, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of ``k`` successes in ``n`` trials (NaN where ``n`` is 0)."""
    if not 0 < level < 1:
        raise InputError("Wilson interval", f"level must lie in (0, 1), got {level}", "level")
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if np.any(k < 0) or np.any(k > n):
        raise InputError("Wilson interval", "need 0 <= k <= n", "k")
    z2 = float(stats.norm.ppf(0.5 + level / 2)) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / n
        denom = 1.0 + z2 / n
        centre = (p + z2 / (2 * n)) / denom
        half = np.sqrt(p * (1 - p) / n + z2 / (4 * n**2)) * np.sqrt(z2) / denom
        low = np.where(k == 0, 0.0, np.clip(centre - half, 0.0, 1.0))
        high = np.where(k == n, 1.0, np.clip(centre + half, 0.0, 1.0))
    low, high = np.where(n > 0, low, np.nan), np.where(n > 0, high, np.nan)
    return low, high
