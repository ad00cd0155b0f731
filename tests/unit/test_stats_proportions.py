"""The Wilson score interval against statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from cueaudit.errors import InputError
from cueaudit.stats.proportions import wilson_interval


@pytest.mark.parametrize("level", [0.90, 0.95, 0.99])
def test_wilson_interval_matches_statsmodels(level: float) -> None:
    k = np.array([0, 1, 2, 5, 17, 49, 50, 3, 0, 7])
    n = np.array([50, 50, 3, 10, 40, 50, 50, 3, 1, 200])
    low, high = wilson_interval(k, n, level)
    ref_low, ref_high = proportion_confint(k, n, alpha=1 - level, method="wilson")
    np.testing.assert_allclose(low, ref_low, atol=1e-12)
    np.testing.assert_allclose(high, ref_high, atol=1e-12)
    assert low[0] == 0.0 and high[6] == 1.0


def test_wilson_interval_without_trials_is_nan_and_bad_counts_are_refused() -> None:
    low, high = wilson_interval(np.array([0, 1]), np.array([0, 2]))
    assert np.isnan(low[0]) and np.isnan(high[0]) and 0 < low[1] < 0.5 < high[1] < 1
    with pytest.raises(InputError, match="k <= n"):
        wilson_interval(3, 2)
    with pytest.raises(InputError, match="level"):
        wilson_interval(1, 2, 1.5)
