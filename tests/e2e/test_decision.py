"""The decision audit end to end on the packaged SmolLM2, on a tiny design."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import polars as pl
import pytest
import yaml

from tests.conftest import ROOT, SnakemakeRunner, tiny_config, write_config

pytestmark = pytest.mark.e2e

TASKS = [
    "decision_rate_text",
    "decision_decide_tool",
    "decision_rank_json",
    "decision_probe_choice",
    "decision_probe_free",
]
CALLS = re.compile(r"model calls: (\d+), cache hits: (\d+)")


def decision_config(profiles_per_tier: int = 1) -> dict:
    design = {
        "prompts": str(ROOT / "resources/decision/prompts.yaml"),
        "domains": ["hiring"],
        "paraphrases": 1,
        "profiles_per_tier": profiles_per_tier,
        "names_per_cell": 1,
        "bundles_per_type": {
            "demographic_matched": 4,
            "irrelevant_matched": 4,
            "disguised_demographic": 12,
            "disguised_placebo": 12,
        },
        "probe_bundles": 4,
        "tasks": TASKS,
    }
    files = {
        "profiles": "resources/decision/profiles.jsonl",
        "name_pairs": "resources/names/elder_hayes_pairs.csv",
        "hobbies": "resources/decision/hobbies.txt",
        "neighbourhoods": "resources/decision/neighbourhoods.txt",
        "demographic_terms": "resources/decision/demographic_terms.txt",
        "preregistration": "config/decision/preregistration.yaml",
    }
    return {
        "cues": {},
        "models": tiny_config()["models"],
        "seeds": [0],
        "decision": {**{k: str(ROOT / v) for k, v in files.items()}, "design": design},
    }


def calls(workdir: Path, task: str) -> tuple[int, int]:
    found = CALLS.findall((workdir / f"logs/inference/smollm2-135m/seed0/{task}/0.log").read_text())
    return int(found[-1][0]), int(found[-1][1])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("decision")
    write_config(path, decision_config())
    return path


def test_every_format_and_probe_produces_outcomes(
    workdir: Path, run_snakemake: SnakemakeRunner
) -> None:
    first = run_snakemake(workdir, "decision")
    assert "decision audit: 112 prompts per model x seed" in first.stderr
    lock = yaml.safe_load((workdir / "results/decision/preregistration.lock").read_text())
    assert len(lock["sha256"]) == 64
    summary = pl.read_csv(workdir / "results/tables/decision_outcomes.csv")
    rows = {row["task"]: row for row in summary.iter_rows(named=True)}
    assert set(rows) == set(TASKS)
    assert {t: rows[t]["n_responses"] for t in TASKS} == {
        "decision_rate_text": 24,
        "decision_decide_tool": 24,
        "decision_rank_json": 32,
        "decision_probe_choice": 16,
        "decision_probe_free": 16,
    }
    # constrained answers (a JSON ranking, a forced tool call) always parse
    for task in ("decision_rank_json", "decision_decide_tool"):
        assert (
            rows[task]["parse_rate"] == 1.0
            and rows[task]["n_constrained"] == rows[task]["n_responses"]
        )
    assert rows["decision_decide_tool"]["n_tool_calls"] == 24
    # option scores give every rating prompt an expected rating, parsed or not
    con = duckdb.connect(str(workdir / "results/cueaudit.duckdb"), read_only=True)
    low, high, n = con.sql(
        "SELECT min(expected_rating), max(expected_rating), count(expected_rating) "
        "FROM decision_outcomes WHERE task = 'decision_rate_text'"
    ).fetchall()[0]
    assert n == 24 and 1.0 <= low <= high <= 5.0
    ranks = con.sql("SELECT ranks FROM decision_outcomes WHERE task = 'decision_rank_json'").pl()[
        "ranks"
    ]
    assert all(len(r) == 4 and set(r) <= {1, 2, 3, 4} for r in ranks.to_list())
    bundle_types = {
        r[0]
        for r in con.sql(
            "SELECT DISTINCT bundle_type FROM decision_outcomes WHERE task = 'decision_rank_json'"
        ).fetchall()
    }
    assert bundle_types == {
        "demographic_matched",
        "irrelevant_matched",
        "disguised_demographic",
        "disguised_placebo",
    }
    con.close()


def test_second_run_is_a_no_op(workdir: Path, run_snakemake: SnakemakeRunner) -> None:
    again = run_snakemake(workdir, "decision", "--dry-run")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_more_profiles_run_the_model_only_on_new_prompts(
    workdir: Path, run_snakemake: SnakemakeRunner
) -> None:
    write_config(workdir, decision_config(profiles_per_tier=2))
    run_snakemake(workdir, "decision")
    assert calls(workdir, "decision_rate_text") == (24, 24)
    for task in ("decision_decide_tool", "decision_rank_json", "decision_probe_free"):
        made, hits = calls(workdir, task)
        assert made == (24 if task == "decision_decide_tool" else 0), task
        assert hits > 0
