"""A bad config stops the workflow before any job runs, naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SnakemakeRunner, tiny_config, write_config


@pytest.mark.parametrize(
    ("change", "key", "message"),
    [
        (
            {"models": {"m": {"backend": "vllm-nightly", "path": "x"}}},
            "models.m.backend",
            "is not one of",
        ),
        ({"seeds": ["zero"]}, "seeds.0", "is not of type 'integer'"),
        ({"samples": 3}, "(top level)", "'samples' was unexpected"),
    ],
)
def test_invalid_config_stops_before_any_job(
    tmp_path: Path, run_snakemake: SnakemakeRunner, change: dict, key: str, message: str
) -> None:
    write_config(tmp_path, tiny_config(**change))
    result = run_snakemake(tmp_path, "--dry-run", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"config key {key}" in output and message in output
    assert not (tmp_path / "results").exists()


def test_missing_resource_file_is_named(tmp_path: Path, run_snakemake: SnakemakeRunner) -> None:
    config = tiny_config()
    config["probing"]["tasks"]["salary"]["base_prompts"] = str(tmp_path / "nope.csv")
    write_config(tmp_path, config)
    result = run_snakemake(tmp_path, "--dry-run", check=False)
    assert result.returncode != 0
    assert "probing.tasks.salary.base_prompts" in result.stderr + result.stdout
    assert "nope.csv" in result.stderr + result.stdout
