"""Incremental reruns: a change reruns exactly what it invalidated, and no more."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
import yaml

from tests.conftest import ROOT, SnakemakeRunner, tiny_config, write_config

pytestmark = pytest.mark.e2e

INFERENCE_RULES = {"generate_responses", "prepare_model", "expand_prompts", "parse_responses"}
ANALYSIS_RULES = {
    "summarise_parse_rates",
    "compute_validity",
    "compute_outcome_ratios",
    "compute_group_means",
    "compute_race_prediction",
    "compute_readability",
    "compute_regressions",
    "compute_sample_sizes",
    "export_replication",
    "build_database",
    "plot_validity_heatmaps",
    "plot_validity_across",
    "plot_outcome_ratios",
    "plot_group_means",
    "all",
}
#: The answers of the one task: what an inference change is checked on.
OUTCOMES = "results/outcomes/smollm2-135m/seed0/healthcare.parquet"
CALLS = re.compile(r"model calls: (\d+), cache hits: (\d+)")


def planned_jobs(output: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, wildcards) of each job a dry run would execute."""
    jobs: list[tuple[str, dict[str, str]]] = []
    for line in output.splitlines():
        rule = re.match(r"^(?:local)?rule (\w+):$", line.strip())
        if rule:
            jobs.append((rule.group(1), {}))
        wildcards = re.match(r"^wildcards: (.*)$", line.strip())
        if wildcards and jobs:
            jobs[-1] = (
                jobs[-1][0],
                dict(kv.split("=", 1) for kv in wildcards.group(1).split(", ")),
            )
    return jobs


def small_name_list(path: Path, extra: list[str] | None = None) -> Path:
    """Two names per race × gender subgroup from the Rosenman list (plus ``extra`` rows)."""
    names = pl.read_csv(ROOT / "resources/names/rosenman.csv")
    subset = (
        names.group_by("race", "gender", maintain_order=True)
        .head(2)
        .select("name", "race", "gender", "source")
    )
    lines = ["name,race,gender,source"] + [",".join(row) for row in subset.iter_rows()]
    path.write_text("\n".join(lines + (extra or [])) + "\n", encoding="utf-8")
    return path


def rerun_config(workdir: Path) -> dict:
    config = tiny_config(seeds=[0])
    del config["probing"]["tasks"]["salary"]
    config["cues"]["names"] = {
        "lists": {"rosenman": str(small_name_list(workdir / "rosenman.csv"))},
        "per_group": None,
    }
    config["cues"]["explicit"] = {"categories": ["race"]}
    return config


def override(workdir: Path, name: str, values: dict) -> Path:
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return path


def inference_calls(workdir: Path) -> tuple[int, int]:
    """Model calls and cache hits summed over the newest inference logs."""
    calls = hits = 0
    for log in (workdir / "logs/inference").rglob("*.log"):
        found = CALLS.findall(log.read_text())
        if found:
            calls += int(found[-1][0])
            hits += int(found[-1][1])
    return calls, hits


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("reruns")
    write_config(path, rerun_config(path))
    return path


def test_first_run_then_nothing_to_do(workdir: Path, run_snakemake: SnakemakeRunner) -> None:
    run_snakemake(workdir)
    again = run_snakemake(workdir, "--dry-run")
    assert "Nothing to be done" in again.stdout + again.stderr
    assert planned_jobs(again.stdout + again.stderr) == []


def test_new_seed_runs_only_its_inference(workdir: Path, run_snakemake: SnakemakeRunner) -> None:
    extra = override(workdir, "seeds", {"seeds": [0, 1]})
    plan = planned_jobs(run_snakemake(workdir, "--dry-run", "--configfile", str(extra)).stdout)
    rules = {rule for rule, _ in plan}
    inference = [wc for rule, wc in plan if rule == "generate_responses"]
    assert len(inference) == 2 and all(wc["seed"] == "1" for wc in inference)
    assert [wc["seed"] for rule, wc in plan if rule == "parse_responses"] == ["1"]
    assert not rules & {"prepare_model", "expand_prompts", "prepare_names"}
    assert rules - {"generate_responses", "parse_responses"} <= ANALYSIS_RULES


def test_analysis_parameter_reruns_no_inference(
    workdir: Path, run_snakemake: SnakemakeRunner
) -> None:
    extra = override(workdir, "analysis", {"probing": {"analysis": {"bootstrap_replicates": 300}}})
    plan = planned_jobs(run_snakemake(workdir, "--dry-run", "--configfile", str(extra)).stdout)
    rules = {rule for rule, _ in plan}
    # only the bootstrapped tables (and what reads them) depend on the replicate count
    assert {"compute_outcome_ratios", "compute_group_means", "build_database"} <= rules
    assert not rules & {"compute_validity", "compute_regressions", "compute_readability"}
    assert not rules & INFERENCE_RULES


def test_inference_rerun_is_served_from_cache(
    workdir: Path, run_snakemake: SnakemakeRunner
) -> None:
    # batch size is an inference parameter that must not change any answer
    config = yaml.safe_load((workdir / "config/config.yaml").read_text())
    config["models"]["smollm2-135m"]["batch_size"] = 5
    write_config(workdir, config)
    before = pl.read_parquet(workdir / OUTCOMES)
    result = run_snakemake(workdir, OUTCOMES)  # the analyses downstream are no inference
    planned = {rule for rule, _ in planned_jobs(result.stdout + result.stderr)}
    assert "generate_responses" in planned
    calls, hits = inference_calls(workdir)
    assert calls == 0 and hits == 3 * (1 + 8 + 5)
    after = pl.read_parquet(workdir / OUTCOMES)
    assert before.sort("prompt_uid").equals(after.sort("prompt_uid"))


def test_added_name_runs_the_model_only_on_new_prompts(
    workdir: Path, run_snakemake: SnakemakeRunner
) -> None:
    small_name_list(workdir / "rosenman.csv", extra=["Jamal,Black,male,rosenman"])
    result = run_snakemake(workdir, OUTCOMES)
    planned = {rule for rule, _ in planned_jobs(result.stdout + result.stderr)}
    assert {"prepare_names", "expand_prompts", "generate_responses"} <= planned
    assert "prepare_model" not in planned
    calls, hits = inference_calls(workdir)
    assert calls == 3  # one new name × 3 base prompts
    assert hits == 3 * (1 + 8 + 5)
