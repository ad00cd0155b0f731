"""Both studies' smallest design through `snakemake --profile profiles/slurm` on a real
single-node Slurm, in one run: submission, the profile's partitions and groups, the same answers
and tables as a local run, and a rerun that finds nothing to do. Every test that submits to the
cluster is here: each counts what it submitted, so under ``pytest -n N`` they must share one
worker (``--dist loadfile``).

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
    local: Path, cluster: Path, run_snakemake: SnakemakeRunner, *targets: str
) -> subprocess.CompletedProcess[str]:
    """The workflow up to ``targets`` in ``local`` and, at the same time, through the Slurm
    profile in ``cluster``; the cluster run's result. The local run fits in the cluster run's
    waits between its status checks; it submits nothing to Slurm."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        here = pool.submit(run_snakemake, local, *targets)
        on_slurm = run_snakemake(cluster, *targets, *SLURM_ARGS)
        here.result()  # raises the local run's failure
    return on_slurm


DECISION_TASKS = ("decision_rate_text", "decision_rank_tool")
#: What the local run builds and the cluster run's copies are compared with.
COMPARED_TABLES = (
    "results/tables/ratios_race.csv",
    "results/tables/parse_rates.csv",
    "results/tables/decision_outcome_summary.csv",
)


def cluster_config() -> dict:
    """Both studies on the smallest design that still submits every kind of job: one probing
    task (2 inference shards) and two decision formats, one seed."""
    config = tiny_config(seeds=[0])
    del config["probing"]["tasks"]["salary"]
    config["decision"] = decision_config()["decision"]
    config["decision"]["design"]["tasks"] = list(DECISION_TASKS)
    return config


def responses(workdir: Path, task: str = "healthcare") -> pl.DataFrame:
    files = sorted((workdir / "results/responses").glob(f"*/*/{task}/*.parquet"))
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


def test_both_studies_on_slurm_match_the_local_run(
    slurm: None, tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    local, cluster = tmp_path / "local", tmp_path / "cluster"
    for workdir in (local, cluster):
        write_config(workdir, cluster_config())

    started = time.time()
    # the tables compared, on both: every kind of submission (single jobs, the GPU partition's
    # inference, the profile's groups) without the rest of the studies' analyses, which run
    # locally in tests/e2e
    result = run_here_and_on_slurm(local, cluster, run_snakemake, *COMPARED_TABLES)
    log = result.stdout + result.stderr
    assert "steps (100%) done" in log, log[-3000:]
    jobs = submitted_jobs(started)
    comments = " ".join(job["comment"] for job in jobs)

    # every job that is not a local rule went through sbatch
    for rule in ("expand_prompts", "prepare_model", "generate_responses", "build_decision_prompts"):
        assert f"rule_{rule}" in comments or rule in comments, (rule, jobs)
    # the profile's groups: one submission (its comment rule_<group>_<rules>) holds many jobs
    for group in ("parsing", "analysis", "decision_analysis"):
        assert any(job["comment"].startswith(f"rule_{group}_") for job in jobs), (group, jobs)
    inference = [job for job in jobs if "generate_responses" in job["comment"]]
    assert len(inference) == 2 + len(DECISION_TASKS)  # 2 probing shards, 1 per decision task
    assert all(job["partition"] == "gpu" and "gpu" in job["gres"] for job in inference), jobs

    local_rows, cluster_rows = responses(local), responses(cluster)
    columns = ["prompt_uid", "seed", "completion", "completion_tokens", "option_logprobs"]
    assert local_rows.select(columns).equals(cluster_rows.select(columns))
    for task in DECISION_TASKS:
        path = f"results/outcomes/smollm2-135m/seed0/{task}.parquet"
        kept = ["prompt_uid", "answer" if "rate" in task else "ranks", "parse_error"]
        assert (
            pl.read_parquet(local / path)
            .select(kept)
            .sort("prompt_uid")
            .equals(pl.read_parquet(cluster / path).select(kept).sort("prompt_uid"))
        )
    for table in COMPARED_TABLES:
        assert (local / table).read_text() == (cluster / table).read_text(), table

    # a second invocation through the profile finds nothing to do
    rerun = run_snakemake(cluster, *COMPARED_TABLES, "--dry-run", *SLURM_ARGS)
    assert "Nothing to be done" in rerun.stdout + rerun.stderr
