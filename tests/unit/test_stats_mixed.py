"""Crossed random-intercept REML against R lme4, statsmodels MixedLM and closed forms."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from cueaudit.errors import InputError
from cueaudit.stats.mixed import fit_crossed_lmm
from tests.r.rscript import run_reference

NAMES = ["intercept", "black", "quality"]


def _crossed(
    seed: int,
    n_bundles: int = 600,
    sd: tuple[float, float, float] = (0.5, 0.15, 0.3),
    beta: tuple[float, float, float] = (3.0, 0.047, 0.2),
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Bundles of four requests, each a random profile (of 12) under a random name pair (of 40,
    a quarter of them Black); profile, pair and bundle intercepts with SDs ``sd``."""
    rng = np.random.default_rng(seed)
    n = 4 * n_bundles
    bundle = np.repeat(np.arange(n_bundles), 4)
    profile = rng.integers(0, 12, n)
    pair = rng.integers(0, 40, n)
    x = np.column_stack([np.ones(n), (pair % 4 == 1).astype(float), rng.normal(size=n)])
    y = (
        x @ np.asarray(beta)
        + rng.normal(0, sd[0], 12)[profile]
        + rng.normal(0, sd[1], 40)[pair]
        + rng.normal(0, sd[2], n_bundles)[bundle]
        + rng.normal(0, 1.0, n)
    )
    return y, x, {"profile": profile, "pair": pair.astype(str), "bundle": bundle}


def _lme4(tmp_path: Path, y: np.ndarray, x: np.ndarray, groups: dict[str, np.ndarray]) -> dict:
    frame = pd.DataFrame({"y": y, **{f"x_{n}": x[:, j] for j, n in enumerate(NAMES)}})
    for k, v in groups.items():
        frame[f"g_{k}"] = v
    return run_reference("lmer_reference.R", "lme4", frame, tmp_path)


@pytest.mark.parametrize(
    ("seed", "n_bundles", "sd"),
    [(1, 600, (0.5, 0.15, 0.3)), (7, 150, (0.5, 0.15, 0.3)), (4, 300, (0.5, 0.0, 0.3))],
    ids=["2400-rows", "600-rows", "zero-pair-variance"],
)
def test_matches_lme4_reml(
    tmp_path: Path, seed: int, n_bundles: int, sd: tuple[float, float, float]
) -> None:
    y, x, groups = _crossed(seed, n_bundles, sd)
    res = fit_crossed_lmm(y, x, groups, NAMES)
    ref = _lme4(tmp_path, y, x, groups)
    assert res.converged
    coef = np.array([ref["fixef"][f"x_{n}"] for n in NAMES])
    se = np.array([ref["se"][f"x_{n}"] for n in NAMES])
    assert np.max(np.abs(res.coef - coef)) < 1e-6
    assert np.max(np.abs(res.se / se - 1)) < 1e-5
    for k in [*groups, "residual"]:
        ref_vc = ref["vc"]["residual" if k == "residual" else f"g_{k}"]
        assert res.variance_components[k] == pytest.approx(ref_vc, rel=1e-4, abs=1e-7), k
    assert res.reml_criterion == pytest.approx(ref["reml"]["criterion"], rel=1e-10)


# BFGS ends on a loss of precision at |grad| ~ 1e-6 and warns, at the optimum all the same
@pytest.mark.filterwarnings("ignore::statsmodels.tools.sm_exceptions.ConvergenceWarning")
def test_matches_statsmodels_mixedlm_with_crossed_variance_components() -> None:
    y, x, groups = _crossed(7, n_bundles=100)
    res = fit_crossed_lmm(y, x, groups, NAMES)
    frame = pd.DataFrame({"y": y, "one": 1, **dict(zip(NAMES, x.T, strict=True)), **groups})
    model = sm.MixedLM.from_formula(
        "y ~ 0 + " + " + ".join(NAMES),
        groups="one",  # one all-in group: the three factors are crossed, not nested
        re_formula="0",
        vc_formula={k: f"0 + C({k})" for k in groups},
        data=frame,
    )
    ref = model.fit(reml=True, method=["bfgs"], gtol=1e-8, maxiter=2000)
    assert np.max(np.abs(res.coef - ref.fe_params.to_numpy())) < 1e-6
    for name, value in zip(model.exog_vc.names, ref.vcomp, strict=True):
        assert res.variance_components[name] == pytest.approx(value, rel=1e-3)
    assert res.variance_components["residual"] == pytest.approx(ref.scale, rel=1e-3)
    # statsmodels' bse_fe inverts the joint Hessian of (beta, variance parameters); its
    # fixed-effect block alone is sigma^2 (X'V^-1 X)^-1, the lme4 convention used here
    hess_fe = model.hessian(ref.params_object)[0][: len(NAMES), : len(NAMES)]
    assert np.allclose(res.se, np.sqrt(np.diag(np.linalg.inv(-hess_fe))), rtol=1e-5, atol=0)
    assert np.allclose(res.se, ref.bse_fe.to_numpy(), rtol=0.02, atol=0)


def test_balanced_one_way_design_has_the_anova_closed_form() -> None:
    rng = np.random.default_rng(3)
    a, m = 30, 6
    g = np.repeat(np.arange(a), m)
    y = 2.0 + rng.normal(0, 0.8, a)[g] + rng.normal(0, 1.0, a * m)
    res = fit_crossed_lmm(y, np.ones((a * m, 1)), {"g": g}, ["intercept"])
    means = y.reshape(a, m).mean(axis=1)
    msb = m * np.sum((means - y.mean()) ** 2) / (a - 1)
    msw = np.sum((y.reshape(a, m) - means[:, None]) ** 2) / (a * (m - 1))
    assert msb > msw  # the closed form holds off the boundary
    assert res.coef[0] == pytest.approx(y.mean(), abs=1e-10)
    assert res.se[0] == pytest.approx(np.sqrt(msb / (a * m)), rel=1e-6)
    assert res.variance_components["g"] == pytest.approx((msb - msw) / m, rel=1e-6)
    assert res.variance_components["residual"] == pytest.approx(msw, rel=1e-6)


