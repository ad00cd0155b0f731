"""The aid domain end to end on the packaged SmolLM2: FairFund-Bench's own stimuli (read where
the workspace keeps them, ``../shared/data/fairfund``), a small slice as an extension arm
beside the tiny primary design, through inference, parsing, the analyses and the replication
table."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.decision.design_settings import expected_counts
from tests.conftest import ROOT, SnakemakeRunner, write_config
from tests.e2e.test_decision import decision_config

pytestmark = pytest.mark.e2e

NAME_PAIRS = "resources/names/elder_hayes_pairs.csv"
FAIRFUND = ROOT.parent / "shared/data/fairfund/stimuli.csv"
AID_TASKS = ["decision_rate_tool", "decision_rank_json"]
PRIMARY_BUNDLES = {
    "demographic_matched": 0,
    "irrelevant_matched": 0,
    "disguised_demographic": 12,
    "disguised_placebo": 0,
}
AID = {
    "extension": True,
    "description": "the aid domain on FairFund-Bench's stimuli",
    "design": {
        "domains": ["aid"],
        "tasks": AID_TASKS,
        "profiles_per_tier": 1,  # the first appeal of each category
        "names_per_cell": 1,
        "bundles_per_type": {"disguised_demographic": 12},
        "probe_bundles": 0,
    },
}


@pytest.mark.skipif(not FAIRFUND.is_file(), reason=f"FairFund stimuli not present at {FAIRFUND}")
def test_the_aid_domain_runs_and_fills_the_replication_table(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    config = decision_config()
    # the primary arm asks the aid arm's formats only (no probes), on 12 rankings instead of
    # 32: the table reads the aid arm
    config["decision"]["design"] |= {"tasks": AID_TASKS, "bundles_per_type": PRIMARY_BUNDLES}
    config["decision"] |= {
        "fairfund_stimuli": str(FAIRFUND),
        "fairfund_published": str(ROOT / "resources/decision/fairfund_published.yaml"),
        "extensions": {"fairfund_aid": AID},
    }
    write_config(tmp_path, config)
    design = {**config["decision"]["design"], **AID["design"]}
    counts = expected_counts(design)
    assert counts == {"decision_rate_tool": 24, "decision_rank_json": 12}
    # the arm's answers and its table (the whole study's rules run in test_decision.py)
    outcomes = {
        task: f"results/outcomes/smollm2-135m/seed0/{task}__fairfund_aid.parquet" for task in counts
    }
    replication = "results/tables/decision_aid_replication.csv"
    result = run_snakemake(tmp_path, *outcomes.values(), replication)
    assert "decision extension fairfund_aid: 36 prompts per model x seed" in result.stderr

    answered = {task: pl.read_parquet(tmp_path / path).height for task, path in outcomes.items()}
    assert answered == counts
    prompts = pl.read_parquet(tmp_path / "results/prompts/decision_rate_tool__fairfund_aid.parquet")
    names = dict(load_name_pairs(ROOT / NAME_PAIRS).select("pair_id", "full_name").rows())
    assert prompts.height == 24
    # FairFund's appeal as the candidate: its name inside the text, no name line
    assert all(names[k] in t for k, t in prompts.select("pair_id", "text").rows())
    assert not any("Applicant:" in t for t in prompts["text"])
    assert set(prompts["domain"]) == {"aid"} and prompts["race"].n_unique() == 4
    table = pl.read_csv(tmp_path / replication)

    assert table.sort("format")["format"].to_list() == ["rank", "rate"]
    assert set(table["arm"]) == {"fairfund_aid"} and set(table["domain"]) == {"aid"}
    by_format = {r["format"]: r for r in table.iter_rows(named=True)}
    # constrained answers (a tool call, a JSON ranking) always parse: every answer is analysed
    assert by_format["rate"]["n_obs"] == 24 and by_format["rank"]["n_obs"] == 12 * 4
    assert by_format["rate"]["published"] == 0.090 and by_format["rank"]["published"] == -0.067
    assert by_format["rank"]["replicated_by_paper"] == -0.064
    for row in by_format.values():
        assert "arXiv 2607.28934" in row["source"]
        estimate = row["estimate"]
        assert estimate is not None and math.isfinite(estimate), row
        if estimate != 0:
            assert row["direction_agrees"] is ((estimate > 0) == (row["published"] > 0)), row
        if row["ci_low"] is not None and math.isfinite(row["ci_low"]):
            inside = row["ci_low"] <= row["published"] <= row["ci_high"]
            assert row["published_in_ci"] is inside, row
    assert table.height == 2
