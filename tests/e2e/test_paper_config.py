"""config/paper.yaml dry-run against the paper's design (Tonneau et al. 2026, §3, Appendix B):
its job counts, its prompt counts (14,801,000 per model x seed; Table 5's N), and the size
check that stops a run whose design is not the paper's. Per-model seeds and race prediction
restricted by model and seed, on dry runs of a small design."""

from __future__ import annotations

import copy
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, SnakemakeRunner, tiny_config, write_config

pytestmark = pytest.mark.e2e

JOB = re.compile(r"output: results/responses/([^/]+)/seed(\d+)/([^/]+)/(\d+)\.parquet")
# The paper's sizes (§3.1-3.2): base prompts per task, and the cue variants: no cue, 3 name
# sources x 200, 23 explicit descriptors, AAVE, 2 dialog sources x 50 clusters x 4 dialogs.
BASE = {"healthcare": 4440, "salary": 5000, "legal": 5000}
VARIANTS = 1 + 600 + 23 + 1 + 400
# Components of §3.1 (templates x fills): 185 x 24 crossed; 100 x 66 and 197 x 63 resampled.
COMPONENTS = {
    "healthcare": ("symptoms", 185, "question", 24),
    "salary": ("profiles", 100, "city", 66),
    "legal": ("scenarios", 197, "city", 63),
}


def paper_config() -> dict:
    config = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    for source, path in config["cues"]["names"]["lists"].items():
        config["cues"]["names"]["lists"][source] = str(ROOT / path)
    return config


def stand_ins(workdir: Path, config: dict) -> None:
    """Files of the right sizes where paper.yaml expects the user's data (under data/)."""
    for model in config["models"].values():
        if "path" in model:
            (workdir / model["path"]).mkdir(parents=True, exist_ok=True)
    for task, (templates, n_templates, part, n_fills) in COMPONENTS.items():
        augment = config["probing"]["tasks"][task]["augment"]
        assert Path(augment["templates"]).stem == templates
        rows = [f"t{i},Template {i} of {task} in {{{part}}}." for i in range(n_templates)]
        write(workdir / augment["templates"], ["id,text", *rows])
        fills = [f"f{i},fill {i}" for i in range(n_fills)]
        write(workdir / augment["components"][part], ["id,text", *fills])
    dialog = config["cues"]["dialog"]
    write(workdir / dialog["cad"]["path"], ["stand-in"])
    for path in dialog["prism"].values():
        write(workdir / path, ["{}"])


def write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def jobs(output: str) -> Counter[tuple[str, int, str]]:
    """generate_responses jobs per (model, seed, task) in a dry run's output."""
    found = {(m, int(s), t, int(n)) for m, s, t, n in JOB.findall(output)}
    return Counter((m, s, t) for m, s, t, _ in found)


