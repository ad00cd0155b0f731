"""Planted effects: the simulator writes pipeline-schema tables with known effects and the
analyses recover them (estimates near the truth, the truth inside the 95% CI)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from cueaudit.probing.analysis.race_prediction import race_prediction_metrics
from cueaudit.probing.analysis.ratios import group_means, outcome_ratios
from cueaudit.probing.analysis.readability import readability_ols
from cueaudit.probing.analysis.regression import fe_regressions
from cueaudit.probing.analysis.summary import sample_sizes
from cueaudit.probing.analysis.tables import connect
from cueaudit.probing.analysis.validity import (
    deviation_correlations,
    fisher_average,
    prompt_deviations,
)
from tests.helpers.probing_simulator import (
    SimSpec,
    simulate,
    true_correlation,
    true_race_metrics,
    true_ratio,
)

CUES = ("name_rosenman", "explicit", "dialog_cad", "dialect_aave")
SPEC = SimSpec(
    tasks={"salary": "usd"},
    cues=CUES,
    models=("m1", "m2"),
    seeds=(0, 1),
    n_base=150,
    variants=2,
    level=1.0,
    tau=0.1,
    sigma=0.3,
    mu={"explicit": {"Black": 0.15, "White": -0.05}, "dialect_aave": {"Black": -0.1}},
    loadings={
        "name_rosenman/Black": [0.4, 0.0],
        "name_rosenman/White": [0.4, 0.0],
        "explicit/Black": [0.24, 0.32],
        "explicit/White": [0.0, 0.4],
        "dialog_cad/Black": [0.0, 0.4],
        "dialog_cad/White": [0.0, 0.4],
        "dialect_aave/Black": [0.2, -0.2],
    },
    fk_shift={"dialog_cad": 5.0, "dialect_aave": -0.65, "explicit": 1.6},
    p_label={
        "explicit": {"Black": (0.95, 0.02), "White": (0.01, 0.01)},
        "dialect_aave": {"Black": (0.15, 0.05)},
        "name_rosenman": {"Black": (0.12, 0.03), "White": (0.03, 0.03)},
    },
    beta_inferred={"Black": 0.08, "Unknown": 0.03},
    beta_fk=-0.012,
    seed=42,
)


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    written = simulate(SPEC, tmp_path_factory.mktemp("sim"))
    return connect(written["prompts"], written["outcomes"], dict(SPEC.tasks))


def test_ratios_recover_planted_group_ratios(con) -> None:  # type: ignore[no-untyped-def]
    ratios = outcome_ratios(con, "race", n_boot=400, seed=1)
    assert ratios.height == len(SPEC.models) * len(CUES)
    covered = 0
    for rec in ratios.iter_rows(named=True):
        truth = true_ratio(SPEC, rec["cue"])
        covered += rec["ci_low"] <= truth <= rec["ci_high"]
        assert rec["ratio"] == pytest.approx(truth, abs=2 * (rec["ci_high"] - rec["ci_low"]))
    assert covered >= ratios.height - 1  # 8 nominal-95% CIs: at most one miss
    dialect = ratios.filter(pl.col("cue") == "dialect_aave")
    assert set(dialect["reference_cue"]) == {"none"}


def test_group_means_recover_planted_means(con) -> None:  # type: ignore[no-untyped-def]
    from tests.helpers.probing_simulator import expected_mean

    means = group_means(con, "race", n_boot=400, seed=2)
    covered = 0
    for rec in means.iter_rows(named=True):
        race = None if rec["group"] == "none" else rec["group"]
        truth = expected_mean(SPEC, rec["cue"], race)
        covered += rec["ci_low"] <= truth <= rec["ci_high"]
        assert rec["mean"] == pytest.approx(truth, abs=2 * (rec["ci_high"] - rec["ci_low"]))
    assert means.height == 2 * 8
    assert covered >= means.height - 2


def test_correlations_recover_planted_correlations(con) -> None:  # type: ignore[no-untyped-def]
    corr = deviation_correlations(prompt_deviations(con, "race"))
    n_resp = len(SPEC.seeds) * SPEC.variants  # responses per base prompt and gender
    sizes = {c: 2 * n_resp for c in ("name_rosenman", "explicit", "dialog_cad")}
    sizes["dialect_aave"] = n_resp
    n_0 = len(SPEC.seeds)
    checked = covered = 0
    for rec in corr.iter_rows(named=True):
        a, b = (rec["cue_a"], rec["group_a"]), (rec["cue_b"], rec["group_b"])
        truth = true_correlation(SPEC, a, b, sizes[a[0]], sizes[b[0]], n_0)
        covered += rec["ci_low"] <= truth <= rec["ci_high"]
        assert rec["r"] == pytest.approx(truth, abs=0.2)
        checked += 1
    assert checked == 2 * 21
    assert covered >= 36  # 42 nominal-95% CIs (P(fewer than 36) < 0.1%)
    # within-cue cross-race pairs of names are the most similar, as planted
    avg = fisher_average(corr)
    names = avg.filter((pl.col("cue_a") == "name_rosenman") & (pl.col("cue_b") == "name_rosenman"))[
        "r"
    ].item()
    assert names > 0.6


def _vector(dev: pl.DataFrame, model: str, cue: str) -> np.ndarray:
    cell = dev.filter(
        (pl.col("model") == model) & (pl.col("cue") == cue) & (pl.col("group") == "Black")
    )
    return cell.sort("base_id")["deviation"].to_numpy()


def test_correlations_and_fisher_average_agree_with_scipy_and_pingouin(con) -> None:  # type: ignore[no-untyped-def]
    dev = prompt_deviations(con, "race")
    corr = deviation_correlations(dev)
    rec = corr.filter(
        (pl.col("cue_a") == "explicit") & (pl.col("group_a") == "Black")
        & (pl.col("cue_b") == "name_rosenman") & (pl.col("group_b") == "Black")
    )  # fmt: skip
    rs = []
    for model in SPEC.models:
        x = _vector(dev, model, "explicit")
        y = _vector(dev, model, "name_rosenman")
        ref = stats.pearsonr(x, y)
        got = rec.filter(pl.col("model") == model).row(0, named=True)
        assert got["r"] == pytest.approx(ref.statistic, abs=1e-12)
        ci = ref.confidence_interval(0.95)
        assert (got["ci_low"], got["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
        pingouin = pytest.importorskip("pingouin")
        assert got["r"] == pytest.approx(pingouin.corr(x, y)["r"].item(), abs=1e-12)
        rs.append(ref.statistic)
    avg = fisher_average(corr).filter(
        (pl.col("cue_a") == "explicit") & (pl.col("group_a") == "Black")
        & (pl.col("cue_b") == "name_rosenman") & (pl.col("group_b") == "Black")
    )["r"].item()  # fmt: skip
    assert avg == pytest.approx(np.tanh(np.mean(np.arctanh(rs))), abs=1e-12)  # equal n


def test_race_prediction_metrics_recover_planted_rates(con) -> None:  # type: ignore[no-untyped-def]
    metrics = race_prediction_metrics(con).filter(pl.col("task") == "all")
    for rec in metrics.iter_rows(named=True):
        truth = true_race_metrics(SPEC, rec["cue"])
        for what in ("precision", "recall"):
            expected = truth[f"{what}_{rec['class']}"]
            if expected is None:
                assert rec["recall"] is None and "no parsed predictions" in rec["note"]
                continue
            n = rec["predicted"] if what == "precision" else rec["support"]
            tol = 4 * np.sqrt(expected * (1 - expected) / n) + 1e-3
            assert rec[what] == pytest.approx(expected, abs=tol), (rec, what)
        if rec["precision"] and rec["recall"]:
            p, r = rec["precision"], rec["recall"]
            assert rec["f1"] == pytest.approx(2 * p * r / (p + r))


def test_readability_recovers_planted_fk_shifts(con) -> None:  # type: ignore[no-untyped-def]
    import statsmodels.formula.api as smf

    table = readability_ols(con, ["salary"])
    for rec in table.filter(pl.col("term") != "intercept").iter_rows(named=True):
        truth = SPEC.fk_shift.get(rec["term"], 0.0)
        z = stats.norm.ppf(0.975)
        assert rec["coef"] - z * rec["se"] <= truth <= rec["coef"] + z * rec["se"], rec
    prompts = con.sql("SELECT cue, fk_grade FROM prompts WHERE task = 'salary'").pl().to_pandas()
    ref = smf.ols("fk_grade ~ C(cue, Treatment('none'))", data=prompts).fit()
    got = {r["term"]: r for r in table.iter_rows(named=True)}
    for name, coef in ref.params.items():
        term = "intercept" if name == "Intercept" else name.split("[T.")[1].rstrip("]")
        assert got[term]["coef"] == pytest.approx(coef, abs=1e-8)
        assert got[term]["se"] == pytest.approx(ref.bse[name], rel=1e-8)
    assert got["intercept"]["r2"] == pytest.approx(ref.rsquared, abs=1e-10)
    assert got["intercept"]["f_statistic"] == pytest.approx(ref.fvalue, rel=1e-8)


REG_SPEC = SimSpec(
    tasks={"legal": "usd"},
    cues=CUES,
    models=("m1", "m2"),
    n_base=120,
    level=1.0,
    sigma=0.3,
    # cued-race effects common to every cue (White 0, Black 0.02, no cue 0.05): the FE model
    # of Tables 5-7 is then correctly specified
    mu={**{c: {"Black": 0.02} for c in CUES}, "none": {"none": 0.05}},
    fk_shift=SPEC.fk_shift,
    p_label=SPEC.p_label,
    beta_inferred={"Black": 0.08, "Unknown": 0.03},
    beta_fk=-0.012,
    seed=7,
)


def test_regressions_recover_planted_coefficients(tmp_path: Path) -> None:
    written = simulate(REG_SPEC, tmp_path)
    c = connect(written["prompts"], written["outcomes"], dict(REG_SPEC.tasks))
    table = fe_regressions(c)
    spec3 = table.filter(pl.col("spec") == 3)
    truth = {"inferred_Black": 0.08, "inferred_Unknown": 0.03, "cued_Black": 0.02,
             "cued_None": 0.05, "fk_grade": -0.012}  # fmt: skip
    z = stats.norm.ppf(0.975)
    covered = 0
    for rec in spec3.iter_rows(named=True):
        err = abs(rec["coef"] - truth[rec["term"]])
        covered += err <= z * rec["se_cluster"]
        assert err <= 4 * rec["se_cluster"], rec
    assert spec3.height == 10
    assert covered >= 9
    assert set(table["spec"]) == {1, 2, 3}
    assert table["note"].is_null().all()
    assert (table["se_cluster"] > 0).all() and (table["n_prompts"] == REG_SPEC.n_base).all()


def _coverage_spec(rep: int) -> SimSpec:
    return SimSpec(
        tasks={"salary": "usd"}, cues=("name_rosenman",), models=("m",), seeds=(0,),
        n_base=25, variants=1, level=1.0, tau=0.25, sigma=0.2,
        mu={"name_rosenman": {"Black": 0.1}},
        loadings={"name_rosenman/Black": [0.2]},
        race_prediction=False, seed=1000 + rep,
    )  # fmt: skip


def test_bootstrap_ci_coverage_over_repeated_simulations(tmp_path: Path) -> None:
    """40 simulated studies: the 95% cluster-bootstrap CI of the ratio must cover the truth in
    at least 31 (P(fewer) < 0.1% at 93% coverage; a CI ignoring the prompt clustering covers
    about half the time here and fails)."""
    covered = 0
    for rep in range(40):
        spec = _coverage_spec(rep)
        written = simulate(spec, tmp_path / str(rep))
        c = connect(written["prompts"], written["outcomes"], dict(spec.tasks))
        rec = outcome_ratios(c, "race", n_boot=300, seed=rep).row(0, named=True)
        covered += rec["ci_low"] <= true_ratio(spec, "name_rosenman") <= rec["ci_high"]
    assert covered >= 31, covered


def test_edge_cases_give_notes_not_nan(tmp_path: Path) -> None:
    spec = SimSpec(
        tasks={"healthcare": "binary"}, cues=("name_rosenman", "dialect_aave", "explicit"),
        seeds=(0,), n_base=8, unparsed_cues=("explicit",), seed=3,
    )  # fmt: skip
    written = simulate(spec, tmp_path)
    c = connect(written["prompts"], written["outcomes"], dict(spec.tasks))
    ratios = {r["cue"]: r for r in outcome_ratios(c, "race", n_boot=100).iter_rows(named=True)}
    assert ratios["explicit"]["ratio"] is None
    assert "no parsed outcomes" in ratios["explicit"]["note"]
    assert ratios["dialect_aave"]["reference_cue"] == "none"  # White missing: baseline used
    means = group_means(c, "race", n_boot=100)
    assert not means["mean"].is_nan().any()
    sizes = sample_sizes(c)
    assert sizes.filter(pl.col("cue") == "explicit")["note"].str.contains("no parsed").all()
    assert sizes.filter(pl.col("cue") != "explicit")["note"].str.contains("single seed").all()
    gender = outcome_ratios(c, "gender", n_boot=50)
    assert "dialect_aave" not in set(gender["cue"])  # dialect carries no gender
