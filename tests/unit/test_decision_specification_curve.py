"""The specification curve of the decision audit (cueaudit.decision.analysis.specification_curve)
on the simulator: every choice of the design is a specification, the family's own one is the
contrasts table's estimate, a design column added to the frames (``cue``) becomes a choice by
itself; an effect planted in one mode only shows in that mode's specifications (and the check
fails when the plant is in the other mode or nowhere); under no plant the curve's permutation
p-values are calibrated and with a plant everywhere they reject (slow); the rule is in the
workflow's dry run and its adapter writes the tables from simulated frames."""

from __future__ import annotations

import dataclasses
import os
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import yaml

from cueaudit.config import validate_config
from cueaudit.decision.analysis import specification_curve as sc
from cueaudit.decision.analysis.contrasts import estimate_contrasts
from cueaudit.decision.analysis.figures import plot_specification_curve
from cueaudit.decision.analysis.simulate import build_design, simulate
from cueaudit.decision.analysis.simulation_settings import (
    Extension,
    SimulationSettings,
    config_settings,
)
from cueaudit.decision.preregistration import load_preregistration
from cueaudit.errors import InputError
from cueaudit.studies import STUDIES

ROOT = Path(__file__).resolve().parents[2]
PREREG = load_preregistration(ROOT / "config/decision/preregistration.yaml")
BLACK = "black_vs_white"
JUDGEMENT_TASKS = [
    "decision_rate_text", "decision_rate_tool", "decision_decide_text", "decision_decide_tool",
]  # fmt: skip
#: The default config's pre-registered design (its cues extension arm left out here).
DEFAULT = dataclasses.replace(config_settings(ROOT, "config/config.yaml"), extensions={})
#: The default design's Rate and Decide in both modes, three profiles per tier under three pairs
#: per race x gender.
MODES_DESIGN = {
    **DEFAULT.design,
    "profiles_per_tier": 3,
    "names_per_cell": 3,
    "probe_bundles": 0,
    "tasks": JUDGEMENT_TASKS,
}
#: A mode's own effect on the Black vs White contrast: 0.7 points, 25 points of yes.
MODE_EFFECT = {("hiring", "rate", BLACK): 0.7, ("hiring", "decide", BLACK): 0.25}


@pytest.fixture(scope="module")
def default_frames():
    """The default config's design (hiring, one model, one pair per race x gender) simulated."""
    return simulate(DEFAULT, 0)


@pytest.fixture(scope="module")
def default_curve(default_frames):
    return sc.specification_curve(default_frames, PREREG, permutations=3)


# --- the specifications ------------------------------------------------------------------------
def test_every_choice_of_the_default_design_is_a_specification(default_curve) -> None:
    curve, summary = default_curve
    assert dict(curve.schema) == dict(sc.CURVE_SCHEMA)
    assert dict(summary.schema) == dict(sc.SUMMARY_SCHEMA)
    assert curve["contrast"].unique(maintain_order=True).to_list() == [BLACK, "female_vs_male"]
    black = curve.filter(pl.col("contrast") == BLACK)
    # Rate and Decide: text, tool, pooled (answers); text (the option-score expectation, which
    # tool calls do not carry). Rank: 5 bundle choices (disguised, matched, both, and the
    # exploratory paraphrase-matched and position-balanced) x (json, tool, pooled) x 2 estimators.
    counts = dict(black.group_by("format").len().iter_rows())
    assert counts == {"rate": 4, "decide": 4, "rank": 30}
    assert black["specification"].n_unique() == 38
    expectation = black.filter(pl.col("outcome") == "expectation")
    assert expectation["mode"].to_list() == ["text", "text"]
    rank = black.filter(pl.col("format") == "rank")
    assert set(rank["bundle_type"]) == set(sc.RANK_BUNDLE_CHOICES)
    assert set(rank["estimator"]) == {"lmm", "rologit"}
    assert black.filter(pl.col("format") != "rank")["bundle_type"].null_count() == 8
    # one paraphrase and one model: their only level, which is also the pool
    assert set(black["paraphrase"]) == {"p1"} and set(black["model"]) == {"smollm2-135m"}
    assert set(black["cue"]) == {"name_pair"}  # one cue type: its only level
    assert set(curve["verdict"]) <= set(sc.VERDICTS)
    assert curve["label"].str.starts_with("exploratory: specification curve").all()
    # fits that fail are rows with their reason (matched bundles are tied throughout; the four
    # paraphrase-matched bundles show each name pair once)
    failed = black.filter(pl.col("verdict") == "not estimable")
    assert failed.height == 11 and failed["note"].null_count() == 0
    assert (failed["bundle_type"] == "demographic_matched").sum() == 6
    assert set(failed["bundle_type"]) == {"demographic_matched", "paraphrase_matched"}
    assert failed["estimate"].is_nan().all()
    # Decide has no margin
    decide = black.filter((pl.col("format") == "decide") & (pl.col("verdict") == "inconclusive"))
    assert decide.height and (decide["note"] == "no margin").all()
    row = summary.filter(pl.col("contrast") == BLACK).row(0, named=True)
    assert row["specifications"] == 38 and row["estimable"] == 27
    assert sum(row[v.replace(" ", "_")] for v in sc.VERDICTS) == 38
    assert row["permutations"] == 3 and row["permutations_requested"] == 3
    assert row["permutation_note"].startswith("3 of 2.291e+18 distinct permutations")


