"""A third study, registered beside the two real ones without editing a shared file: its
config block is validated by its own schema and checks, its input files are checked, its
inference tasks join the others', and the database gets its views and parse rates."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
import yaml

from cueaudit.config import check_input_files, validate_config
from cueaudit.errors import InputError
from cueaudit.store import ParseRateGroups, build_database
from cueaudit.studies import STUDIES
from cueaudit.study import Study, database_parts, enabled_studies

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "workflow/schemas"

TOY_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["vignettes"],
    "properties": {
        "vignettes": {"type": "string"},
        "repeats": {"type": "integer", "minimum": 1, "default": 2},
        "judges": {"type": "array", "items": {"type": "string"}, "default": []},
    },
}


def _toy_problems(config: Mapping[str, Any]) -> Iterator[str]:
    for judge in config["toy"]["judges"]:
        if judge not in config["models"]:
            yield f"config key toy.judges: unknown model {judge!r}"


def _toy_paths(config: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    yield "toy.vignettes", config["toy"]["vignettes"]


def _toy_tasks(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        "toy_verdict": {
            "outcome": "binary",
            "answer": {},
            "max_new_tokens": 4,
            "shards": config["toy"]["repeats"],
        }
    }


def _toy_views(kinds: Mapping[str, str], settings: Mapping[str, Any]) -> list:
    tasks = ", ".join(f"'{task}'" for task in kinds)

    def verdicts(con: duckdb.DuckDBPyConnection) -> None:
        con.execute(
            "CREATE VIEW toy_verdicts AS SELECT p.vignette, avg(o.answer) AS yes_share "
            f"FROM outcomes o JOIN prompts p USING (prompt_uid, task) WHERE o.task IN ({tasks}) "
            "GROUP BY p.vignette ORDER BY p.vignette"
        )

    return [verdicts]


TOY = Study(
    name="toy",
    title="A toy study",
    schema="toy.schema.yaml",
    inference_tasks=_toy_tasks,
    problems=_toy_problems,
    resource_paths=_toy_paths,
    database_views=_toy_views,
    parse_rates=ParseRateGroups(by=("vignette",), per_seed=False),
)
REGISTRY = {**STUDIES, TOY.name: TOY}


@pytest.fixture
def schema(tmp_path: Path) -> Path:
    """The shared schema and the studies' block schemas, plus the toy study's, in a folder."""
    folder = tmp_path / "schemas"
    shutil.copytree(SCHEMAS, folder)
    (folder / TOY.schema).write_text(yaml.safe_dump(TOY_SCHEMA), encoding="utf-8")
    return folder / "config.schema.yaml"


def _config(**toy: Any) -> dict[str, Any]:
    return {
        "cues": {},
        "models": {"m": {"backend": "hf", "path": "models/m"}},
        "seeds": [0],
        "toy": {"vignettes": "vignettes.csv", **toy},
    }


def test_the_toy_block_is_validated_by_its_own_schema_and_checks(schema: Path) -> None:
    config = _config()
    validate_config(config, schema, REGISTRY)
    assert config["toy"] == {"vignettes": "vignettes.csv", "repeats": 2, "judges": []}
    assert [study.name for study in enabled_studies(REGISTRY, config)] == ["toy"]
    with pytest.raises(InputError, match=r"config key toy.repeats: 0 is less than"):
        validate_config(_config(repeats=0), schema, REGISTRY)
    with pytest.raises(InputError, match=r"config key toy.judges: unknown model 'gpt'"):
        validate_config(_config(judges=["gpt"]), schema, REGISTRY)
    # Without its registry row the block is an unknown key, as any misspelt study would be.
    with pytest.raises(InputError, match=r"Additional properties are not allowed \('toy'"):
        validate_config(_config(), schema, STUDIES)


def test_the_toy_input_files_are_checked_before_any_job(schema: Path, tmp_path: Path) -> None:
    config = _config()
    validate_config(config, schema, REGISTRY)
    with pytest.raises(InputError, match=r"config key toy.vignettes: not found: vignettes.csv"):
        check_input_files(config, REGISTRY, tmp_path)
    (tmp_path / "vignettes.csv").write_text("vignette\n", encoding="utf-8")
    check_input_files(config, REGISTRY, tmp_path)


def test_the_toy_study_builds_its_views_and_parse_rates(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.parquet"
    pl.DataFrame(
        {
            "prompt_uid": ["a", "b", "c", "d"],
            "task": ["toy_verdict"] * 4,
            "text": ["..."] * 4,
            "vignette": ["v1", "v1", "v2", "v2"],
        }
    ).write_parquet(prompts)
    outcomes = tmp_path / "outcomes.parquet"
    pl.DataFrame(
        {
            "prompt_uid": ["a", "b", "c", "d"],
            "model": ["m"] * 4,
            "seed": [0] * 4,
            "task": ["toy_verdict"] * 4,
            "answer": [1.0, 0.0, 1.0, None],
            "parse_error": [None, None, None, "no yes or no"],
        }
    ).write_parquet(outcomes)
    responses = tmp_path / "responses.parquet"
    pl.DataFrame(
        {"prompt_uid": ["a"], "model": ["m"], "seed": [0], "task": ["toy_verdict"]}
    ).write_parquet(responses)
    tasks = list(TOY.inference_tasks(_config(repeats=1)))
    views, groups = database_parts(
        REGISTRY, {"toy": {"tasks": tasks, "view_settings": {}}}, {"toy_verdict": "binary"}
    )
    db = tmp_path / "toy.duckdb"
    build_database(
        db,
        prompts=[prompts],
        responses=[responses],
        outcomes=[outcomes],
        views=views,
        parse_rate_groups=groups,
    )
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.sql("SELECT * FROM toy_verdicts").fetchall() == [("v1", 0.5), ("v2", 1.0)]
        rates = con.sql(
            "SELECT vignette, n_responses, n_parsed, main_parse_error FROM parse_rates "
            "ORDER BY vignette"
        ).fetchall()
    assert rates == [("v1", 2, 2, None), ("v2", 2, 1, "no yes or no")]
