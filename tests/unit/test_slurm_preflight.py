"""The Slurm pre-flight (cueaudit.slurm): a profile whose partition or account does not exist,
or a node without Slurm's accounting commands, is one line before any job, not a failed and
retried submission."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cueaudit.slurm import check_slurm, slurm_problems, slurm_resources, snakemake_command_line
from tests.helpers.fake_slurm import fake_slurm_bin, path_with

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ["--snakefile", str(ROOT / "Snakefile"), "--profile", str(ROOT / "profiles/slurm")]
Resources = tuple[dict[str, str], dict[str, str]]


@pytest.fixture(scope="module")
def profile() -> Resources:
    """The partitions and account of profiles/slurm, as Snakemake reads its command line
    (once: Snakemake's plugin registry answers a second parse in one process without its
    executors)."""
    return slurm_resources(snakemake_command_line([*PROFILE, "-n"]))


@pytest.fixture
def slurm_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    def install(**kw: Any) -> Path:
        folder = fake_slurm_bin(tmp_path / "bin", **kw)
        monkeypatch.setenv("PATH", path_with(folder))
        return folder

    return install


def test_the_profile_names_its_partitions_and_account(profile: Resources) -> None:
    assert profile == (
        {
            "default-resources.slurm_partition": "debug",
            "set-resources.generate_responses.slurm_partition": "gpu",
            "set-resources.generate_seed_responses.slurm_partition": "gpu",
        },
        {"default-resources.slurm_account": "none"},
    )


def test_the_profile_passes_where_its_partitions_exist(
    profile: Resources, slurm_bin: Callable[..., Path]
) -> None:
    slurm_bin()  # debug and gpu, no accounting (the test cluster): nothing to check against
    assert list(slurm_problems(*profile)) == []
    slurm_bin(accounts=["none", "lab"])
    assert list(slurm_problems(*profile)) == []


def test_a_placeholder_partition_is_refused(
    profile: Resources, slurm_bin: Callable[..., Path]
) -> None:
    slurm_bin(partitions=["cpu*", "a100"])
    assert list(slurm_problems(*profile)) == [
        "profile key default-resources.slurm_partition: partition 'debug' does not exist on "
        "this cluster (sinfo lists: a100, cpu); set your site's partition",
        "profile key set-resources.generate_responses.slurm_partition: partition 'gpu' does "
        "not exist on this cluster (sinfo lists: a100, cpu); set your site's partition",
        "profile key set-resources.generate_seed_responses.slurm_partition: partition 'gpu' "
        "does not exist on this cluster (sinfo lists: a100, cpu); set your site's partition",
    ]


def test_an_account_that_is_not_yours_is_refused(
    profile: Resources, slurm_bin: Callable[..., Path]
) -> None:
    slurm_bin(accounts=["lab-a", "lab-b"])
    assert list(slurm_problems(*profile)) == [
        "profile key default-resources.slurm_account: account 'none' is not one of yours "
        "(Slurm lists: lab-a, lab-b); set your account"
    ]
    assert list(slurm_problems(profile[0], {"default-resources.slurm_account": "lab-b"})) == []


def test_no_sacctmgr_is_said_plainly(profile: Resources, slurm_bin: Callable[..., Path]) -> None:
    slurm_bin(sacctmgr=False)
    assert list(slurm_problems(*profile)) == [
        "profile key default-resources.slurm_account: snakemake-executor-plugin-slurm checks "
        "the account (default-resources.slurm_account: none) with sacctmgr, which is not on "
        "PATH: every submission would fail (No such file or directory: 'sacctmgr'); run on a "
        "node with Slurm's accounting commands"
    ]


def test_no_slurm_at_all_is_said_plainly(
    profile: Resources, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", path_with(tmp_path))  # no sinfo anywhere
    assert list(slurm_problems(*profile)) == [
        "the slurm executor needs Slurm's commands, and sinfo is not on PATH: run snakemake "
        "on the cluster's login node (or without the slurm profile)"
    ]


def check_in_a_process(argv: list[str], path: str) -> subprocess.CompletedProcess[str]:
    code = f"from cueaudit.slurm import check_slurm; check_slurm({argv!r})"
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PATH": path, "PYTHONPATH": str(ROOT / "src")},
        check=False,
    )


def test_only_the_slurm_executor_is_checked(tmp_path: Path) -> None:
    no_slurm = path_with(tmp_path)
    refused = check_in_a_process([*PROFILE, "-n"], no_slurm)
    assert refused.returncode == 1 and "sinfo is not on PATH" in refused.stderr
    local = check_in_a_process(["--snakefile", str(ROOT / "Snakefile"), "-n"], no_slurm)
    assert local.returncode == 0, local.stderr[-2000:]
    check_slurm(["not", "--a-snakemake-flag"])  # not Snakemake's command line: not checked


def test_a_path_without_slurm_keeps_the_rest_of_a_folder_that_holds_it(tmp_path: Path) -> None:
    """Where slurm-client is installed, sinfo sits in /usr/bin beside sh and which: hiding it
    must not hide them (Snakemake looks for both when it starts)."""
    system = tmp_path / "usr-bin"
    for name in ("sinfo", "sbatch", "sh", "which"):
        (system / name).parent.mkdir(exist_ok=True)
        (system / name).write_text("#!/bin/sh\n", encoding="utf-8")
        (system / name).chmod(0o755)
    path = path_with(tmp_path / "bin", str(system))
    reachable = {
        name
        for entry in path.split(":")
        for name in ("sinfo", "sbatch", "sh", "which")
        if (Path(entry) / name).exists()
    }
    assert reachable == {"sh", "which"}