def test_the_family_specification_is_the_contrasts_tables_estimate(
    default_frames, default_curve
) -> None:
    curve, _ = default_curve
    family = curve.filter(pl.col("family_spec"))
    # hiring x rate, decide, rank, for each contrast of interest
    assert family.height == 6
    assert (family["arm"] == "primary").all() and (family["estimator"] == "lmm").all()
    assert set(family["mode"]) == {"all"} and (family["outcome"] == "answer").all()
    assert set(family.filter(pl.col("format") == "rank")["bundle_type"]) == {
        "disguised_demographic"
    }
    table = estimate_contrasts(default_frames, PREREG, pre_registered=False).filter(
        pl.col("in_family")
    )
    for row in family.iter_rows(named=True):
        planned = table.filter(
            (pl.col("domain") == row["domain"])
            & (pl.col("format") == row["format"])
            & (pl.col("contrast") == row["contrast"])
        )
        assert planned.height == 1
        assert row["estimate"] == pytest.approx(planned["estimate"][0], abs=1e-12)
        assert row["se"] == pytest.approx(planned["se"][0], rel=1e-10)
        assert row["estimate_sd"] == pytest.approx(planned["estimate_sd"][0], rel=1e-10)


def test_a_cue_column_on_the_frames_becomes_a_choice(default_frames, default_curve) -> None:
    # the frames of a design with two cue types among the judgements (one among the rankings)
    parity = pl.col("prompt_uid").str.slice(-1).is_in(list("02468ace"))
    frames = dataclasses.replace(
        default_frames,
        judgements=default_frames.judgements.with_columns(
            cue=pl.when(parity).then(pl.lit("first_name")).otherwise(pl.lit("name_pair"))
        ),
        rankings=default_frames.rankings.with_columns(cue=pl.lit("name_pair")),
    )
    curve, _ = sc.specification_curve(frames, PREREG, contrasts=[BLACK])
    rate = curve.filter(pl.col("format") == "rate")
    # (text, tool, pooled) x (each cue, pooled) answers + text x 3 expectations
    assert rate.height == 12
    assert set(rate["cue"]) == {"all", "first_name", "name_pair"}
    assert set(curve.filter(pl.col("format") == "rank")["cue"]) == {"name_pair"}
    assert curve.filter(pl.col("format") == "rank").height == 30
    # the pooled cue is the family's specification; it holds the cue type fixed (a nuisance
    # factor as model and mode), so on the same answers split in two it moves only a little
    family = curve.filter(pl.col("family_spec") & (pl.col("format") == "rate"))
    before = default_curve[0].filter(
        pl.col("family_spec") & (pl.col("format") == "rate") & (pl.col("contrast") == BLACK)
    )
    assert family["cue"].to_list() == ["all"]
    assert family["estimate"][0] != before["estimate"][0]
    assert family["estimate"][0] == pytest.approx(before["estimate"][0], abs=0.05)
    assert "cue=first_name" in " ".join(rate["specification"].to_list())


