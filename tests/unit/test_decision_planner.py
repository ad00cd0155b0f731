"""The power and sample-size planner (cueaudit.decision.analysis.planner): its effects, its
cost arithmetic, its place before inference, and its predicted MDE against the spread of
estimates over simulated studies."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import yaml

from cueaudit.config import validate_config
from cueaudit.decision.analysis.planner import (
    plan_contrasts,
    plan_cost,
    planted_effects,
    task_runs,
)
from cueaudit.decision.analysis.simulation_settings import Extension, SimulationSettings
from cueaudit.decision.preregistration import load_preregistration
from cueaudit.decision.study import PLAN_TABLE, PREREGISTRATION_CHECK, STUDY
from cueaudit.errors import InputError
from cueaudit.studies import STUDIES

ROOT = Path(__file__).resolve().parents[2]
PREREG = load_preregistration(ROOT / "config/decision/preregistration.yaml")
HIRING = {
    "domains": ["hiring"],
    "paraphrases": 1,
    "profiles_per_tier": 4,
    "names_per_cell": 5,
    "bundles_per_type": {
        "demographic_matched": 0,
        "irrelevant_matched": 0,
        "disguised_demographic": 48,
        "disguised_placebo": 0,
    },
    "probe_bundles": 0,
    "tasks": ["decision_rate_text", "decision_rank_tool"],
}


def _settings(design: dict | None = None) -> SimulationSettings:
    return SimulationSettings(design=design or HIRING, models=("m1",), root=str(ROOT))


def test_effects_default_to_the_margins_and_decide_needs_one() -> None:
    planted = planted_effects(PREREG, {"decide": 0.05})
    assert planted[("hiring", "rate", "black_vs_white")] == 0.09
    assert planted[("lending", "rank", "female_vs_male")] == 0.067
    assert planted[("triage", "decide", "asian_vs_white")] == 0.05
    assert (
        planted_effects(PREREG, {"rank": 0.2, "decide": 0.1})[("hiring", "rank", "black_vs_white")]
        == 0.2
    )
    with pytest.raises(InputError, match=r"effects\.decide.*no pre-registered margin"):
        planted_effects(PREREG, {})


def test_cost_counts_requests_tokens_dollars_and_hours(tmp_path: Path) -> None:
    table = tmp_path / "t.parquet"
    pl.DataFrame(
        {"prompt_uid": ["a", "b", "c"], "task": "t", "text": ["x" * 40, "y" * 80, "z" * 0]}
    ).write_parquet(table)
    cost = plan_cost(
        {"t": str(table), "t__arm": str(table)},
        {"t": {"api": [0, 1], "local": [0]}, "t__arm": {"local": [0]}},
        {
            "api": {"pricing": {"input_per_million": 2.0, "output_per_million": 8.0}},
            "local": {"throughput": 3600.0},
        },
        {"t": 10, "t__arm": 10},
        tokens_per_char=0.25,
    )
    # an arm's task is priced only for the models that answer it
    assert cost.select("model", "task").rows() == [
        ("api", "t"),
        ("local", "t"),
        ("local", "t__arm"),
    ]
    api = cost.filter(pl.col("model") == "api").row(0, named=True)
    # 3 prompts x 2 seeds; 120 characters = 30 tokens a seed; 10 new tokens a request
    assert (api["requests"], api["input_tokens"], api["output_tokens"]) == (6, 60, 60)
    assert api["dollars"] == pytest.approx((60 * 2 + 60 * 8) / 1e6)
    assert api["hours"] is None
    local = cost.filter(pl.col("model") == "local").row(0, named=True)
    assert local["requests"] == 3 and local["hours"] == pytest.approx(3 / 3600)
    assert local["dollars"] is None


def test_each_arm_is_priced_for_its_own_models_and_seeds() -> None:
    """An extension on one model (a reasoning rerun) is that model's requests alone: the cost
    of config/decision/paper.yaml then totals its 45,888 requests, not 5 models x every arm."""
    settings = SimulationSettings(
        design={**HIRING, "tasks": ["decision_rate_text"]},
        models=("m1", "m2"),
        extensions={"rerun": Extension(models=("m2",), design={"tasks": ["decision_rank_tool"]})},
    )
    runs = task_runs(settings, {"m1": [0], "m2": [0, 1]})
    assert runs == {
        "decision_rate_text": {"m1": [0], "m2": [0, 1]},
        "decision_rank_tool__rerun": {"m2": [0, 1]},
    }


def test_inference_waits_for_the_plan_when_asked() -> None:
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    validate_config(config, ROOT / "workflow/schemas/config.schema.yaml", STUDIES)
    assert config["decision"]["plan"]["studies"] == 20
    tasks = STUDY.inference_tasks(config)
    assert all(t["requires"] == [PREREGISTRATION_CHECK, PLAN_TABLE] for t in tasks.values())
    config["decision"]["plan"]["before_inference"] = False
    tasks = STUDY.inference_tasks(config)
    assert all(t["requires"] == [PREREGISTRATION_CHECK] for t in tasks.values())


def test_bad_plan_settings_are_refused_by_key() -> None:
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["decision"]["plan"] = {"studies": 1, "effects": {"ranks": 0.1}}
    config["models"]["smollm2-135m"]["pricing"] = {"input_per_million": -1}
    with pytest.raises(InputError) as error:
        validate_config(config, ROOT / "workflow/schemas/config.schema.yaml", STUDIES)
    message = str(error.value)
    assert "decision.plan.studies: 1 is less than the minimum of 2" in message
    assert "decision.plan.effects" in message and "ranks" in message
    assert "models.smollm2-135m.pricing" in message
    with pytest.raises(InputError, match="at least 2 simulated studies"):
        plan_contrasts(_settings(), PREREG, studies=1, effects={"decide": 0.05})


#: MDE / (2.8 x empirical SD) over 60 studies: 1 +- 3 x 9.2%.
BOUNDS = (0.72, 1.28)


def _ratios(plan: pl.DataFrame, sd: pl.DataFrame) -> list[float]:
    joined = plan.join(sd, on=["format", "contrast"])
    return (joined["mde"] / (2.8 * joined["empirical_sd"])).to_list()


@pytest.mark.slow
def test_predicted_mde_is_within_its_sampling_error_of_the_spread_over_60_studies() -> None:
    """The planner's MDE (the median over its studies of what each study's own SE gives)
    against 2.8 x the SD of the estimates over the same 60 simulated studies: the SD of an SD
    over 60 normal draws is 9.2% (1 / sqrt(2 x 59)), so each of the eight ratios is within 3
    such SDs (28%) of 1 (the lmm is a little conservative on the between-pair gender contrast:
    1.1 over 200 studies); a plan of a design half the size, whose MDE is 1.4 to 1.5 times as
    large, fails it."""
    keys = ["format", "contrast"]
    plan = plan_contrasts(_settings(), PREREG, studies=60, effects={"decide": 0.05}, seed=0)
    assert set(plan["format"]) == {"rate", "rank"} and plan.height == 8
    ratios = _ratios(plan.select(*keys, "mde"), plan.select(*keys, "empirical_sd"))
    assert all(BOUNDS[0] <= r <= BOUNDS[1] for r in ratios), ratios
    # the floor under the margin needs (floor / margin)^2 times the units
    row = plan.filter((pl.col("format") == "rank") & (pl.col("contrast") == "black_vs_white"))
    row = row.row(0, named=True)
    assert row["units"] == 48 and row["unit"] == "bundles"
    needed = 48 * (row["equivalence_floor"] / 0.067) ** 2
    assert row["units_needed"] == pytest.approx(needed, abs=1)
    assert row["extra_slots"] == 4 * row["extra_units"]
    assert 0.0 <= row["power"] <= 1.0 and row["power"] < 0.2  # 0.067 is far under the MDE
    half = dict(
        HIRING,
        profiles_per_tier=2,
        bundles_per_type=dict(HIRING["bundles_per_type"], disguised_demographic=24),
    )
    wrong = plan_contrasts(_settings(half), PREREG, studies=20, effects={"decide": 0.05})
    wrong_ratios = _ratios(wrong.select(*keys, "mde"), plan.select(*keys, "empirical_sd"))
    assert sum(not BOUNDS[0] <= r <= BOUNDS[1] for r in wrong_ratios) >= 6, wrong_ratios