@pytest.mark.usefixtures("api_keys")
def test_the_paper_config_is_the_papers_design(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    config = paper_config()
    stand_ins(tmp_path, config)
    # as a user runs it: beside the default config, which it replaces (not extends)
    write_config(tmp_path, tiny_config())
    paper = tmp_path / "paper.yaml"
    paper.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    result = run_snakemake(tmp_path, "--dry-run", "--configfile", str(paper))
    output = result.stdout + result.stderr
    for task, n in BASE.items():
        assert f"probing task {task}: {n * VARIANTS} prompts ({n} base prompts x 1025" in output
    assert sum(BASE.values()) * VARIANTS == 14_801_000
    # Table 5's N: every healthcare prompt once, with LLaMA-3.1's race prediction of it
    assert BASE["healthcare"] * VARIANTS == 4_551_000
    assert (
        "probing study: 14801000 prompts per model x seed; 7 model x seed runs "
        "(llama-3.1-8b seeds 0, 1, 2, olmo-2-7b seeds 0, 1, 2, gpt-5.2 seed 0): "
        "103607000 requests" in output
    )
    assert (
        "probing race_prediction: 14801000 prompts per model x seed; 1 model x seed runs "
        "(llama-3.1-8b seed 0): 14801000 requests" in output
    )
    assert "probing study in total: 118408000 requests" in output
    # inference jobs: every model x its seeds x task x shard; race prediction by LLaMA only
    shards = {task: spec["shards"] for task, spec in config["probing"]["tasks"].items()}
    seeds = {"llama-3.1-8b": [0, 1, 2], "olmo-2-7b": [0, 1, 2], "gpt-5.2": [0]}
    expected = {
        (model, seed, task): n
        for model, model_seeds in seeds.items()
        for seed in model_seeds
        for task, n in shards.items()
    }
    race_prediction = config["probing"]["race_prediction"]["shards"]
    expected[("llama-3.1-8b", 0, "race_prediction")] = race_prediction
    assert dict(jobs(output)) == expected
    assert sum(expected.values()) == 7 * 300 + 300
    assert not (tmp_path / "results").exists()


@pytest.mark.usefixtures("api_keys")
def test_a_design_that_is_not_the_papers_stops(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    config = paper_config()
    config["probing"]["expected_prompts"] = 14_801_001
    stand_ins(tmp_path, config)
    write_config(tmp_path, config)
    result = run_snakemake(tmp_path, "--dry-run", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert (
        "config key probing.expected_prompts: 14801001 prompts per model x seed, but the "
        "design has 14801000" in output
    )
    assert "rule generate_responses" not in output
    assert not (tmp_path / "results").exists()


# --- per-model seeds and race prediction per model and seed, on a small design ---------------


def small_config(race_prediction: dict | None = None) -> dict:
    config = tiny_config(seeds=[0, 1, 2])
    config["models"]["api"] = {
        "backend": "openai",
        "openai": {
            "model": "stand-in",
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": None,
            "logprobs": True,
        },
        "seeds": [0],
    }
    if race_prediction is not None:
        config["probing"]["race_prediction"] = {"enabled": True, "shards": 1, **race_prediction}
    return config


def dry_run(workdir: Path, config: dict, run_snakemake: SnakemakeRunner) -> str:
    write_config(workdir, config)
    result = run_snakemake(workdir, "--dry-run")
    return result.stdout + result.stderr


def test_each_model_runs_its_own_seeds(tmp_path: Path, run_snakemake: SnakemakeRunner) -> None:
    output = dry_run(tmp_path, small_config(), run_snakemake)
    runs = {"smollm2-135m": [0, 1, 2], "api": [0]}
    expected = {
        (model, seed, task): 2
        for model, seeds in runs.items()
        for seed in seeds
        for task in ("healthcare", "salary")
    }
    assert dict(jobs(output)) == expected
    parsed = set(re.findall(r"output: (results/outcomes/[^ \n,]+\.parquet)", output))
    assert parsed == {f"results/outcomes/{m}/seed{s}/{t}.parquet" for m, s, t in expected}
    assert "4 model x seed runs (smollm2-135m seeds 0, 1, 2, api seed 0)" in output


@pytest.mark.parametrize(
    ("restriction", "runs"),
    [
        ({}, {("smollm2-135m", 0), ("smollm2-135m", 1), ("smollm2-135m", 2), ("api", 0)}),
        (
            {"models": ["smollm2-135m"]},
            {("smollm2-135m", 0), ("smollm2-135m", 1), ("smollm2-135m", 2)},
        ),
        ({"models": ["smollm2-135m"], "seeds": [1]}, {("smollm2-135m", 1)}),
        ({"seeds": [0]}, {("smollm2-135m", 0), ("api", 0)}),
    ],
)
def test_race_prediction_runs_only_the_chosen_models_and_seeds(
    tmp_path: Path, run_snakemake: SnakemakeRunner, restriction: dict, runs: set
) -> None:
    output = dry_run(tmp_path, small_config(restriction), run_snakemake)
    found = jobs(output)
    assert {(m, s) for m, s, t in found if t == "race_prediction"} == runs
    # the advice tasks still run on every model and seed
    assert sum(n for (_, _, t), n in found.items() if t != "race_prediction") == 4 * 2 * 2


def test_a_race_prediction_seed_no_model_runs_is_refused(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    config = small_config({"seeds": [3]})
    write_config(tmp_path, copy.deepcopy(config))
    result = run_snakemake(tmp_path, "--dry-run", check=False)
    assert result.returncode != 0
    assert "config key probing.race_prediction.seeds: seed 3 is not a seed of any" in (
        result.stdout + result.stderr
    )