def test_an_extension_arm_is_a_choice() -> None:
    design = {**MODES_DESIGN, "profiles_per_tier": 1, "names_per_cell": 1,
              "tasks": ["decision_rate_text"]}  # fmt: skip
    settings = SimulationSettings(
        design=design, models=("m1",), root=str(ROOT), extensions={"topup": Extension()}
    )
    curve, summary = sc.specification_curve(simulate(settings, 1), PREREG, contrasts=[BLACK])
    assert curve["arm"].to_list() == ["primary", "primary", "topup", "topup"]
    topup = curve.filter(pl.col("arm") == "topup")
    assert not topup["family_spec"].any()
    assert topup["label"].str.contains("arm 'topup' is not the pre-registered design").all()
    assert "extension arms ['topup'] are choices" in summary["label"][0]


def test_bad_contrasts_and_alpha_are_refused(default_frames) -> None:
    with pytest.raises(InputError, match="contrasts"):
        sc.specification_curve(default_frames, PREREG, contrasts=["black_vs_asian"])
    with pytest.raises(InputError, match="alpha"):
        sc.specification_curve(default_frames, PREREG, alpha=1.5)
    pairs = default_frames.judgements.with_columns(
        race=pl.when(pl.col("pair_id") == pl.col("pair_id").first())
        .then(pl.lit("Other"))
        .otherwise(pl.col("race"))
    )
    clash = dataclasses.replace(default_frames, judgements=pairs.head(30))
    with pytest.raises(InputError, match="several races or genders"):
        sc.name_pair_groups(clash)


def test_mode_planted_is_checked() -> None:
    with pytest.raises(InputError, match="rate has no mode 'json'"):
        SimulationSettings(mode_planted={"json": {("hiring", "rate", BLACK): 0.1}})
    with pytest.raises(InputError, match="a contrast against White"):
        SimulationSettings(mode_planted={"tool": {("hiring", "rate", "black_vs_asian"): 0.1}})


# --- an effect in one mode ---------------------------------------------------------------------
def mode_settings(mode: str | None) -> SimulationSettings:
    return SimulationSettings(
        design=MODES_DESIGN,
        models=("m1", "m2"),
        root=str(ROOT),
        mode_planted={mode: MODE_EFFECT} if mode else {},
        rate_scale=0.7,
        decide_scale=0.12,
    )


def localised(curve: pl.DataFrame, mode: str, alpha: float = 0.05) -> dict[str, bool]:
    """Whether the Black vs White curve shows an effect in ``mode`` only: (nearly) all of the
    mode's specifications significantly favour Black applicants, at most a fifth of the other
    mode's are significant either way, and the pooled-mode estimates lie between the two."""
    rows = curve.filter(pl.col("contrast") == BLACK)
    here = rows.filter(pl.col("mode") == mode)
    other = rows.filter(~pl.col("mode").is_in([mode, sc.POOLED]))
    pooled = rows.filter(pl.col("mode") == sc.POOLED)
    favours = (pl.col("p_value") < alpha) & (pl.col("estimate") > 0)
    low, high = other["estimate_sd"].mean(), here["estimate_sd"].mean()
    return {
        "mode significant": here.select(favours.mean()).item() >= 0.9,
        "other not": other.select((pl.col("p_value") < alpha).mean()).item() <= 0.2,
        "pooled between": low < pooled["estimate_sd"].mean() < high,  # type: ignore[operator]
    }


@pytest.fixture(scope="module")
def mode_curves() -> dict[str | None, pl.DataFrame]:
    design = build_design(mode_settings(None))
    return {
        mode: sc.specification_curve(
            simulate(mode_settings(mode), 0, design=design), PREREG, contrasts=[BLACK]
        )[0]
        for mode in ("tool", "text", None)
    }


