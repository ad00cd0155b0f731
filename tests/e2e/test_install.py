"""`scripts/install.sh` installs the project's profiles where `snakemake --profile slurm` finds
them, and never replaces a user's own profile of that name."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.helpers.fake_slurm import fake_slurm_bin, path_with


def user_env(tmp_path: Path) -> dict[str, str]:
    """A user whose home and Snakemake config folder are empty temporary folders."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def install_profiles(env: dict[str, str]) -> str:
    result = subprocess.run(
        ["bash", "scripts/install.sh", "--profiles"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def snakemake_command() -> str:
    """The `snakemake` a user types: the one installed beside this interpreter."""
    beside = Path(sys.executable).with_name("snakemake")
    return str(beside) if beside.exists() else shutil.which("snakemake") or "snakemake"


def test_the_bare_slurm_profile_name_works_after_install(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    profiles = tmp_path / "config/snakemake"
    output = install_profiles(env)
    assert (
        f"install.sh: profile slurm: installed {profiles / 'slurm'} (snakemake --profile slurm)"
        in output
    )
    assert sorted(p.name for p in profiles.iterdir()) == ["local", "slurm"]
    for name in ("local", "slurm"):
        assert (profiles / name / "config.yaml").read_bytes() == (
            ROOT / "profiles" / name / "config.yaml"
        ).read_bytes()

    # the literal command, from the repository root, on a login node whose Slurm has the
    # profile's partitions (stand-ins for sinfo and sacctmgr: the workflow checks them)
    slurm_bin = fake_slurm_bin(tmp_path / "slurm-bin")
    result = subprocess.run(
        [snakemake_command(), "--profile", "slurm", "-n"],
        cwd=ROOT,
        env={**env, "PATH": path_with(slurm_bin, env["PATH"])},
        capture_output=True,
        text=True,
        check=False,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert (
        "Using profiles slurm and workflow specific profile profiles/default for setting "
        "default command line arguments." in log
    )
    # the profile's settings reach the jobs: inference (the default config's one job per
    # seed) asks for the GPU partition
    assert "rule generate_seed_responses:" in log
    assert "slurm_partition=gpu" in log and "gpu=1" in log

    # a second install finds its own copies and says so
    assert f"install.sh: profile slurm: {profiles / 'slurm'} is up to date" in install_profiles(env)


def test_a_users_own_profile_of_the_same_name_is_kept(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    own = tmp_path / "config/snakemake/slurm"
    own.mkdir(parents=True)
    (own / "config.yaml").write_text("executor: slurm\njobs: 10\n", encoding="utf-8")
    output = install_profiles(env)
    assert (
        f"install.sh: profile slurm: kept your own {own}; it differs from profiles/slurm "
        f"(compare: diff -r profiles/slurm {own})"
    ) in output
    assert (own / "config.yaml").read_text(encoding="utf-8") == "executor: slurm\njobs: 10\n"
    assert sorted(p.name for p in own.iterdir()) == ["config.yaml"]
    assert (tmp_path / "config/snakemake/local/config.yaml").is_file()
