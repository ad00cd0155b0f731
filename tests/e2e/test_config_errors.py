"""A bad config stops the workflow before any job runs, naming the key."""

from __future__ import annotations

import subprocess
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
        ({"seeds": [0.0]}, "seeds.0", "0.0 is not of type 'integer'"),
        (
            {"models": {"m": {"backend": "hf", "path": "x", "device": "the big GPU"}}},
            "models.m.device",
            "'the big GPU' is not valid (expected auto, cpu, cuda or cuda:N)",
        ),
        ({"cues": {"explicit": {"categories": ["race"]}}}, "cues.names", "required by the probing"),
        ({"probing": {"analysis": {}}}, "probing", "'tasks' is a required property"),
    ],
)
def test_invalid_config_stops_before_any_job(
    tmp_path: Path, run_snakemake: SnakemakeRunner, change: dict, key: str, message: str
) -> None:
    write_config(tmp_path, tiny_config(**change))
    result = run_snakemake(tmp_path, "--dry-run", check=False)
    output = output_of(result)
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


def output_of(result: subprocess.CompletedProcess[str]) -> str:
    """The console of a run that a bad input stopped: the message, never Python frames."""
    output = result.stdout + result.stderr
    assert 'File "' not in output and "Traceback" not in output, output
    return output


def test_a_float_shard_count_stops_before_any_job(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    config = tiny_config()
    config["probing"]["tasks"]["healthcare"]["shards"] = 2.0
    write_config(tmp_path, config)
    result = run_snakemake(tmp_path, "--dry-run", check=False)
    assert result.returncode != 0
    assert "config key probing.tasks.healthcare.shards: 2.0 is not of type 'integer'" in output_of(
        result
    )
    assert not (tmp_path / "results").exists()


def test_a_missing_models_block_is_named(tmp_path: Path, run_snakemake: SnakemakeRunner) -> None:
    config = tiny_config()
    del config["models"]
    write_config(tmp_path, config)
    result = run_snakemake(tmp_path, "--dry-run", check=False)
    assert result.returncode != 0
    assert (
        "Error: config: invalid configuration:\n  config key (top level): 'models' is a "
        "required property" in output_of(result)
    )


def test_a_key_given_twice_in_the_config_file_is_named(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    path = write_config(tmp_path, tiny_config())
    lines = path.read_text(encoding="utf-8").splitlines()
    first = lines.index("seeds:") + 1
    path.write_text("\n".join([*lines, "seeds: [7]", ""]), encoding="utf-8")
    result = run_snakemake(tmp_path, "--dry-run", check=False)
    assert result.returncode != 0
    assert (
        f"config/config.yaml: field 'seeds': key 'seeds' given twice, at lines {first} and "
        f"{len(lines) + 1} (only the last one would count)"
    ) in output_of(result)
    assert not (tmp_path / "results").exists()


def test_a_key_given_twice_in_a_configfile_is_named(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    write_config(tmp_path, tiny_config())
    extra = tmp_path / "extra.yaml"
    extra.write_text(
        "probing:\n  analysis:\n    bootstrap_replicates: 300\n    bootstrap_replicates: 400\n",
        encoding="utf-8",
    )
    result = run_snakemake(tmp_path, "--dry-run", "--configfile", str(extra), check=False)
    assert result.returncode != 0
    assert (
        f"{extra}: field 'probing.analysis.bootstrap_replicates': key 'bootstrap_replicates' "
        "given twice, at lines 3 and 4 (only the last one would count)"
    ) in output_of(result)


def test_a_yaml_syntax_error_gives_line_and_column(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    path = write_config(tmp_path, tiny_config())
    text = path.read_text(encoding="utf-8").replace("seeds:\n", "seeds:\n\t- 5\n", 1)
    line = text.splitlines().index("\t- 5") + 1
    path.write_text(text, encoding="utf-8")
    result = run_snakemake(tmp_path, "--dry-run", check=False)
    assert result.returncode != 0
    assert (
        f"config/config.yaml: YAML syntax error at line {line}, column 1: while scanning for "
        "the next token; found character '\\t' that cannot start any token"
    ) in output_of(result)


def test_a_failed_job_shows_its_error_on_the_console(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    """The workflow's own profile (profiles/default) shows a failed job's log."""
    names = tmp_path / "names.csv"
    names.write_text("name,race\nTyrone,black\n", encoding="utf-8")
    config = tiny_config()
    config["cues"]["names"]["lists"] = {"rosenman": str(names)}
    write_config(tmp_path, config)
    result = run_snakemake(tmp_path, "results/resources/names.parquet", check=False)
    assert result.returncode != 0
    assert (
        f"InputError: {names}: field 'gender': required column missing (header is ['name', 'race'])"
    ) in result.stdout + result.stderr
    assert not (tmp_path / "results/resources/names.parquet").exists()
