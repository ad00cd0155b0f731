"""The decision audit on AgentFairBench's public split (``config/decision/agentfairbench.yaml``)
end to end on the packaged SmolLM2, on a slice: its unequal tiers under the config's tier rule,
the counts printed before the run equal to the rows built, answered and analysed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from cueaudit.decision.design_settings import expected_counts
from cueaudit.decision.profiles import tier_counts
from cueaudit.decision.tiers import profile_tier_counts
from tests.conftest import ROOT, SnakemakeRunner, write_config
from tests.e2e.test_decision import FAIRFUND, decision_config, paper_config

#: AgentFairBench's public split where the workspace keeps it (beside the checkout)
AFB = ROOT.parent / "shared/data/agentfairbench/public_dev.jsonl"
OVERLAY = yaml.safe_load((ROOT / "config/decision/agentfairbench.yaml").read_text())["decision"]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(
        not AFB.is_file(),
        reason=f"AgentFairBench's public split is not at {AFB} (CC-BY-4.0, not shipped)",
    ),
]

TASKS = ["decision_rate_text", "decision_rank_json", "decision_probe_choice"]
#: The analyses the slice's checks read.
SLICE_TABLES = ("outcome_summary", "contrasts", "composition", "position")
COUNT = re.compile(r"decision audit: (\d+) prompts per model x seed \(([^)]*)\)")


def with_afb(config: dict[str, Any]) -> dict[str, Any]:
    """The config with the overlay's keys (its profile path replaced by the split's)."""
    decision = config["decision"]
    decision |= {k: v for k, v in OVERLAY.items() if k != "design"} | {"profiles": str(AFB)}
    decision["design"] = {**decision["design"], **OVERLAY["design"]}
    return config


def slice_config() -> dict[str, Any]:
    """Lending (tiers 5 / 5 / 2) under the overlay's tier rule, three profiles per tier at most:
    3 / 3 / 2 profiles under one name pair per race x gender; half the tiny design's rankings
    (AgentFairBench's profiles are long, and each ranking shows four): the matched demographic
    bundles and the disguised placebo ones, which the position model reads."""
    config = with_afb(decision_config())
    config["decision"]["design"] |= {
        "domains": ["lending"],
        "profiles_per_tier": 3,
        "tasks": TASKS,
        "bundles_per_type": {"demographic_matched": 4, "disguised_placebo": 12},
    }
    return config


def printed_counts(output: str) -> dict[str, int]:
    found = COUNT.search(output)
    assert found, output[-3000:]
    counts = dict(item.rsplit(" ", 1) for item in found.group(2).split(", "))
    assert sum(map(int, counts.values())) == int(found.group(1))
    return {task: int(n) for task, n in counts.items()}


def test_the_slice_runs_end_to_end_with_the_counts_it_printed(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    config = slice_config()
    write_config(tmp_path, config)
    # the answers and the tables read below (the whole study's rules run in test_decision.py)
    outcomes = {task: f"results/outcomes/smollm2-135m/seed0/{task}.parquet" for task in TASKS}
    tables = {name: f"results/tables/decision_{name}.csv" for name in SLICE_TABLES}
    result = run_snakemake(tmp_path, *outcomes.values(), *tables.values())
    output = result.stdout + result.stderr
    design = config["decision"]["design"]
    tiers = profile_tier_counts(AFB, "agentfairbench", OVERLAY["strip_suffixes"])
    printed = printed_counts(output)
    assert (
        printed
        == expected_counts(design, tiers)
        == {
            "decision_rate_text": 8 * 8,
            "decision_rank_json": 16,
            "decision_probe_choice": 8,
        }
    )
    assert (
        "decision audit: profiles per tier (clear_yes/borderline/clear_no, tier_rule available): "
        "Rate / Decide lending 3/3/2; bundles lending 5/5/2" in output
    )
    # the rows built, answered and parsed are the rows printed
    prompts = {
        task: pl.read_parquet(tmp_path / f"results/prompts/{task}.parquet") for task in TASKS
    }
    answered = {task: pl.read_parquet(tmp_path / path) for task, path in outcomes.items()}
    assert {task: table.height for task, table in prompts.items()} == printed
    assert {task: table.height for task, table in answered.items()} == printed
    rate = (
        answered["decision_rate_text"]
        .join(prompts["decision_rate_text"], on="prompt_uid")
        .group_by("tier")
        .agg(pl.col("profile_id").n_unique())
        .sort("tier")
        .rows()
    )
    assert rate == [("borderline", 3), ("clear_no", 2), ("clear_yes", 3)]
    # no profile carries the vignette suffix into a prompt, and each is AgentFairBench's
    shown = prompts["decision_rate_text"]
    assert shown["profile_id"].str.starts_with("loan_").all()
    assert not shown["text"].str.contains("PHI", literal=True).any()
    # the analyses ran on real rows
    summary = pl.read_csv(tmp_path / tables["outcome_summary"])
    assert dict(zip(summary["task"], summary["n_responses"], strict=True)) == printed
    assert summary.filter(pl.col("task") == "decision_rank_json")["parse_rate"].item() == 1.0
    contrasts = pl.read_csv(tmp_path / tables["contrasts"]).filter(pl.col("domain") == "lending")
    assert contrasts.height > 0 and contrasts["estimate"].is_finite().any()
    for name in ("composition", "position"):
        assert pl.read_csv(tmp_path / tables[name]).height > 0, name
    assert tier_counts(shown)["lending"] == {
        "clear_yes": 3 * 8,
        "borderline": 3 * 8,
        "clear_no": 2 * 8,
    }


@pytest.mark.usefixtures("api_keys")
@pytest.mark.skipif(not FAIRFUND.is_file(), reason=f"FairFund stimuli not present at {FAIRFUND}")
def test_the_paper_design_on_the_split_keeps_its_count_and_a_wrong_count_stops_it(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    """paper.yaml with the overlay: every profile of the split under all 40 name pairs, the
    paper design's 45,888 requests (40,728 without the wording and aid arms); a count of the
    split's tiers under tier_rule equal is refused."""
    config = with_afb(paper_config())
    write_config(tmp_path, config)
    result = run_snakemake(tmp_path, "decision", "--dry-run")
    output = result.stdout + result.stderr
    assert "decision audit: 7344 prompts per model x seed" in output
    assert "decision audit in total: 45888 requests" in output
    assert (
        "Rate / Decide hiring 4/5/3, lending 5/5/2, triage 4/5/3; "
        "bundles hiring 4/5/3, lending 5/5/2, triage 4/5/3" in output
    )

    config["decision"]["expected_requests"] = 40000
    write_config(tmp_path, config)
    result = run_snakemake(tmp_path, "decision", "--dry-run", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "config key decision.expected_requests: 40000, but the design has 45888" in output

    config["decision"]["design"] |= {"tier_rule": "equal", "profiles_per_tier": 4}
    write_config(tmp_path, config)
    result = run_snakemake(tmp_path, "decision", "--dry-run", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert (
        f"{AFB}: field 'tier': domain 'hiring' has 4 clear_yes / 5 borderline / 3 clear_no "
        "profiles, and tier_rule equal needs profiles_per_tier 4 in each (clear_no has 3)"
    ) in output
    assert not (tmp_path / "results").exists()
