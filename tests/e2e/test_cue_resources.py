"""The cue-resource stages of the workflow (no model): dialect, dialog clusters from the
real-format fixtures, derived names and the race-prediction prompt table."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.conftest import ROOT, SnakemakeRunner, tiny_config, write_config

pytestmark = pytest.mark.e2e
FIX = ROOT / "tests/fixtures"


def test_cue_stages_build_every_cue_type(tmp_path: Path, run_snakemake: SnakemakeRunner) -> None:
    config = tiny_config()
    config["cues"]["names"]["use"] = "derived"
    config["cues"]["names"]["derive"] = {
        "top_n": 2,
        "min_ssa_count": 5,
        "ssa_years": [1990, 1991],
        "ssa": {"path": str(FIX / "names/names.zip")},
        "rosenman": {"path": str(FIX / "names/first_nameRaceProbs.tab")},
        "tzioumis": {"path": str(FIX / "names/firstnames.xlsx")},
    }
    config["cues"]["dialect"] = {"translator": "rule_based", "cache": str(tmp_path / "c.sqlite")}
    config["cues"]["dialog"] = {
        "n_clusters": 2,
        "cad": {"path": str(FIX / "cad/community_alignment.csv")},
        "prism": {
            "survey": str(FIX / "prism/survey.jsonl"),
            "conversations": str(FIX / "prism/conversations.jsonl"),
        },
    }
    config["probing"]["race_prediction"] = {"enabled": True, "tasks": ["healthcare"]}
    write_config(tmp_path, config)
    targets = ["results/prompts/salary.parquet", "results/prompts/race_prediction.parquet"]
    run_snakemake(tmp_path, *targets)

    results = tmp_path / "results"
    salary = pl.read_parquet(results / "prompts/salary.parquet")
    counts = dict(salary["cue"].value_counts().iter_rows())
    # 3 base prompts × (1 + 2 sources × 4 × 1 name + 1 dialect + 2 × 2 clusters × 4 + 10)
    assert counts == {
        "none": 3,
        "name_rosenman": 12,
        "name_tzioumis": 12,
        "dialect_aave": 3,
        "dialog_cad": 24,
        "dialog_prism": 24,
        "explicit": 30,
    }
    assert salary["fk_grade"].is_not_null().all()
    race = pl.read_parquet(results / "prompts/race_prediction.parquet")
    assert race.height == 3 * 36 and set(race["source_task"]) == {"healthcare"}
    overlap = pl.read_csv(results / "tables/name_overlap.csv")
    assert overlap.height == 2 * 4 and (overlap["n_derived"] == 2).all()
    audit = pl.read_csv(results / "tables/dialect_audit.csv")
    assert audit.height == 6  # 3 healthcare + 3 salary base prompts
    assert pl.read_csv(results / "tables/dialog_clusters_cad.csv")["sampled_clusters"][0] == 2

    again = run_snakemake(tmp_path, *targets, "--dry-run")
    assert "Nothing to be done" in again.stdout + again.stderr
