"""CR1 / CR2 cluster-robust covariances and Satterthwaite degrees of freedom against R
clubSandwich (lm, and lmer with a random intercept nested in the clusters), and the CR2
property that defines it: unbiased under a correct working model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from cueaudit.errors import InputError
from cueaudit.stats.mixed import fit_crossed_lmm
from cueaudit.stats.robust import cluster_robust
from tests.r.rscript import run_reference

NAMES = ("intercept", "x", "binary", "cluster_level")


def _clustered(seed: int, n_clusters: int = 30) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clusters of 2-8 rows, a cluster-level regressor, a cluster intercept and
    heteroscedastic noise."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 9, n_clusters)
    cluster = np.repeat(np.arange(n_clusters), sizes)
    n = len(cluster)
    binary = (rng.random(n) < 0.4).astype(float)
    x = np.column_stack(
        [np.ones(n), rng.normal(size=n), binary, rng.normal(size=n_clusters)[cluster]]
    )
    noise = rng.normal(size=n) * (1.0 + 0.5 * binary)
    y = x @ np.array([1.0, 0.5, -0.3, 0.2]) + rng.normal(0, 0.7, n_clusters)[cluster] + noise
    return y, x, cluster


def _club(tmp_path: Path, y: np.ndarray, x: np.ndarray, cluster: np.ndarray, nested: bool) -> dict:
    frame = pd.DataFrame({"y": y, **{f"x_{k}": x[:, j] for j, k in enumerate(NAMES)}})
    frame["cluster"] = cluster
    if nested:
        frame["g_cluster"] = cluster
    return run_reference("clubsandwich_reference.R", "clubSandwich", frame, tmp_path)


@pytest.mark.parametrize("seed", [3, 11])
def test_ols_cr2_and_satterthwaite_equal_clubsandwich(tmp_path: Path, seed: int) -> None:
    y, x, cluster = _clustered(seed)
    robust = cluster_robust(x, y, cluster)
    ref = _club(tmp_path, y, x, cluster, nested=False)
    for j, name in enumerate(NAMES):
        test = robust.test(np.eye(len(NAMES))[j])
        assert test.estimate == pytest.approx(ref["estimate"][f"x_{name}"], abs=1e-10)
        assert test.se == pytest.approx(ref["se"][f"x_{name}"], rel=1e-8)
        assert test.df == pytest.approx(ref["df"][f"x_{name}"], rel=1e-8)
        assert test.p == pytest.approx(ref["p"][f"x_{name}"], rel=1e-8)


def test_gls_cr2_of_a_nested_random_intercept_equals_clubsandwich(tmp_path: Path) -> None:
    y, x, cluster = _clustered(3)
    fit = fit_crossed_lmm(y, x, {"cluster": cluster}, list(NAMES))
    robust = cluster_robust(
        x, y, cluster, coef=fit.coef, groups={"cluster": cluster}, theta=fit.theta
    )
    ref = _club(tmp_path, y, x, cluster, nested=True)
    for j, name in enumerate(NAMES):
        test = robust.test(np.eye(len(NAMES))[j])
        assert test.estimate == pytest.approx(ref["estimate"][f"x_{name}"], abs=1e-6)
        assert test.se == pytest.approx(ref["se"][f"x_{name}"], rel=1e-5)
        assert test.df == pytest.approx(ref["df"][f"x_{name}"], rel=1e-5)
        assert test.p == pytest.approx(ref["p"][f"x_{name}"], rel=1e-4)


def test_cr1_equals_statsmodels_cluster_covariance() -> None:
    y, x, cluster = _clustered(5)
    robust = cluster_robust(x, y, cluster)
    ref = sm.OLS(y, x).fit(cov_type="cluster", cov_kwds={"groups": cluster})
    assert np.allclose(robust.cov_cr1, ref.cov_params(), rtol=1e-10, atol=0)
    assert robust.test(np.eye(4)[1], cov="cr1").df == 29


def test_cr1_of_a_gls_fit_without_random_effects_is_ols_cluster() -> None:
    rng = np.random.default_rng(2)
    n, clusters = 300, rng.integers(0, 40, 300)
    x = np.column_stack([np.ones(n), rng.normal(size=n), rng.integers(0, 2, n)])
    y = x @ [1.0, 0.5, -0.2] + rng.normal(size=n) + rng.normal(size=40)[clusters]
    ols = sm.OLS(y, x).fit(cov_type="cluster", cov_kwds={"groups": clusters})
    groups = {"g": rng.integers(0, 7, n), "h": clusters}
    cov = cluster_robust(
        x, y, clusters, coef=ols.params, groups=groups, theta={"g": 0.0, "h": 0.0}
    ).cov_cr1
    np.testing.assert_allclose(cov, ols.cov_params(), rtol=1e-10)


def test_cr1_of_a_gls_fit_matches_the_dense_sandwich() -> None:
    rng = np.random.default_rng(3)
    n = 240
    groups = {"a": rng.integers(0, 60, n), "b": rng.integers(0, 9, n), "c": rng.integers(0, 5, n)}
    theta = {"a": 0.7, "b": 0.4, "c": 0.0}
    x = np.column_stack([np.ones(n), rng.normal(size=n)])
    y = x @ [0.3, 1.0] + rng.normal(size=n)
    clusters = groups["a"] // 3
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    residual = y - x @ coef
    v = np.eye(n)
    for name, labels in groups.items():
        z = (labels[:, None] == np.unique(labels)[None, :]).astype(float)
        v += theta[name] ** 2 * z @ z.T
    w = np.linalg.solve(v, x)
    bread = np.linalg.inv(x.T @ w)
    g = np.unique(clusters)
    scores = np.array([(w * residual[:, None])[clusters == k].sum(axis=0) for k in g])
    factor = len(g) / (len(g) - 1) * (n - 1) / (n - 2)
    expected = factor * bread @ scores.T @ scores @ bread
    cov = cluster_robust(x, y, clusters, coef=coef, groups=groups, theta=theta).cov_cr1
    np.testing.assert_allclose(cov, expected, rtol=1e-9)


def test_cr2_is_unbiased_when_the_working_model_is_right() -> None:
    """With homoscedastic independent errors and OLS as the working model, the CR2 variance
    averages to the true variance of the coefficient over simulated samples (CR1 is biased
    for a cluster-level regressor with 12 clusters)."""
    rng = np.random.default_rng(0)
    sizes = rng.integers(2, 9, 12)
    cluster = np.repeat(np.arange(12), sizes)
    n = len(cluster)
    x = np.column_stack([np.ones(n), rng.normal(size=12)[cluster] * (1 + np.arange(n) % 2)])
    truth = np.linalg.inv(x.T @ x)[1, 1]
    cr2, cr1 = [], []
    for _ in range(4000):
        robust = cluster_robust(x, x @ np.array([1.0, 0.5]) + rng.normal(size=n), cluster)
        cr2.append(robust.cov_cr2[1, 1])
        cr1.append(robust.cov_cr1[1, 1])
    assert np.mean(cr2) == pytest.approx(truth, rel=0.03)
    assert abs(np.mean(cr1) / truth - 1) > 0.05


def test_bad_input_is_refused() -> None:
    y, x, cluster = _clustered(3)
    with pytest.raises(InputError, match="two clusters"):
        cluster_robust(x, y, np.zeros(len(y)))
    with pytest.raises(InputError, match="collinear"):
        cluster_robust(np.column_stack([x, x[:, 1]]), y, cluster)
    with pytest.raises(InputError, match="one row per observation"):
        cluster_robust(x, y[:-1], cluster)
