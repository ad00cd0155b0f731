"""Both studies' test designs through `snakemake --profile profiles/slurm` on a real
single-node Slurm. Every test that submits to the cluster is here: each counts or compares what
it submitted, so under ``pytest -n N`` they must share one worker (``--dist loadfile``).

CI starts the cluster with tests/slurm/cluster.sh and sets CUEAUDIT_REQUIRE_SLURM=1, so a
cluster that is down fails the test instead of skipping it.
"""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import ROOT, SnakemakeRunner, tiny_config, write_config
from tests.e2e.test_decision import decision_config

pytestmark = pytest.mark.e2e


#: `snakemake` arguments that run a workflow through the profile on the test cluster.
SLURM_ARGS: tuple[str, ...] = (
    "--profile",
    str(ROOT / "profiles/slurm"),
    "--slurm-status-command",
    "squeue",
    "--slurm-init-seconds-before-status-checks",
    "2",
    "--jobs",
    "4",
)


def run_here_and_on_slurm(
    local: Path,
    cluster: Path,
    run_snakemake: SnakemakeRunner,
    *targets: str,
    local_targets: tuple[str, ...] | None = None,
) -> subprocess.CompletedProcess[str]:
    """The workflow in ``local`` (up to ``local_targets``, default ``targets``) and, at the
    same time, through the Slurm profile in ``cluster``; the cluster run's result. The local
    run (a minute) fits in the cluster run's waits between its status checks; it submits
    nothing to Slurm."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        here = pool.submit(
            run_snakemake, local, *(targets if local_targets is None else local_targets)
        )
        on_slurm = run_snakemake(cluster, *targets, *SLURM_ARGS)
        here.result()  # raises the local run's failure
    return on_slurm


def cluster_config() -> dict:
    config = tiny_config(seeds=[0])
    del config["probing"]["tasks"]["salary"]
    return config


def responses(workdir: Path) -> pl.DataFrame:
    files = sorted((workdir / "results/responses").rglob("*.parquet"))
    return pl.concat([pl.read_parquet(f) for f in files]).sort("prompt_uid")


def submitted_jobs(since: float) -> list[dict[str, str]]:
    """Jobs Slurm knows of (MinJobAge keeps finished ones), submitted after ``since``."""
    fields = "JobID:16,SubmitTime:24,Partition:16,tres-per-job:32,Comment:400"
    out = subprocess.run(
        ["squeue", "--states=all", "-h", "-O", fields],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    jobs = []
    for line in out.splitlines():
        job_id, submitted, partition, gres, comment = [*line.split(), "", ""][:5]
        stamp = time.mktime(time.strptime(submitted, "%Y-%m-%dT%H:%M:%S"))
        if stamp >= since - 1:
            jobs.append({"id": job_id, "partition": partition, "gres": gres, "comment": comment})
    return jobs


def test_slurm_run_matches_local_run(
    slurm: None, tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    local, cluster = tmp_path / "local", tmp_path / "cluster"
    for workdir in (local, cluster):
        write_config(workdir, cluster_config())

    started = time.time()
    result = run_here_and_on_slurm(local, cluster, run_snakemake)
    log = result.stdout + result.stderr
    jobs = submitted_jobs(started)
    comments = " ".join(job["comment"] for job in jobs)

    # every job that is not a local rule went through sbatch
    for rule in ("expand_prompts", "prepare_model", "generate_responses", "build_database"):
        assert f"rule_{rule}" in comments or rule in comments, (rule, jobs)
    n_inference = sum("generate_responses" in job["comment"] for job in jobs)
    assert n_inference == 2  # 1 task × 1 seed × 2 shards
    for job in jobs:
        if "generate_responses" in job["comment"]:
            assert job["partition"] == "gpu" and "gpu" in job["gres"], job
    assert "steps (100%) done" in log, log[-3000:]

    local_rows, cluster_rows = responses(local), responses(cluster)
    assert local_rows.height == cluster_rows.height == 1 * 3 * 19
    columns = ["prompt_uid", "seed", "completion", "completion_tokens", "option_logprobs"]
    assert local_rows.select(columns).equals(cluster_rows.select(columns))
    for table in ("ratios_race.csv", "parse_rates.csv"):
        assert (local / "results/tables" / table).read_text() == (
            cluster / "results/tables" / table
        ).read_text()


def test_the_decision_design_on_slurm_matches_the_local_run(
    slurm: None, tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    config = decision_config()
    config["decision"]["design"]["tasks"] = ["decision_rate_text", "decision_rank_tool"]
    local, cluster = tmp_path / "local", tmp_path / "cluster"
    for workdir in (local, cluster):
        write_config(workdir, config)
    # every rule of the study on the cluster; here, only what is compared
    summary = "results/tables/decision_outcome_summary.csv"
    result = run_here_and_on_slurm(
        local, cluster, run_snakemake, "decision", local_targets=(summary,)
    )
    assert "steps (100%) done" in result.stdout + result.stderr
    for task in config["decision"]["design"]["tasks"]:
        path = f"results/outcomes/smollm2-135m/seed0/{task}.parquet"
        columns = ["prompt_uid", "answer" if "rate" in task else "ranks", "parse_error"]
        assert (
            pl.read_parquet(local / path)
            .select(columns)
            .sort("prompt_uid")
            .equals(pl.read_parquet(cluster / path).select(columns).sort("prompt_uid"))
        )
    assert (local / summary).read_text() == (cluster / summary).read_text()