def test_factor_order_and_label_types_do_not_matter() -> None:
    y, x, groups = _crossed(2, n_bundles=200)
    res = fit_crossed_lmm(y, x, groups, NAMES)
    relabelled = {k: np.char.add("L", np.asarray(groups[k]).astype(str)) for k in reversed(groups)}
    other = fit_crossed_lmm(y, x, relabelled, NAMES)
    assert np.allclose(res.coef, other.coef, rtol=0, atol=1e-9)
    for k in groups:
        assert res.variance_components[k] == pytest.approx(other.variance_components[k], rel=1e-6)
    assert res.n_levels == {"profile": 12, "pair": 40, "bundle": 200} and res.n_obs == 800
    low, high = res.conf_int()[1]
    assert low < res.coef[1] < high and high - low == pytest.approx(2 * 1.959964 * res.se[1])


def test_bad_input_is_refused() -> None:
    y, x, groups = _crossed(2, n_bundles=50)
    with pytest.raises(InputError, match="rank deficient"):
        fit_crossed_lmm(y, np.column_stack([x, x[:, 1]]), groups, [*NAMES, "copy"])
    with pytest.raises(InputError, match="fewer than two levels"):
        fit_crossed_lmm(y, x, {**groups, "one": np.zeros(len(y))}, NAMES)
    with pytest.raises(InputError, match="labels for"):
        fit_crossed_lmm(y, x, {"profile": groups["profile"][:-1]}, NAMES)
    with pytest.raises(InputError, match="names"):
        fit_crossed_lmm(y, x, groups, NAMES[:2])
    with pytest.raises(InputError, match="non-finite"):
        fit_crossed_lmm(np.where(np.arange(len(y)) == 3, np.nan, y), x, groups, NAMES)
    # four answers, three fixed effects, five random levels (a specification-curve cell of the
    # default run under a permutation): at some variances the profiled criterion is singular
    tiny_x = np.array([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    tiny_groups = {"profile_id": np.array([1, 0, 0, 0]), "pair_id": np.array([1, 0, 1, 2])}
    with pytest.raises(InputError, match="not identifiable from 4 observations"):
        fit_crossed_lmm(np.array([3.0, 1.0, 3.0, 5.0]), tiny_x, tiny_groups, ["a", "b", "c"])


# (planted contrast, SDs of profile, pair, bundle and residual): +0.047 rating points, and
# 0.50 SD of the outcome with name pairs that vary more, so the SE must carry their variance
COVERAGE_CASES = [
    (0.047, (0.6, 0.1, 0.2, 0.9)),
    (0.50 * float(np.sqrt(0.3**2 + 0.25**2 + 0.2**2 + 0.9**2)), (0.3, 0.25, 0.2, 0.9)),
]


@pytest.mark.parametrize(("planted", "sd"), COVERAGE_CASES, ids=["0.047-points", "0.50-SD"])
def test_ci_coverage_of_a_planted_contrast_over_40_simulated_studies(
    planted: float, sd: tuple[float, float, float, float]
) -> None:
    """The decision study's rating design: 12 profiles, each under all 40 name pairs, sent in
    bundles of four names (one per race) of one profile. The contrast is planted on the
    Black pairs (one race in four) and estimated within profile and bundle."""
    rng = np.random.default_rng(int(planted * 1000))
    profile = np.repeat(np.arange(12), 40)
    pair = np.tile(np.arange(40), 12)
    race = pair % 4
    bundle = profile * 10 + pair // 4  # pairs 4j..4j+3 cover the four races
    x = np.column_stack([np.ones(480), (race == 1).astype(float), (race == 2).astype(float)])
    groups = {"profile": profile, "pair": pair, "bundle": bundle}
    covered, estimates = 0, []
    for _ in range(40):
        y = (
            3.0
            + planted * x[:, 1]
            + 0.1 * x[:, 2]
            + rng.normal(0, sd[0], 12)[profile]
            + rng.normal(0, sd[1], 40)[pair]
            + rng.normal(0, sd[2], 120)[bundle]
            + rng.normal(0, sd[3], 480)
        )
        res = fit_crossed_lmm(y, x, groups, NAMES)
        low, high = res.conf_int()[1]
        covered += int(low <= planted <= high)
        estimates.append(res.coef[1])
    assert covered >= 36
    assert abs(np.mean(estimates) - planted) < 3 * np.std(estimates) / np.sqrt(40)


def test_an_outcome_fitted_exactly_is_an_input_error_not_a_linalg_crash() -> None:
    # y is exactly 1 + 2x: no residual variance is left (a leave-one-out subsample of a tiny
    # design can be like this); the contrast becomes "not estimable" instead of a traceback
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(12), rng.integers(0, 2, 12)])
    groups = {"profile": np.arange(12) % 3, "pair": np.arange(12) % 4}
    with pytest.raises(InputError, match="the outcome is fitted exactly"):
        fit_crossed_lmm(1.0 + 2.0 * x[:, 1], x, groups, ["intercept", "x"])


def test_one_blas_thread_inside_the_block() -> None:
    from threadpoolctl import threadpool_info

    from cueaudit.stats.mixed import one_blas_thread

    with one_blas_thread():
        inside = {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}
    assert inside == {1}
