"""CR1 / CR2 cluster-robust covariances and Satterthwaite degrees of freedom against R
clubSandwich (lm, and lmer with a random intercept nested in the clusters), and the CR2
property that defines it: unbiased under a correct working model. The cross-covariance of two
estimates through shared factor levels against statsmodels and R sandwich (one-way cluster
covariances of a stacked OLS), and against its pairwise definition for multi-level units."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from cueaudit.errors import InputError
from cueaudit.stats.mixed import fit_crossed_lmm
from cueaudit.stats.robust import cluster_robust, cross_covariance, influence
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


# --- the cross-covariance of two estimates through shared levels -----------------------------
def cgm_cross_covariance(
    psi_a: np.ndarray,
    labels_a: Mapping[str, np.ndarray],
    psi_b: np.ndarray,
    labels_b: Mapping[str, np.ndarray],
) -> float:
    """The cross-covariance this project used before: Cameron, Gelbach & Miller's multiway
    inclusion-exclusion, ``sum_F (-1)^(|F|+1) sum_g s^a_g s^b_g`` over every non-empty set of
    factors ``F`` (so minus the profile x pair cells). Kept as the deliberately wrong estimator
    the calibration tests must reject (tests/unit/test_decision_contrasts.py)."""
    factors = list(labels_a)
    total = 0.0
    for size in range(1, len(factors) + 1):
        for subset in combinations(factors, size):
            key_a = [_key(labels_a, subset, i) for i in range(len(psi_a))]
            key_b = [_key(labels_b, subset, i) for i in range(len(psi_b))]
            levels, inverse = np.unique(np.array(key_a + key_b), return_inverse=True)
            sums_a = np.bincount(inverse[: len(key_a)], psi_a, minlength=len(levels))
            sums_b = np.bincount(inverse[len(key_a) :], psi_b, minlength=len(levels))
            total += (-1) ** (size + 1) * float(sums_a @ sums_b)
    return total


def _key(labels: Mapping[str, np.ndarray], subset: tuple[str, ...], i: int) -> str:
    return "\x1f".join(str(labels[f][i]) for f in subset)


def _two_equations(seed: int) -> dict:
    """Two OLS fits on different observations that share name pairs and profiles: each
    outcome carries the level's pair and profile effects, correlated across the equations."""
    rng = np.random.default_rng(seed)
    pair_effect, profile_effect = rng.normal(0, 0.6, (2, 15)), rng.normal(0, 0.8, (2, 8))
    out = {}
    for k, (eq, n) in enumerate((("a", 160), ("b", 120))):
        pair, profile = rng.integers(0, 15, n), rng.integers(0, 8, n)
        x = np.column_stack([np.ones(n), rng.normal(size=n) + 0.3 * pair_effect[0][pair]])
        y = x @ [0.5, 0.2] + pair_effect[k][pair] + profile_effect[k][profile] + rng.normal(size=n)
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        psi = influence(x, x, y - x @ coef, np.array([0.0, 1.0]))
        out[eq] = {"x": x, "y": y, "psi": psi, "pair": pair, "profile": profile}
    return out


