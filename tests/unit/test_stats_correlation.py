"""Pairwise-complete Pearson correlations and Fisher-z intervals against scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from cueaudit.stats.correlation import (
    CONSTANT,
    OK,
    TOO_FEW,
    fisher_ci,
    fisher_z_mean,
    pairwise_pearson,
)


def test_pairwise_pearson_mixed_complete_and_missing_columns() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 4))
    x[[1, 5, 9], 2] = np.nan
    x[[0, 2], 3] = np.nan
    r, n, status = pairwise_pearson(x)
    for i in range(4):
        for j in range(i + 1, 4):
            m = ~np.isnan(x[:, i]) & ~np.isnan(x[:, j])
            assert n[i, j] == m.sum()
            assert r[i, j] == pytest.approx(stats.pearsonr(x[m, i], x[m, j]).statistic)
            assert status[i, j] == OK


def test_pairwise_pearson_marks_too_few_rows_and_constant_columns() -> None:
    x = np.array(
        [
            [1.0, 2.0, 5.0, np.nan],
            [2.0, 1.0, 5.0, 1.0],
            [3.0, 4.0, 5.0, 2.0],
            [4.0, 3.0, 5.0, np.nan],
        ]
    )
    r, n, status = pairwise_pearson(x)
    assert status[0, 2] == CONSTANT and np.isnan(r[0, 2])
    assert n[0, 3] == 2 and status[0, 3] == TOO_FEW and np.isnan(r[0, 3])
    _, _, relaxed = pairwise_pearson(x, min_n=2)
    assert relaxed[0, 3] == OK


@pytest.mark.parametrize("level", [0.90, 0.95, 0.99])
def test_fisher_ci_matches_scipy_pearsonr_confidence_interval(level: float) -> None:
    rng = np.random.default_rng(11)
    a = rng.normal(size=40)
    b = 0.5 * a + rng.normal(size=40)
    result = stats.pearsonr(a, b)
    reference = result.confidence_interval(confidence_level=level)
    low, high = fisher_ci(float(result.statistic), 40, level)
    assert low == pytest.approx(reference.low, abs=1e-12)
    assert high == pytest.approx(reference.high, abs=1e-12)


def test_fisher_ci_needs_more_than_three_rows_and_a_finite_r() -> None:
    assert fisher_ci(0.5, 3) == (None, None)
    assert fisher_ci(float("nan"), 30) == (None, None)
    low, high = fisher_ci(1.0, 30)  # clipped: a finite interval at the boundary
    assert low is not None and high is not None and 0.99 < low <= high <= 1.0


def test_fisher_z_mean_averages_on_the_z_scale_and_skips_missing() -> None:
    r = np.array([0.2, 0.6, np.nan, 0.9])
    n = np.array([10, 30, 50, 5])
    z = np.arctanh(r[[0, 1, 3]])
    assert fisher_z_mean(r) == pytest.approx(float(np.tanh(z.mean())))
    weights = np.array([7.0, 27.0, 2.0])
    assert fisher_z_mean(r, n, "n_minus_3") == pytest.approx(
        float(np.tanh((z * weights).sum() / weights.sum()))
    )
    # the plain mean of r is not the Fisher-z mean: the check tells them apart
    assert fisher_z_mean(r) != pytest.approx(float(np.nanmean(r)))
    assert np.isnan(fisher_z_mean(np.array([np.nan])))
    assert fisher_z_mean(np.array([1.0, 1.0])) == pytest.approx(1.0)
    assert fisher_z_mean(np.array([0.5]), np.array([2]), "n_minus_3") == pytest.approx(0.5)
    with pytest.raises(ValueError, match="weights"):
        fisher_z_mean(r, n, "n")
