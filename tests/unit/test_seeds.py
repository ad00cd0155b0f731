"""Seeds per model, race prediction per model and seed, the regression seed of Tables 5-7,
and the probing study's size counted before any job."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import polars as pl
import pytest
import yaml

from cueaudit.config import is_complete_config, seeds_of, validate_config
from cueaudit.errors import InputError
from cueaudit.probing.analysis.regression import fe_regressions, regression_data
from cueaudit.probing.analysis.tables import connect
from cueaudit.probing.design import probing_size, task_sizes
from cueaudit.probing.study import race_prediction_runs, regression_seeds
from cueaudit.studies import STUDIES
from tests.helpers.probing_simulator import SimSpec, simulate

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"


def two_models(**race_prediction: object) -> dict:
    """The default config with a three-seed model and a one-seed API model."""
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["seeds"] = [0, 1, 2]
    config["models"]["api"] = {"backend": "openai", "openai": {"model": "m"}, "seeds": [0]}
    config["probing"]["race_prediction"] = {"enabled": True, **race_prediction}
    return config


def test_a_model_without_seeds_runs_the_top_level_ones() -> None:
    config = two_models()
    validate_config(config, SCHEMA, STUDIES)
    assert seeds_of(config, "smollm2-135m") == [0, 1, 2]
    assert seeds_of(config, "api") == [0]


def test_race_prediction_runs_every_model_and_seed_by_default() -> None:
    config = two_models()
    validate_config(config, SCHEMA, STUDIES)
    assert race_prediction_runs(config) == {"smollm2-135m": [0, 1, 2], "api": [0]}
    assert regression_seeds(config) == {"smollm2-135m": 0, "api": 0}


def test_race_prediction_restricted_by_model_and_seed() -> None:
    config = two_models(models=["smollm2-135m"], seeds=[1, 2])
    validate_config(config, SCHEMA, STUDIES)
    assert race_prediction_runs(config) == {"smollm2-135m": [1, 2]}
    # the regression seed defaults to the first seed that has race predictions
    assert regression_seeds(config) == {"smollm2-135m": 1}
    config = two_models(models=["smollm2-135m"], seeds=[1, 2])
    config["probing"]["analysis"]["regression_seed"] = 2
    validate_config(config, SCHEMA, STUDIES)
    assert regression_seeds(config) == {"smollm2-135m": 2}


def test_race_prediction_off_has_no_runs() -> None:
    config = two_models()
    config["probing"]["race_prediction"]["enabled"] = False
    validate_config(config, SCHEMA, STUDIES)
    assert race_prediction_runs(config) == {}
    assert regression_seeds(config) == {}


@pytest.mark.parametrize(
    ("race_prediction", "regression_seed", "message"),
    [
        ({"models": ["gpt"]}, None, "probing.race_prediction.models: unknown models 'gpt'"),
        ({"seeds": [5]}, None, "probing.race_prediction.seeds: seed 5 is not a seed of any"),
        ({"seeds": [1]}, None, "model 'api' runs none of them (its seeds: [0])"),
        ({"seeds": [0]}, 1, "probing.analysis.regression_seed: 1 has no race predictions"),
    ],
)
def test_race_prediction_seeds_that_cannot_run_are_named(
    race_prediction: dict, regression_seed: int | None, message: str
) -> None:
    config = two_models(**race_prediction)
    config["probing"]["analysis"]["regression_seed"] = regression_seed
    with pytest.raises(InputError, match=re.escape(message)):
        validate_config(config, SCHEMA, STUDIES)


def test_an_empty_seed_list_of_a_model_is_refused() -> None:
    config = two_models()
    config["models"]["api"]["seeds"] = []
    with pytest.raises(InputError, match=r"models\.api\.seeds: \[\] should be non-empty"):
        validate_config(config, SCHEMA, STUDIES)


# --- Tables 5-7: one response per prompt ------------------------------------------------------

SPEC = SimSpec(
    tasks={"legal": "binary", "salary": "usd"},
    cues=("name_rosenman", "explicit"),
    models=("m1", "m2"),
    seeds=(0, 1, 2),
    n_base=30,
    level=0.5,
    sigma=0.3,
    beta_inferred={"Black": 0.08, "Unknown": 0.03},
)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory):
    written = simulate(SPEC, tmp_path_factory.mktemp("seeds"))
    return connect(written["prompts"], written["outcomes"], dict(SPEC.tasks))


def test_regression_inputs_hold_one_row_per_prompt(study) -> None:
    prompts = study.sql("SELECT count(*) FROM prompts WHERE task = 'legal'").fetchall()[0][0]
    responses = study.sql(
        "SELECT count(*) FROM observations WHERE model = 'm1' AND task = 'legal'"
    ).fetchall()[0][0]
    assert responses == 3 * prompts  # three seeds answered every prompt
    for seed in SPEC.seeds:
        data = regression_data(study, "m1", "legal", seed)
        assert data.height == prompts
    table = fe_regressions(study)
    assert set(table["seed"]) == {0}
    assert set(table["n"]) == {prompts}
    assert set(table["n_prompts"]) == {SPEC.n_base}


def test_the_regression_seed_selects_the_responses(study) -> None:
    first = fe_regressions(study)
    chosen = fe_regressions(study, {"m1": 2})
    assert chosen.filter(pl.col("model") == "m1")["seed"].unique().to_list() == [2]
    assert chosen.filter(pl.col("model") == "m2")["seed"].unique().to_list() == [0]
    m2 = ["model", "task", "spec", "term", "coef"]
    assert (
        chosen.filter(pl.col("model") == "m2")
        .select(m2)
        .equals(first.filter(pl.col("model") == "m2").select(m2))
    )
    keys = ["task", "spec", "term"]
    seed0 = first.filter(pl.col("model") == "m1").sort(keys)["coef"]
    seed2 = chosen.filter(pl.col("model") == "m1").sort(keys)["coef"]
    assert seed0.len() == seed2.len() > 0
    assert (seed0 - seed2).abs().max() > 0  # other responses, other estimates


# --- the design's size before any job ---------------------------------------------------------


def test_the_default_config_counts_its_prompts() -> None:
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    validate_config(config, SCHEMA, STUDIES)
    sizes = task_sizes(config, ROOT)
    base = {s.task: pl.read_csv(ROOT / f"resources/prompts/{s.task}.csv").height for s in sizes}
    # no cue + 3 sources x 4 groups x 2 names + 23 explicit + AAVE
    assert {s.task: s.cue_variants for s in sizes} == dict.fromkeys(base, 1 + 24 + 23 + 1)
    assert {s.task: s.base_prompts for s in sizes} == base
    text = probing_size(config, ROOT)
    per_run = 49 * sum(base.values())
    assert f"probing study: {per_run} prompts per model x seed; 1 model x seed runs" in text
    legal = 49 * base["legal"]
    assert f"probing race_prediction: {legal} prompts per model x seed; 1 model x seed" in text
    assert f"probing study in total: {per_run + legal} requests" in text


def test_a_wrong_expected_prompt_count_stops(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    validate_config(config, SCHEMA, STUDIES)
    per_run = sum(s.prompts or 0 for s in task_sizes(config, ROOT))
    right = copy.deepcopy(config)
    right["probing"]["expected_prompts"] = per_run
    assert f"{per_run} prompts per model x seed" in probing_size(right, ROOT)
    config["probing"]["expected_prompts"] = per_run + 1
    with pytest.raises(InputError, match=f"expected_prompts: {per_run + 1} prompts per model x "
                       f"seed, but the design has {per_run}"):  # fmt: skip
        probing_size(config, ROOT)


def test_all_clusters_cannot_be_counted_before_running() -> None:
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["cues"]["dialog"] = {"n_clusters": None, "cad": {"path": "x.csv"}}
    config["probing"]["expected_prompts"] = 10
    validate_config(config, SCHEMA, STUDIES)
    with pytest.raises(InputError, match="cannot be counted before running"):
        probing_size(config, ROOT)


def test_an_unreadable_resource_leaves_the_count_unknown(tmp_path: Path) -> None:
    """The job that reads the file reports it; the size check can then not pass."""
    names = tmp_path / "names.csv"
    names.write_text("name,race\nTyrone,black\n", encoding="utf-8")
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["cues"]["names"]["lists"] = {"rosenman": str(names)}
    validate_config(config, SCHEMA, STUDIES)
    text = probing_size(config, ROOT)
    assert "probing study: unknown prompts per model x seed" in text
    assert "names not counted: " in text and "field 'gender': required column missing" in text
    config["probing"]["expected_prompts"] = 100
    with pytest.raises(InputError, match="but the design cannot be counted before running"):
        probing_size(config, ROOT)


def test_the_paper_config_replaces_the_default_and_an_override_extends_it(tmp_path: Path) -> None:
    assert is_complete_config(ROOT / "config/paper.yaml")
    override = tmp_path / "seeds.yaml"
    override.write_text("seeds: [0, 1]\nmodels: {m: {backend: hf, path: x}}\n", encoding="utf-8")
    assert not is_complete_config(override)
    # the decision audit's paper design replaces the default too: extended, it would inherit
    # the default's arms and exploratory bundle types (merged key by key)
    assert is_complete_config(ROOT / "config/decision/paper.yaml")
    assert not is_complete_config(tmp_path / "missing.yaml")


def test_the_paper_config_runs_gpt_once_and_llama_predicts_race() -> None:
    config = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    validate_config(config, SCHEMA, STUDIES)
    assert {m: seeds_of(config, m) for m in config["models"]} == {
        "llama-3.1-8b": [0, 1, 2],
        "olmo-2-7b": [0, 1, 2],
        "gpt-5.2": [0],
    }
    assert race_prediction_runs(config) == {"llama-3.1-8b": [0]}
    assert regression_seeds(config) == {"llama-3.1-8b": 0}
