"""The cluster bootstrap of a ratio of sums over clusters' sufficient statistics, and its
percentile interval.

A cluster ``i`` contributes ``total_i`` (the sum of its outcomes) and ``count_i`` (their
number) to each of ``k`` series; a replicate draws the clusters with replacement and its mean
is ``sum_i w_i total_i / sum_i w_i count_i``, ``w_i`` the times cluster ``i`` was drawn. That
equals resampling the clusters' rows themselves, without touching them (validated against
that direct resampling and against ``scipy.stats.bootstrap`` in
tests/unit/test_stats_bootstrap.py).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

#: Replicates x clusters handled at once (bounds memory).
CHUNK_CELLS = 4_000_000


class ClusterBootstrap:
    """Resampling counts (``n_boot`` x P) of P clusters, drawn with ``default_rng(seed)`` per
    P, so the replicates of a set of clusters depend only on (seed, n_boot, P): two cells of
    the same size share their draws, and a cell's draws do not depend on the cells before it.
    The counts of the last ``cache_size`` values of P are kept."""

    def __init__(self, n_boot: int, seed: int, cache_size: int = 4) -> None:
        self.n_boot, self.seed, self.cache_size = n_boot, seed, cache_size
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()

    def weights(self, p: int) -> np.ndarray:
        """How often each of ``p`` clusters is drawn in each replicate (rows sum to ``p``)."""
        if p in self._cache:
            self._cache.move_to_end(p)
            return self._cache[p]
        rng = np.random.default_rng(self.seed)
        dtype = np.uint8 if p < 2**8 else np.uint16 if p < 2**16 else np.uint32
        out = np.empty((self.n_boot, p), dtype=dtype)
        step = max(1, CHUNK_CELLS // p)
        for start in range(0, self.n_boot, step):
            m = min(step, self.n_boot - start)
            idx = rng.integers(0, p, size=(m, p))
            idx += np.arange(m, dtype=idx.dtype)[:, None] * p
            out[start : start + m] = np.bincount(idx.ravel(), minlength=m * p).reshape(m, p)
        self._cache[p] = out
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return out

    def replicate_means(self, total: np.ndarray, count: np.ndarray) -> np.ndarray:
        """``n_boot`` x k resampled means of P x k cluster sums ``total`` over counts
        ``count`` (NaN where a replicate draws no count of a series)."""
        p, k = total.shape
        out = np.full((self.n_boot, k), np.nan)
        if p == 0 or self.n_boot == 0:
            return out
        w = self.weights(p)
        step = max(1, CHUNK_CELLS // p)
        for start in range(0, self.n_boot, step):
            wc = w[start : start + step].astype(np.float64)
            num, den = wc @ total, wc @ count
            np.divide(num, den, out=out[start : start + step], where=den > 0)
        return out


def percentile_ci(reps: np.ndarray, level: float) -> tuple[float | None, float | None, int]:
    """The percentile interval of the finite replicates (None without any), and how many
    replicates were not finite."""
    finite = reps[np.isfinite(reps)]
    n_bad = int(reps.size - finite.size)
    if finite.size == 0:
        return None, None, n_bad
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(finite, [alpha, 1.0 - alpha])
    return float(lo), float(hi), n_bad