def test_an_effect_planted_in_one_mode_shows_only_there(mode_curves) -> None:
    curve = mode_curves["tool"]
    assert all(localised(curve, "tool").values()), localised(curve, "tool")
    tool = curve.filter(pl.col("mode") == "tool")
    # every tool specification: Rate and Decide, per model and pooled over models
    assert tool.height == 6 and set(tool["verdict"]) == {"favours"}
    assert (tool.filter(pl.col("format") == "decide")["note"] == "no margin").all()
    # the option-score expectation exists for text answers only: no tool row carries it
    assert set(curve.filter(pl.col("outcome") == "expectation")["mode"]) == {"text"}


def test_the_mode_check_fails_when_the_plant_is_elsewhere_or_absent(mode_curves) -> None:
    in_text = localised(mode_curves["text"], "tool")
    assert not in_text["mode significant"] and not in_text["pooled between"]
    assert all(localised(mode_curves["text"], "text").values())  # where it was planted
    nowhere = localised(mode_curves[None], "tool")
    assert not nowhere["mode significant"]


# --- inference on the curve --------------------------------------------------------------------
def test_few_relabellings_are_all_used_and_the_summary_says_so() -> None:
    design = {**MODES_DESIGN, "profiles_per_tier": 1, "names_per_cell": 1,
              "tasks": ["decision_rate_text"]}  # fmt: skip
    frames = simulate(SimulationSettings(design=design, models=("m1",), root=str(ROOT)), 2)
    _, summary = sc.specification_curve(
        frames, PREREG, contrasts=[BLACK, "female_vs_male"], permutations=40, seed=5
    )
    race, gender = summary.rows(named=True)
    assert (race["permutations"], race["permutations_distinct"]) == (40, 575)
    assert race["permutation_note"] == (
        "40 of 575 distinct permutations, drawn without replacement"
    )
    assert (gender["permutations"], gender["permutations_distinct"]) == (15, 15)
    assert gender["permutation_note"] == (
        "all 15 distinct permutations besides the observed labels (fewer than the 40 requested)"
    )
    # with 16 labellings the smallest p-value is 1/16
    assert gender["p_median"] >= 1 / 16
    assert race["permutation_scheme"].startswith(
        "race labels permuted among name pairs of one gender"
    )
    # the same relabellings refitted in two processes: the same tests
    again = sc.specification_curve(
        frames, PREREG, contrasts=[BLACK, "female_vs_male"], permutations=40, seed=5, workers=2
    )[1]
    assert again.equals(summary)


CALIBRATION_DESIGN = {**MODES_DESIGN, "profiles_per_tier": 2, "names_per_cell": 2,
                      "tasks": ["decision_rate_text", "decision_rate_tool"]}  # fmt: skip


def curve_p_values(planted: float, studies: int, permutations: int = 19) -> np.ndarray:
    """The curve's three permutation p-values (median, share, dominant) of the Black vs White
    curve in each of ``studies`` simulated studies with ``planted`` points everywhere."""
    settings = SimulationSettings(
        design=CALIBRATION_DESIGN,
        models=("m1",),
        root=str(ROOT),
        planted={("hiring", "rate", BLACK): planted} if planted else {},
        rate_scale=0.6,
        pair_sd=0.1,
    )
    design = build_design(settings)
    rows = []
    for seed in range(studies):
        _, summary = sc.specification_curve(
            simulate(settings, seed, design=design),
            PREREG,
            contrasts=[BLACK],
            permutations=permutations,
            seed=seed,
        )
        rows.append(summary.select("p_median", "p_share", "p_dominant").row(0))
    return np.array(rows, dtype=np.float64)


def calibrated(p: np.ndarray, alpha: float = 0.05) -> bool:
    """Null p-values: the median's about uniform on 1/20, ..., 20/20 (mean 0.525, SD 0.29;
    within 3 SEs of that mean: 0.525 +- 0.25 over 12 studies), every statistic rejecting at
    alpha in at most a quarter of the studies (3 of 12: P(4 or more) = 0.002 under
    Binomial(12, 0.05); the count statistics are discrete: conservative)."""
    half_width = 3 * 0.29 / np.sqrt(len(p))
    return bool(
        abs(p[:, 0].mean() - 0.525) <= half_width and ((p <= alpha).mean(axis=0) <= 0.25).all()
    )


