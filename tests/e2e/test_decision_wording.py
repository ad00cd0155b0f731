"""The wording arm, its confounded construction and the paired reasoning rerun end to end on
the packaged SmolLM2 (a small slice): the workflow builds the arms, reports the confounded
one instead of stopping, and writes the wording and paired tables."""

from __future__ import annotations

import copy
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import SnakemakeRunner, write_config
from tests.e2e.test_decision import decision_config

pytestmark = pytest.mark.e2e


def arms_config() -> dict:
    config = decision_config()
    config["models"]["smollm2-reasoning"] = copy.deepcopy(config["models"]["smollm2-135m"])
    decision = config["decision"]
    decision["models"] = ["smollm2-135m"]
    decision["design"] |= {"tasks": ["decision_rate_text"], "probe_bundles": 0}
    # the confounded arm's 12 prompts give its race x profile table p = 0.06 (chi-square 12
    # on 6 df): flagged at this level, not at the default 0.001
    decision["analysis"] |= {"composition_alpha": 0.1}
    wording = {"paraphrases": 2, "name_assignment": "crossed"}
    decision["extensions"] = {
        "wording": {"extension": True, "design": wording},
        "wording_confounded": {
            "extension": True,
            "design": {**wording, "name_assignment": "fixed_per_profile"},
        },
        "reasoning_rerun": {
            "extension": True,
            "models": ["smollm2-reasoning"],
            "paired_with": "smollm2-135m",
        },
    }
    return config


def test_the_wording_and_reasoning_arms_run_end_to_end(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    write_config(tmp_path, arms_config())
    tables = {
        name: f"results/tables/decision_{name}.csv"
        for name in ("composition", "composition_flags", "wording", "reasoning_paired")
    }
    result = run_snakemake(tmp_path, *tables.values())
    # 3 profiles x 8 name pairs; x 2 paraphrases; a quarter of that when confounded
    assert "decision extension wording: 48 prompts per model x seed" in result.stderr
    assert "decision extension wording_confounded: 12 prompts per model x seed" in result.stderr
    assert "decision extension reasoning_rerun: 24 prompts per model x seed" in result.stderr
    read = {name: pl.read_csv(tmp_path / path) for name, path in tables.items()}
    flags = read["composition_flags"].filter(pl.col("subsample") == "design")
    assert set(flags["arm"]) == {"wording_confounded"}
    # one profile per tier here, so race x tier is race x profile: 12 cells each
    assert set(flags["factor"]) == {"profile_id", "tier"} and flags.height == 2 * 3 * 4
    wording = read["wording"]
    assert set(wording["arm"]) == {"wording", "wording_confounded"}
    assert set(wording["term"]) == {"by paraphrase", "paraphrase x group"}
    flagged = dict(wording.group_by("arm").agg(pl.col("composition_flagged").all()).iter_rows())
    assert flagged == {"wording": False, "wording_confounded": True}
    paired = read["reasoning_paired"]
    assert set(paired["paired_with"]) == {"smollm2-135m"}
    assert paired.height == 4  # Black, Hispanic, Asian vs White; female vs male
    # the prompts whose rating both runs parsed (SmolLM2 parses few), and a reason where the
    # slice is too small to fit
    assert 0 < paired["n_shared"][0] <= 24
    for table in (wording, paired):
        unfitted = table.filter(~pl.col("estimate").is_finite())
        assert unfitted["note"].is_not_null().all()