def _stacked(eqs: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The two equations as one OLS with a block-diagonal design (columns a0, a1, b0, b1)."""
    a, b = eqs["a"], eqs["b"]
    zeros_a, zeros_b = np.zeros((len(a["y"]), 2)), np.zeros((len(b["y"]), 2))
    x = np.block([[a["x"], zeros_a], [zeros_b, b["x"]]])
    y = np.concatenate([a["y"], b["y"]])
    return (
        x,
        y,
        np.concatenate([a["pair"], b["pair"]]),
        np.concatenate([a["profile"], b["profile"]]),
    )


def _labels(eq: dict) -> dict[str, np.ndarray]:
    return {"pair_id": eq["pair"], "profile_id": eq["profile"]}


def test_cross_covariance_is_the_one_way_cluster_covariances_of_a_stacked_ols() -> None:
    """The covariance of the two slopes is the off-diagonal element of the stacked OLS's
    cluster covariance (statsmodels, no small-sample factor) by pair plus the one by profile."""
    eqs = _two_equations(1)
    x, y, pair, profile = _stacked(eqs)
    expected = 0.0
    for groups in (pair, profile):
        fit = sm.OLS(y, x).fit(
            cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False}
        )
        expected += fit.cov_params()[1, 3]
    a, b = eqs["a"], eqs["b"]
    got = cross_covariance(a["psi"], _labels(a), b["psi"], _labels(b))
    assert got == pytest.approx(expected, rel=1e-10)
    assert abs(expected) > 1e-4  # the shared effects make it far from zero
    # the estimate of a with itself by pair alone is statsmodels' CR0 variance
    alone = cross_covariance(a["psi"], {"pair_id": a["pair"]}, a["psi"], {"pair_id": a["pair"]})
    cr0 = sm.OLS(a["y"], a["x"]).fit(
        cov_type="cluster", cov_kwds={"groups": a["pair"], "use_correction": False}
    )
    assert alone == pytest.approx(cr0.cov_params()[1, 1], rel=1e-10)


def test_cross_covariance_and_the_old_cgm_sum_against_r_sandwich(tmp_path: Path) -> None:
    """R sandwich's vcovCL of the stacked lm: the one-way terms by pair and by profile sum to
    ``cross_covariance``; its two-way CGM covariance (minus the pair x profile cells) is what
    the old estimator computed."""
    eqs = _two_equations(2)
    x, y, pair, profile = _stacked(eqs)
    frame = pd.DataFrame(
        {"y": y, **{f"x_{k}": x[:, j] for j, k in enumerate(("a0", "a1", "b0", "b1"))}}
    )
    frame["pair"], frame["profile"] = pair, profile
    ref = run_reference("crosscov_reference.R", "sandwich", frame, tmp_path, "x_a1", "x_b1")
    a, b = eqs["a"], eqs["b"]
    ref_pair, ref_profile = ref["pair"]["x_a1:x_b1"], ref["profile"]["x_a1:x_b1"]
    got = cross_covariance(a["psi"], _labels(a), b["psi"], _labels(b))
    assert got == pytest.approx(ref_pair + ref_profile, rel=1e-8)
    old = cgm_cross_covariance(a["psi"], _labels(a), b["psi"], _labels(b))
    assert old == pytest.approx(ref["two_way"]["x_a1:x_b1"], rel=1e-8)
    assert abs(old - got) > 1e-3 * abs(got)


def test_a_unit_is_a_member_of_every_level_its_observations_show() -> None:
    """With units (a ranking's candidates), the covariance is its pairwise definition: every
    two units' influences times the number of levels they share, summed over the factors."""
    rng = np.random.default_rng(4)
    n_a, n_b = 90, 80
    labels_a = {"pair_id": rng.integers(0, 12, n_a), "profile_id": rng.integers(0, 6, n_a)}
    labels_b = {"pair_id": rng.integers(0, 12, n_b), "profile_id": rng.integers(0, 6, n_b)}
    psi_a, psi_b = rng.normal(size=n_a), rng.normal(size=n_b)
    units_b = np.repeat(np.arange(n_b // 4), 4)  # rankings of four candidates
    rng.shuffle(units_b)

    def pairwise(units_a: np.ndarray, units_b: np.ndarray) -> float:
        total = 0.0
        for f in labels_a:
            levels_a = {u: set(labels_a[f][units_a == u]) for u in np.unique(units_a)}
            levels_b = {u: set(labels_b[f][units_b == u]) for u in np.unique(units_b)}
            for u, la in levels_a.items():
                for w, lb in levels_b.items():
                    shared = len(la & lb)
                    if shared:
                        total += shared * psi_a[units_a == u].sum() * psi_b[units_b == w].sum()
        return total

    own_a, own_b = np.arange(n_a), np.arange(n_b)
    plain = cross_covariance(psi_a, labels_a, psi_b, labels_b)
    assert plain == pytest.approx(pairwise(own_a, own_b), rel=1e-12)
    grouped = cross_covariance(psi_a, labels_a, psi_b, labels_b, units_b=units_b.astype(str))
    assert grouped == pytest.approx(pairwise(own_a, units_b), rel=1e-12)
    assert abs(grouped - plain) > 0.1 * abs(plain)
    units_a = np.repeat(np.arange(n_a // 3), 3)
    both = cross_covariance(psi_a, labels_a, psi_b, labels_b, units_a=units_a, units_b=units_b)
    assert both == pytest.approx(pairwise(units_a, units_b), rel=1e-12)


def test_cross_covariance_refuses_mismatched_input() -> None:
    psi, labels = np.ones(4), {"pair_id": np.array([1, 1, 2, 2])}
    with pytest.raises(InputError, match="same factors"):
        cross_covariance(psi, labels, psi, {"profile_id": labels["pair_id"]})
    with pytest.raises(InputError, match="one influence, label and unit per observation"):
        cross_covariance(psi, labels, psi[:3], labels)
    with pytest.raises(InputError, match="one influence, label and unit per observation"):
        cross_covariance(psi, labels, psi, labels, units_b=np.arange(3))