@pytest.mark.slow
def test_curve_p_values_are_calibrated_under_no_plant_and_reject_a_plant_everywhere() -> None:
    null = curve_p_values(0.0, 12)
    assert calibrated(null), (null.mean(axis=0), (null <= 0.05).mean(axis=0))
    planted = curve_p_values(0.8, 4)
    # with 19 permutations the smallest p-value is 1/20 = alpha; the median rejects in about
    # 0.8 of planted studies (8 of seeds 0-9), so in at least half of 4 (P = 0.97)
    assert (planted[:, 0] <= 0.05).mean() >= 0.5
    assert planted[:, 0].mean() < 0.15
    assert not calibrated(planted)  # the calibration check fails on planted studies


# --- the workflow ------------------------------------------------------------------------------
class _Named(dict):
    """What Snakemake hands a script: items by name, as attributes too, and in order."""

    def __getattr__(self, name: str) -> Any:
        return self[name]

    def __getitem__(self, key: Any) -> Any:
        return list(self.values())[key] if isinstance(key, int) else super().__getitem__(key)


def test_the_adapter_writes_the_tables_and_the_figure_from_simulated_frames(
    tmp_path: Path, default_frames
) -> None:
    frames = {}
    for name in ("judgements", "rankings", "probes"):
        frames[name] = str(tmp_path / f"{name}.parquet")
        getattr(default_frames, name).write_parquet(frames[name])
    out = {
        "specification_curve": str(tmp_path / "decision_specification_curve.csv"),
        "specification_curve_md": str(tmp_path / "decision_specification_curve.md"),
        "specification_summary": str(tmp_path / "decision_specification_summary.csv"),
        "specification_summary_md": str(tmp_path / "decision_specification_summary.md"),
    }
    settings = {"contrasts": [BLACK, "female_vs_male"], "permutations": 2, "alpha": None,
                "seed": 0}  # fmt: skip
    registration = {"lock": str(tmp_path / "none.lock"), "files": {}, "design": {}}
    smk = _Named(
        input=_Named(frames, preregistration=str(ROOT / "config/decision/preregistration.yaml")),
        output=_Named(out),
        params=_Named(
            analysis="specification_curve",
            specification_curve=settings,
            registration=registration,
        ),
        log=[str(tmp_path / "log.txt")],
        threads=1,
    )
    script = ROOT / "workflow/scripts/run_decision_analysis.py"
    sys.path.insert(0, str(script.parent))
    try:
        runpy.run_path(str(script), init_globals={"snakemake": smk}, run_name="__main__")
    finally:
        sys.path.remove(str(script.parent))
    curve = pl.read_csv(out["specification_curve"], infer_schema_length=None)
    summary = pl.read_csv(out["specification_summary"], infer_schema_length=None)
    assert curve.height == 76 and summary.height == 2
    assert (summary["permutations"] == 2).all() and (summary["alpha"] == PREREG.alpha).all()
    assert summary["label"].str.contains("no lock at").all()
    assert Path(out["specification_curve_md"]).is_file()
    figure = tmp_path / "figures/decision_specification_curve.pdf"
    plot_specification_curve(curve, figure)
    assert figure.stat().st_size > 0 and figure.with_suffix(".png").stat().st_size > 0
    empty = tmp_path / "figures/empty.png"
    plot_specification_curve(curve.head(0), empty)
    assert empty.is_file()


def test_the_rule_is_in_the_workflows_dry_run(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text(encoding="utf-8"))
    config.pop("probing")
    config["cues"] = {}
    validate_config(config, ROOT / "workflow/schemas/config.schema.yaml", STUDIES)
    decision = config["decision"]  # every file it names (defaults filled in) from the checkout
    for key, value in decision.items():
        if isinstance(value, str) and (ROOT / value).is_file():
            decision[key] = str(ROOT / value)
    decision["design"]["prompts"] = str(ROOT / decision["design"]["prompts"])
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
         "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml"),
         "-n", "decision"],
        capture_output=True, text=True, check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    plan = result.stdout + result.stderr
    assert "rule estimate_decision_specification_curve:" in plan
    assert "results/tables/decision_specification_summary.csv" in plan
    assert "results/figures/decision_specification_curve.pdf" in plan
