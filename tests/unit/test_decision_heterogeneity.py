"""Contrasts per model, mode and paraphrase, their heterogeneity, race x gender cells and mode
differences (issue 23) on the decision-audit simulator: per-level fits are the family's fits of
the level's rows; on the balanced Rate design the joint fits' estimates equal statsmodels OLS
(GLS equals OLS on a balanced crossed design); a planted model x group interaction that
cancels in the pooled contrast is recovered per model and rejected by Q and by the Wald test;
Q's null rejection rate is alpha, and a Q with the wrong degrees of freedom fails that check."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import statsmodels.formula.api as smf

from cueaudit.decision.analysis import heterogeneity as het
from cueaudit.decision.analysis.contrasts import fit_cell
from cueaudit.decision.analysis.simulate import build_design, simulate
from cueaudit.decision.analysis.simulation_settings import SimulationSettings
from cueaudit.decision.preregistration import load_preregistration
from cueaudit.errors import InputError
from cueaudit.stats.heterogeneity import cochran_q

ROOT = Path(__file__).resolve().parents[2]
PREREG = load_preregistration(ROOT / "config/decision/preregistration.yaml")
KEY = ("hiring", "rate", "black_vs_white")
SMALL = {
    "domains": ["hiring"],
    "paraphrases": 1,
    "profiles_per_tier": 2,
    "names_per_cell": 2,
    "bundles_per_type": {"disguised_demographic": 12},
    "probe_bundles": 0,
    "tasks": ["decision_rate_text", "decision_rate_tool", "decision_rank_json"],
}


def settings(design: dict | None = None, **kw: object) -> SimulationSettings:
    options: dict[str, object] = {"models": ("m1", "m2", "m3"), "root": str(ROOT)} | kw
    return SimulationSettings(design=SMALL if design is None else design, **options)  # type: ignore[arg-type]


def opposite(size: float) -> dict[str, dict[tuple[str, str, str], float]]:
    return {"m1": {KEY: size}, "m2": {KEY: -size}}


@pytest.fixture(scope="module")
def frames():
    return simulate(settings(model_planted=opposite(0.35), rate_scale=0.9), 3)


@pytest.fixture(scope="module")
def by_level(frames) -> pl.DataFrame:
    return het.contrasts_by(frames, PREREG)


def test_per_level_rows_are_the_family_fit_of_the_levels_rows(frames, by_level) -> None:
    assert dict(by_level.schema) == dict(het.CONTRASTS_BY_SCHEMA)
    assert set(by_level["by"]) == {"model", "mode", "paraphrase"}
    assert by_level["label"].str.starts_with("exploratory: per-").all()
    for by, level, fmt in (
        ("model", "m2", "rate"),
        ("mode", "tool", "rate"),
        ("model", "m3", "rank"),
    ):
        part = dataclasses.replace(
            frames,
            judgements=frames.judgements.filter(pl.col(by) == level),
            rankings=frames.rankings.filter(pl.col(by) == level),
        )
        fit = fit_cell(part, "hiring", fmt)
        for contrast, e in fit.estimates.items():
            row = by_level.filter(
                (pl.col("by") == by) & (pl.col("level") == level)
                & (pl.col("contrast_id") == f"hiring.{fmt}.{contrast}")
            )  # fmt: skip
            assert row.height == 1
            assert row["estimate"][0] == pytest.approx(e.estimate, abs=1e-12)
            assert row["se"][0] == pytest.approx(e.se, rel=1e-10)
    # one paraphrase: its row is the pooled cell's
    pooled = fit_cell(frames, "hiring", "rate").estimates["black_vs_white"]
    row = by_level.filter((pl.col("by") == "paraphrase") & (pl.col("contrast_id") == ".".join(KEY)))
    assert row["estimate"][0] == pytest.approx(pooled.estimate, abs=1e-12)


def test_joint_rate_estimates_equal_statsmodels_ols_on_the_balanced_design(
    frames, by_level
) -> None:
    rows = frames.judgements.filter(pl.col("format") == "rate").to_pandas()
    rows["cell"] = rows["race"] + "_" + rows["gender"]
    ols = smf.ols(
        "y ~ C(cell, Treatment('White_male')) + C(model) + C(mode) + C(profile_id)", rows
    ).fit()
    table = het.estimate_intersectional(frames, PREREG)
    assert dict(table.schema) == dict(het.INTERSECTIONAL_SCHEMA)
    cells = table.filter((pl.col("format") == "rate") & (pl.col("kind") == "cell"))
    assert cells.height == 7
    for row in cells.iter_rows(named=True):
        name = f"C(cell, Treatment('White_male'))[T.{row['race']}_{row['gender']}]"
        assert row["estimate"] == pytest.approx(ols.params[name], abs=1e-8)
    interaction = table.filter((pl.col("format") == "rate") & (pl.col("kind") == "interaction"))
    assert interaction["df1"][0] == 3 and 0 <= interaction["p_value"][0] <= 1
    # the joint fit's mode difference is the difference of the per-mode estimates here
    modes = het.estimate_mode_differences(frames, PREREG, per_mode=by_level)
    assert dict(modes.schema) == dict(het.MODE_DIFFERENCES_SCHEMA)
    diff = modes.filter(pl.col("contrast_id") == ".".join(KEY))
    assert diff["modes"][0] == "tool-text"
    per_mode = by_level.filter((pl.col("by") == "mode") & (pl.col("contrast_id") == ".".join(KEY)))
    level = dict(zip(per_mode["level"], per_mode["estimate"], strict=True))
    assert diff["estimate"][0] == pytest.approx(level["tool"] - level["text"], abs=1e-8)
    assert np.isfinite(diff["se"][0]) and np.isfinite(diff["se_independent"][0])


def test_opposite_model_effects_cancel_pooled_and_show_per_model(frames, by_level) -> None:
    per_model = by_level.filter(
        (pl.col("by") == "model") & (pl.col("contrast_id") == ".".join(KEY))
    )
    got = dict(
        zip(
            per_model["level"],
            zip(per_model["estimate"], per_model["se"], strict=True),
            strict=True,
        )
    )
    for model, truth in (("m1", 0.35), ("m2", -0.35), ("m3", 0.0)):
        estimate, se = got[model]
        assert abs(estimate - truth) < 3.5 * se, model
    pooled = fit_cell(frames, "hiring", "rate").estimates["black_vs_white"]
    assert abs(pooled.estimate) < 3.5 * pooled.se
    table = het.estimate_heterogeneity(frames, PREREG, per_level=by_level)
    assert dict(table.schema) == dict(het.HETEROGENEITY_SCHEMA)
    row = table.filter((pl.col("by") == "model") & (pl.col("contrast_id") == ".".join(KEY)))
    assert row["levels"][0] == 3 and row["q_df"][0] == 2 and row["wald_df1"][0] == 2
    assert row["q_p_value"][0] < 0.01 and row["wald_p_value"][0] < 0.01
    assert row["i2"][0] > 0.5
    assert set(table["by"]) == {"model", "mode"}  # one paraphrase: nothing to compare


def test_model_planted_names_known_models_and_stays_in_range() -> None:
    with pytest.raises(InputError, match="model_planted"):
        settings(model_planted={"nobody": {KEY: 0.1}})
    with pytest.raises(InputError, match="rate_scale"):
        settings(model_planted=opposite(0.35))  # the default scale has no room for 0.35


# --- the simulator acceptance (slow) ----------------------------------------------------------
@pytest.mark.slow
def test_planted_opposite_model_effects_are_recovered_and_rejected() -> None:
    """Two models at +0.35 and -0.35 rating points: the pooled estimate is near 0, the
    per-model estimates recover +-0.35 and Q rejects at p < 0.001."""
    design = SMALL | {"profiles_per_tier": 4, "names_per_cell": 5, "tasks": ["decision_rate_text"]}
    study = settings(design, models=("m1", "m2"), model_planted=opposite(0.35), rate_scale=0.8)
    frames = simulate(study, 11)
    pooled = fit_cell(frames, "hiring", "rate").estimates["black_vs_white"]
    by_level = het.contrasts_by(frames, PREREG, "model")
    per_model = by_level.filter(pl.col("contrast_id") == ".".join(KEY))
    table = het.estimate_heterogeneity(frames, PREREG, by=("model",), per_level=by_level)
    row = table.filter(pl.col("contrast_id") == ".".join(KEY)).row(0, named=True)
    print(f"\npooled {pooled.estimate:+.3f} (SE {pooled.se:.3f}); per model "
          f"{dict(zip(per_model['level'], per_model['estimate'].round(3), strict=True))}; "
          f"Q {row['q']:.1f} (p {row['q_p_value']:.2g}), I2 {row['i2']:.3f}, "
          f"Wald F {row['wald_f']:.1f} (p {row['wald_p_value']:.2g})")  # fmt: skip
    assert abs(pooled.estimate) < 2.5 * pooled.se
    for model, truth in (("m1", 0.35), ("m2", -0.35)):
        est, se = per_model.filter(pl.col("level") == model).select("estimate", "se").row(0)
        assert abs(est - truth) < 3 * se and se < 0.1, model
    assert row["q_p_value"] < 0.001 and row["wald_p_value"] < 0.001


def _null_q(sims: int) -> dict[str, np.ndarray]:
    """Q over three models with one common effect (none), per simulated study. Each model
    reacts to the names in its own way (model x pair effects, no shared pair effect), so the
    per-model estimates are independent, as Q assumes (shared pair effects make Q
    conservative; a pair variance on its boundary inflates each per-model SE: mean Q 1.65
    instead of 2 in this small design with the default settings)."""
    design = SMALL | {"tasks": ["decision_rate_text"]}
    study = settings(design, pair_sd=0.0, model_pair_sd=0.2, rate_scale=0.9, decide_scale=0.2)
    built = build_design(study)
    out: dict[str, list[float]] = {"q": [], "k": [], "wald_p": []}
    for seed in range(sims):
        frames = simulate(study, seed, design=built)
        by_level = het.contrasts_by(frames, PREREG, "model")
        rows = by_level.filter(pl.col("contrast_id") == ".".join(KEY))
        q = cochran_q(rows["estimate"].to_numpy(), rows["se"].to_numpy())
        table = het.estimate_heterogeneity(frames, PREREG, by=("model",), per_level=by_level)
        out["q"].append(q.q)
        out["k"].append(q.k)
        out["wald_p"].append(
            table.filter(pl.col("contrast_id") == ".".join(KEY))["wald_p_value"][0]
        )
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}


def rejection_rate(q: np.ndarray, df: np.ndarray, alpha: float = 0.05) -> float:
    from scipy import stats

    return float(np.mean(stats.chi2.sf(q, df) < alpha))


#: A rejection rate at 0.05 over 100 null studies: 1 to 11 rejections (P 0.006 of none, 0.011
#: of 11 or more under Binomial(100, 0.05)).
LEVEL = (0.01, 0.11)


def q_calibrated(q: np.ndarray, df: np.ndarray) -> bool:
    """Q referred to chi-squared with ``df``: its mean within 3 SEs of the mean df (chi-squared
    has variance 2 df), and its rejection rate at 0.05 within LEVEL."""
    se = np.sqrt(2 * df.mean() / len(q))
    rate = rejection_rate(q, df)
    return bool(abs(q.mean() - df.mean()) < 3 * se and LEVEL[0] <= rate <= LEVEL[1])


@pytest.mark.slow
def test_q_rejects_at_alpha_under_the_null_and_a_wrong_df_does_not() -> None:
    """100 null studies (three models, equal effects): Q's mean is its df (2) and its
    rejection rate at 0.05 lies within LEVEL; Q referred to chi-squared with k - 2 df, a wrong
    Q, has a mean twice its df and rejects about 15%: it fails the check (the mean alone by 7
    SEs); the joint Wald test's rejection rate within LEVEL."""
    start = time.perf_counter()
    null = _null_q(100)
    assert (null["k"] == 3).all()
    right = rejection_rate(null["q"], null["k"] - 1)
    wrong = rejection_rate(null["q"], null["k"] - 2)
    wald = float(np.mean(null["wald_p"] < 0.05))
    print(f"\n100 null studies in {time.perf_counter() - start:.0f} s: mean Q "
          f"{null['q'].mean():.2f}, Q rejects {right:.3f}, with df k - 2 {wrong:.3f}; the joint "
          f"Wald test {wald:.3f}")  # fmt: skip
    assert q_calibrated(null["q"], null["k"] - 1)
    assert not q_calibrated(null["q"], null["k"] - 2)
    assert LEVEL[0] <= wald <= LEVEL[1]


def test_forest_by_model_draws_one_panel_per_model(tmp_path: Path, by_level) -> None:
    from matplotlib.image import imread

    from cueaudit.decision.analysis.figures import plot_forest_by_model

    path = tmp_path / "forest_by_model.png"
    plot_forest_by_model(by_level, path)
    image = imread(path)
    assert image.shape[0] > 300 and image.shape[1] > 600
    empty = tmp_path / "empty.png"
    plot_forest_by_model(by_level.clear(), empty)
    assert empty.stat().st_size > 0
    with pytest.raises(InputError, match="estimate_sd"):
        plot_forest_by_model(by_level.drop("estimate_sd"), tmp_path / "bad.png")
