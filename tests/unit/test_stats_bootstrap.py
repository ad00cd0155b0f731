"""The cluster bootstrap on sufficient statistics against direct resampling and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from cueaudit.stats.bootstrap import ClusterBootstrap, percentile_ci


def _clusters(rng: np.random.Generator, p: int) -> list[np.ndarray]:
    """Outcomes of p clusters of two series, clusters of 1-4 rows, some series empty."""
    return [
        np.array([rng.integers(0, 2, size=rng.integers(0, 4)), rng.normal(size=3)], dtype=object)
        for _ in range(p)
    ]


@pytest.mark.parametrize("n_boot", [1, 37])
def test_replicate_means_equal_resampling_the_clusters_rows(n_boot: int) -> None:
    rng = np.random.default_rng(5)
    clusters = _clusters(rng, 9)
    total = np.array([[float(np.sum(s)) for s in c] for c in clusters])
    count = np.array([[float(len(s)) for s in c] for c in clusters])
    boot = ClusterBootstrap(n_boot, seed=3)
    means = boot.replicate_means(total, count)
    # the reference: draw the clusters, then pool their rows
    draws = np.random.default_rng(3).integers(0, 9, size=(n_boot, 9))
    for b in range(n_boot):
        for s in range(2):
            rows = np.concatenate([np.asarray(clusters[i][s], dtype=float) for i in draws[b]])
            expected = rows.mean() if rows.size else np.nan
            np.testing.assert_allclose(means[b, s], expected, rtol=1e-12)
    assert (boot.weights(9).sum(axis=1) == 9).all()


def test_draws_depend_only_on_seed_size_and_count() -> None:
    a, b = ClusterBootstrap(50, seed=1, cache_size=1), ClusterBootstrap(50, seed=1)
    first = a.weights(12).copy()
    a.weights(7)  # evicts 12 from a's cache
    assert np.array_equal(a.weights(12), first)
    assert np.array_equal(b.weights(12), first)
    assert not np.array_equal(ClusterBootstrap(50, seed=2).weights(12), first)


def test_percentile_interval_of_the_mean_agrees_with_scipy_bootstrap() -> None:
    rng = np.random.default_rng(8)
    y = rng.exponential(size=60)
    boot = ClusterBootstrap(20_000, seed=4)
    reps = boot.replicate_means(y[:, None], np.ones((60, 1)))[:, 0]
    low, high, n_bad = percentile_ci(reps, 0.90)
    ref = stats.bootstrap(
        (y,), np.mean, n_resamples=20_000, confidence_level=0.90, method="percentile",
        random_state=np.random.default_rng(9),
    ).confidence_interval  # fmt: skip
    se = y.std(ddof=1) / np.sqrt(len(y))
    assert n_bad == 0
    assert low == pytest.approx(ref.low, abs=0.05 * se)
    assert high == pytest.approx(ref.high, abs=0.05 * se)


def test_percentile_ci_drops_and_counts_undefined_replicates() -> None:
    reps = np.array([np.nan, 1.0, 2.0, 3.0, 4.0, 5.0, np.inf])
    low, high, n_bad = percentile_ci(reps, 0.5)
    assert (low, high, n_bad) == (2.0, 4.0, 2)
    assert percentile_ci(np.array([np.nan]), 0.95) == (None, None, 1)
