"""Cochran's Q, I² and tau² against statsmodels ``combine_effects`` and metafor's published BCG
vaccine example; the joint Wald tests of the mixed model and of the cluster-robust covariance
against statsmodels (and R lmerTest ``contestMD`` / clubSandwich ``Wald_test`` where R is
installed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from statsmodels.stats.meta_analysis import combine_effects

from cueaudit.stats.heterogeneity import cochran_q
from cueaudit.stats.mixed import fit_crossed_lmm, satterthwaite_f_df
from cueaudit.stats.robust import cluster_robust
from tests.r.rscript import run_reference
from tests.unit.test_stats_mixed import NAMES, _crossed
from tests.unit.test_stats_robust import NAMES as OLS_NAMES
from tests.unit.test_stats_robust import _clustered

#: metafor's dat.bcg (Colditz et al. 1994): TB cases / non-cases, vaccinated and not.
BCG = np.array(
    [
        [4, 119, 11, 128], [6, 300, 29, 274], [3, 228, 11, 209], [62, 13536, 248, 12619],
        [33, 5036, 47, 5761], [180, 1361, 372, 1079], [8, 2537, 10, 619],
        [505, 87886, 499, 87892], [29, 7470, 45, 7232], [17, 1699, 65, 1600],
        [186, 50448, 141, 27197], [5, 2493, 3, 2338], [27, 16886, 29, 17825],
    ],
    dtype=float,
)  # fmt: skip


def bcg_log_risk_ratios() -> tuple[np.ndarray, np.ndarray]:
    """metafor ``escalc(measure = "RR")``: log risk ratios and their sampling variances."""
    tpos, tneg, cpos, cneg = BCG.T
    yi = np.log(tpos / (tpos + tneg)) - np.log(cpos / (cpos + cneg))
    vi = 1 / tpos - 1 / (tpos + tneg) + 1 / cpos - 1 / (cpos + cneg)
    return yi, vi


def test_q_and_i2_equal_metafors_bcg_example() -> None:
    yi, vi = bcg_log_risk_ratios()
    het = cochran_q(yi, np.sqrt(vi))
    # rma(yi, vi, data = dat.bcg, method = "DL"): Q(df = 12) = 152.2330, I^2 = 92.12%,
    # tau^2 = 0.3088, estimate -0.7141 (se 0.1787)
    assert het.q == pytest.approx(152.2330, abs=5e-4)
    assert het.df == 12
    assert het.p < 1e-4
    assert 100 * het.i2 == pytest.approx(92.12, abs=5e-3)
    assert het.tau2 == pytest.approx(0.3088, abs=5e-5)
    assert het.random == pytest.approx(-0.7141, abs=5e-5)
    assert het.random_se == pytest.approx(0.1787, abs=5e-5)


@pytest.mark.parametrize("seed", [0, 5])
def test_q_i2_tau2_and_means_equal_statsmodels_combine_effects(seed: int) -> None:
    rng = np.random.default_rng(seed)
    se = rng.uniform(0.05, 0.3, 9)
    y = rng.normal(0.2, 0.15, 9) + rng.normal(0, se)
    het = cochran_q(y, se)
    ref = combine_effects(y, se**2, method_re="dl")
    assert het.q == pytest.approx(ref.q, rel=1e-12)
    assert het.i2 == pytest.approx(ref.i2, rel=1e-12)
    assert het.tau2 == pytest.approx(ref.tau2, rel=1e-10)
    assert het.fixed == pytest.approx(ref.mean_effect_fe, rel=1e-12)
    assert het.fixed_se == pytest.approx(ref.sd_eff_w_fe, rel=1e-12)
    assert het.random == pytest.approx(ref.mean_effect_re, rel=1e-10)


def test_unusable_levels_are_left_out_and_too_few_give_nan() -> None:
    het = cochran_q(np.array([0.1, np.nan, 0.3, 0.2]), np.array([0.1, 0.1, np.nan, 0.1]))
    assert het.k == 2 and het.df == 1
    assert het.q == pytest.approx((0.1 - 0.15) ** 2 / 0.01 * 2)
    assert np.isnan(cochran_q(np.array([0.1]), np.array([0.1])).q)


def test_a_wald_test_of_one_row_is_the_squared_t_test() -> None:
    y, x, groups = _crossed(7, 150)
    res = fit_crossed_lmm(y, x, groups, NAMES)
    row = np.array([0.0, 1.0, -1.0])
    t = res.test(row)
    w = res.wald_test(row[None, :])
    assert w.df1 == 1
    assert w.f == pytest.approx(t.t**2, rel=1e-10)
    assert w.df2 == pytest.approx(t.df, rel=1e-10)
    assert w.p == pytest.approx(t.p, rel=1e-8)


def test_the_mixed_wald_statistic_equals_statsmodels_mixedlm_and_drops_redundant_rows() -> None:
    y, x, groups = _crossed(7, n_bundles=100)
    res = fit_crossed_lmm(y, x, groups, NAMES)
    matrix = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 1.0]])  # rank 2
    w = res.wald_test(matrix)
    assert w.df1 == 2
    # an independent fit: statsmodels MixedLM with the three factors crossed, its fixed
    # effects and the fixed-effect block of its Hessian (lme4's vcov convention)
    frame = pd.DataFrame({"y": y, "one": 1, **dict(zip(NAMES, x.T, strict=True)), **groups})
    model = sm.MixedLM.from_formula(
        "y ~ 0 + " + " + ".join(NAMES),
        groups="one",
        re_formula="0",
        vc_formula={k: f"0 + C({k})" for k in groups},
        data=frame,
    )
    ref = model.fit(reml=True, method=["bfgs"], gtol=1e-8, maxiter=2000)
    cov = np.linalg.inv(-model.hessian(ref.params_object)[0][: len(NAMES), : len(NAMES)])
    lb = matrix[:2] @ ref.fe_params.to_numpy()
    f = float(lb @ np.linalg.solve(matrix[:2] @ cov @ matrix[:2].T, lb)) / 2
    assert w.f == pytest.approx(f, rel=1e-4)
    # lmerTest's denominator df from the two directions' Satterthwaite df
    assert 0 < w.df2 < np.inf


def test_lmertest_denominator_df_rule() -> None:
    assert satterthwaite_f_df(np.array([12.0])) == 12.0
    assert satterthwaite_f_df(np.array([30.0, 30.0])) == 30.0
    assert satterthwaite_f_df(np.array([1.5, 40.0])) == 2.0
    e = 10 / 8 + 40 / 38
    assert satterthwaite_f_df(np.array([10.0, 40.0])) == pytest.approx(2 * e / (e - 2))


@pytest.mark.slow
def test_the_mixed_wald_test_equals_lmertest_contestmd(tmp_path: Path) -> None:
    y, x, groups = _crossed(1, 300)
    res = fit_crossed_lmm(y, x, groups, NAMES)
    matrix = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    frame = pd.DataFrame({"y": y, **{f"x_{n}": x[:, j] for j, n in enumerate(NAMES)}})
    for k, v in groups.items():
        frame[f"g_{k}"] = v
    columns = [f"x_{n}" for n in NAMES]
    pd.DataFrame(matrix, columns=columns).to_csv(tmp_path / "L.csv", index=False)
    weights = pd.DataFrame([{"name": "first", **dict(zip(columns, matrix[0], strict=True))}])
    weights.to_csv(tmp_path / "contrasts.csv", index=False)
    ref = run_reference(
        "lmertest_reference.R", "lmerTest", frame, tmp_path,
        str(tmp_path / "contrasts.csv"), str(tmp_path / "L.csv"),
    )  # fmt: skip
    w = res.wald_test(matrix)
    assert res.test(matrix[0]).df == pytest.approx(ref["df"]["first"], rel=1e-4)
    assert w.f == pytest.approx(ref["F"]["joint"], rel=1e-5)
    assert w.df2 == pytest.approx(ref["df2"]["joint"], rel=1e-4)
    assert w.p == pytest.approx(ref["p"]["joint"], rel=1e-4)


def test_the_cluster_robust_wald_test_equals_statsmodels_cluster_f_test() -> None:
    y, x, cluster = _clustered(3)
    robust = cluster_robust(x, y, cluster)
    matrix = np.array([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, -1.0]])
    ref = (
        sm.OLS(y, x)
        .fit(cov_type="cluster", cov_kwds={"groups": cluster}, use_t=True)
        .f_test(matrix)
    )
    w = robust.wald_test(matrix, cov="cr1")
    assert w.f == pytest.approx(float(ref.fvalue), rel=1e-8)
    assert (w.df1, w.df2) == (2, float(ref.df_denom))
    assert w.p == pytest.approx(float(ref.pvalue), rel=1e-8)
    assert robust.wald_test(matrix).f != pytest.approx(w.f, rel=1e-3)  # CR2 differs


def test_the_cluster_robust_wald_test_equals_clubsandwich(tmp_path: Path) -> None:
    y, x, cluster = _clustered(11)
    matrix = np.array([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, -1.0]])
    frame = pd.DataFrame({"y": y, **{f"x_{k}": x[:, j] for j, k in enumerate(OLS_NAMES)}})
    frame["cluster"] = cluster
    pd.DataFrame(matrix, columns=[f"x_{n}" for n in OLS_NAMES]).to_csv(
        tmp_path / "L.csv", index=False
    )
    ref = run_reference(
        "clubsandwich_wald_reference.R", "clubSandwich", frame, tmp_path, str(tmp_path / "L.csv")
    )
    w = cluster_robust(x, y, cluster).wald_test(matrix)
    assert w.f == pytest.approx(ref["F"]["joint"], rel=1e-8)
    assert w.df2 == pytest.approx(ref["df2"]["joint"], rel=1e-12)
    assert w.p == pytest.approx(ref["p"]["joint"], rel=1e-8)
