"""Pre-flight through the workflow: a model that cannot run is refused when the workflow starts
(a dry run too), an API endpoint is probed before its first inference job, and the Slurm
profile gives API inference no GPU."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, SMOLLM2_SPEC, SnakemakeRunner, tiny_config, write_config
from tests.e2e.test_config_errors import output_of
from tests.helpers.fake_slurm import fake_slurm_bin, path_with
from tests.helpers.fault_proxy import CannedServer, chat_completion

pytestmark = pytest.mark.e2e


def api_config(url: str = "http://127.0.0.1:9/v1", **block: Any) -> dict[str, Any]:
    config = tiny_config(seeds=[0])
    openai = {"model": "stand-in", "base_url": url, "api_key_env": None, "logprobs": True}
    config["models"]["api"] = {"backend": "openai", "openai": openai | block}
    return config


def test_models_that_cannot_run_stop_the_dry_run(
    tmp_path: Path, run_snakemake: SnakemakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUEAUDIT_UNSET_KEY", raising=False)
    config = api_config(api_key_env="CUEAUDIT_UNSET_KEY", logprobs=False)
    config["models"]["local"] = {"backend": "hf", "path": "./models/not-downloaded"}
    config["models"]["bare"] = {"backend": "openai"}
    write_config(tmp_path, config)
    result = run_snakemake(tmp_path, "--dry-run", check=False)
    output = output_of(result)
    assert result.returncode != 0
    assert "config key models.bare.openai: required with backend openai" in output

    del config["models"]["bare"]
    write_config(tmp_path, config)
    result = run_snakemake(tmp_path, "--dry-run", check=False)
    output = output_of(result)
    assert result.returncode != 0
    for line in (
        "config key models.api.openai.api_key_env: the environment variable CUEAUDIT_UNSET_KEY "
        "is not set (export the key there, or set api_key_env: null for a server that needs "
        "no key)",
        "config key models.api.openai.logprobs: task healthcare needs option scores "
        "(probing.analysis.binary_outcome: probability), which an API model returns only with "
        "log-probabilities: set openai.logprobs: true, or use "
        "probing.analysis.binary_outcome: answer",
        "config key models.local.path: local model folder not found: ./models/not-downloaded",
    ):
        assert line in output, output
    assert not (tmp_path / "results").exists()


def test_an_endpoint_is_probed_before_its_first_prompt(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    """The probe alone (its own target: no prompt is built): an endpoint without
    log-probabilities is one line naming the model; one with them is recorded."""
    with CannedServer(200, chat_completion("Yes")) as server:
        write_config(tmp_path, api_config(server.url))
        result = run_snakemake(tmp_path, "results/preflight/api.json", check=False)
        assert server.hits == 1
    console = result.stdout + result.stderr
    assert result.returncode != 0
    assert (
        f"Error: config key models.api.openai.logprobs: {server.url} (model 'stand-in'): "
        "returned no log-probabilities (top_logprobs)"
    ) in console
    assert not (tmp_path / "results/preflight/api.json").exists()

    with CannedServer(200, chat_completion("Yes", logprobs=True)) as server:
        write_config(tmp_path, api_config(server.url))
        run_snakemake(tmp_path, "results/preflight/api.json")
    record = json.loads((tmp_path / "results/preflight/api.json").read_text())
    assert record == {
        "endpoint": server.url,
        "formats": {},
        "logprobs": True,
        "model": "api",
        "model_name": "stand-in",
        "served": True,
    }


def jobs_of(output: str, rule: str) -> list[str]:
    """The dry run's entries of ``rule`` (each from its ``rule`` line to the next time stamp,
    entry or blank line)."""
    entry = rf"^rule {rule}:\n(.*?)(?=^\[|^rule |^$|\Z)"
    return re.findall(entry, output, re.MULTILINE | re.DOTALL)


def test_api_inference_waits_for_its_probe_and_asks_no_gpu_on_slurm(
    tmp_path: Path, run_snakemake: SnakemakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", path_with(fake_slurm_bin(tmp_path / "bin")))
    config = api_config()
    # vLLM's default, on the HF engine here: one job answers every task of the seed
    config["models"]["per-seed"] = SMOLLM2_SPEC | {"inference_jobs": "per_seed"}
    write_config(tmp_path / "work", config)
    profile = str(ROOT / "profiles/slurm")
    result = run_snakemake(tmp_path / "work", "--dry-run", "--profile", profile)
    output = result.stdout + result.stderr
    local, api = jobs_of(output, "generate_responses"), jobs_of(output, "generate_api_responses")
    probes = jobs_of(output, "check_model")
    assert len(local) == len(api) == 4 and len(probes) == 1  # 2 tasks x 2 shards each
    assert all("results/responses/smollm2-135m/" in job for job in local)
    assert all("results/responses/api/" in job for job in api)
    assert all("slurm_partition=gpu" in job and "gpu=1" in job for job in local)
    assert all("gpu=" not in job and "slurm_partition=debug" in job for job in api)
    assert all("results/preflight/api.json" in job for job in api)
    assert "results/preflight/smollm2-135m.json" not in output  # local weights: no probe
    (seed_job,) = jobs_of(output, "generate_seed_responses")
    copies = jobs_of(output, "copy_seed_responses")
    assert "results/responses_per_seed/per-seed/seed0" in seed_job
    assert "slurm_partition=gpu" in seed_job and "gpu=1" in seed_job
    # each shard copied to where a per-task job would have written it
    copied = re.findall(r"output: results/responses/per-seed/seed0/(\S+)", "".join(copies))
    shards = re.findall(r"output: results/responses/smollm2-135m/seed0/(\S+)", "".join(local))
    assert sorted(copied) == sorted(shards) and len(shards) == 4

    monkeypatch.setenv("PATH", path_with(fake_slurm_bin(tmp_path / "bin", partitions=["cpu*"])))
    result = run_snakemake(tmp_path / "work", "--dry-run", "--profile", profile, check=False)
    assert result.returncode != 0
    assert (
        "profile key default-resources.slurm_partition: partition 'debug' does not exist on "
        "this cluster (sinfo lists: cpu); set your site's partition"
    ) in output_of(result)
