"""The main job a newcomer waits for: `snakemake --cores 2` on a fresh clone, time per stage.

Clones the checkout's committed HEAD into a temporary folder (nothing under results/, no
response cache), runs the default config's whole workflow (both studies, every table and
figure) and reads each job's start and end from Snakemake's log. Jobs are grouped into stages:
set-up and prompts, inference per study (race prediction on its own), parsing, the probing
analyses, the decision analyses, and the database. Per stage: its jobs' summed wall time, and
when its first job started and its last ended (Snakemake interleaves the stages). A job that
answers every task of a seed (``inference_jobs: per_seed``) is split at its log's task lines:
its engine start is a stage of its own, each task's share goes to its study's stage.

    python benchmarks/main_job.py [--cores 2] [--out FILE] [--keep DIR]
    python benchmarks/main_job.py --smoke    # one small job (the name table), seconds
"""

from __future__ import annotations

import argparse
import datetime
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import begin_results, default_out, footer, write_results  # noqa: E402

#: Stages in the order the workflow runs them, and the rules of each (first match wins).
STAGES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "inference: probing advice tasks",
        re.compile(r"generate_(api_)?responses:(healthcare|legal|salary)$"),
    ),
    ("inference: race prediction", re.compile(r"generate_(api_)?responses:race_prediction$")),
    ("inference: decision audit", re.compile(r"generate_(api_)?responses:decision_")),
    ("inference: engine starts of the per-seed jobs", re.compile(r"generate_seed_responses")),
    (
        "set-up and prompts",
        re.compile(
            r"(prepare_|build_explicit|translate_|expand_|augment_|build_.*prompts|freeze_)"
        ),
    ),
    ("parsing", re.compile(r"parse_responses|copy_seed_responses")),
    ("decision analyses and figures", re.compile(r"decision|plant_|check_decision")),
    ("database", re.compile(r"build_database")),
    ("probing analyses, figures and export", re.compile(r".")),
)
_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_START = re.compile(r"^(?:local)?rule (\w+):$")
_JOBID = re.compile(r"^\s+jobid: (\d+)$")
_WILDCARDS = re.compile(r"^\s+wildcards: (.*)$")
_FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")
#: A per-seed inference job's log line where it starts a task.
_SEED_TASK = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+ \S+ \S+: task \d+ of \d+: ([\w-]+)$"
)


def parse_log(text: str) -> list[dict[str, Any]]:
    """Every finished job of a Snakemake log: rule, task wildcard, start and end (epoch s)."""
    jobs: dict[str, dict[str, Any]] = {}
    finished: list[dict[str, Any]] = []
    stamp: float | None = None
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        if match := _STAMP.match(line):
            stamp = datetime.datetime.strptime(match[1], "%a %b %d %H:%M:%S %Y").timestamp()
            current = None
        elif (match := _START.match(line)) and stamp is not None:
            current = {"rule": match[1], "task": None, "wildcards": {}, "start": stamp}
        elif current is not None and (match := _JOBID.match(line)):
            jobs[match[1]] = current
        elif current is not None and (match := _WILDCARDS.match(line)):
            current["wildcards"] = dict(w.split("=", 1) for w in match[1].split(", "))
            current["task"] = current["wildcards"].get("task")
        elif (match := _FINISHED.match(line)) and stamp is not None and match[1] in jobs:
            job = jobs.pop(match[1])
            finished.append({**job, "end": stamp, "seconds": stamp - job["start"]})
    if not finished:
        raise SystemExit("no finished job found in the Snakemake log: has its format changed?")
    return finished


def split_seed_jobs(jobs: list[dict[str, Any]], workdir: Path) -> list[dict[str, Any]]:
    """Each per-seed inference job as its engine start (up to its first task) and one job per
    task, from the task lines of its log (logs/inference/<model>/seed<seed>.log)."""
    out: list[dict[str, Any]] = []
    for job in jobs:
        if job["rule"] != "generate_seed_responses":
            out.append(job)
            continue
        wildcards = job["wildcards"]
        log = workdir / f"logs/inference/{wildcards['model']}/seed{wildcards['seed']}.log"
        starts = [
            (datetime.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S").timestamp(), m[2])
            for m in map(_SEED_TASK.match, log.read_text().splitlines())
            if m
        ]
        if not starts:
            raise SystemExit(f"{log}: no task line: has the runner's log format changed?")
        ends = [stamp for stamp, _ in starts[1:]] + [job["end"]]
        out.append({**job, "end": starts[0][0], "seconds": starts[0][0] - job["start"]})
        for (start, task), end in zip(starts, ends, strict=True):
            out.append(
                {"rule": "generate_responses", "task": task, "wildcards": wildcards}
                | {"start": start, "end": end, "seconds": end - start}
            )
    return out


def stage_of(job: dict[str, Any]) -> str:
    key = f"{job['rule']}:{job['task']}" if job["task"] else job["rule"]
    return next(name for name, pattern in STAGES if pattern.search(key))


def stages(jobs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per stage: its jobs, their summed wall time and the span from first start to last end
    (Snakemake interleaves stages, so spans overlap; the job seconds add up)."""
    out: dict[str, dict[str, Any]] = {}
    for job in jobs:
        entry = out.setdefault(
            stage_of(job), {"jobs": 0, "job_seconds": 0.0, "start": job["start"], "end": 0.0}
        )
        entry["jobs"] += 1
        entry["job_seconds"] += job["seconds"]
        entry["start"] = min(entry["start"], job["start"])
        entry["end"] = max(entry["end"], job["end"])
    order = [name for name, _ in STAGES]
    first = min(job["start"] for job in jobs)
    return {
        name: {
            "jobs": e["jobs"],
            "job_seconds": e["job_seconds"],
            "from": e["start"] - first,
            "to": e["end"] - first,
        }
        for name, e in sorted(out.items(), key=lambda kv: (kv[1]["start"], order.index(kv[0])))
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="one small job")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--keep", type=Path, help="clone into this folder and keep it")
    args = parser.parse_args()
    results = begin_results(args.smoke)
    results["cores"] = args.cores
    with tempfile.TemporaryDirectory() as tmp:
        clone = args.keep or Path(tmp) / "cueaudit"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        targets = ["results/resources/names.parquet"] if args.smoke else []
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", str(args.cores), *targets],
            cwd=clone,
            capture_output=True,
            text=True,
        )
        results["wall_seconds"] = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"snakemake failed:\n{done.stderr[-4000:]}")
        log = max((clone / ".snakemake/log").glob("*.snakemake.log"))
        finished = parse_log(log.read_text())
        jobs = split_seed_jobs(finished, clone)
    results["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024**2
    results["jobs"] = len(finished)
    results["stages"] = stages(jobs)
    results["inference_jobs"] = [
        {"task": j["task"], "seconds": j["seconds"]}
        for j in jobs
        if j["rule"] in ("generate_responses", "generate_api_responses")
    ]
    out = args.out or default_out("main_job", args.smoke)
    write_results(out, results)
    print(render_table(results))


def render_table(results: dict[str, Any]) -> str:
    wall = results["wall_seconds"]
    lines = [
        f"`snakemake --cores {results['cores']}` on a fresh clone: **{wall / 60:.1f} min** "
        f"({wall:.0f} s), {results['jobs']} jobs, largest job's peak RSS "
        f"{results['peak_rss_gb']:.1f} GB.",
        "",
        "| stage | jobs | summed job s | from – to s |",
        "|---|---:|---:|---:|",
    ]
    for name, stage in results["stages"].items():
        lines.append(
            f"| {name} | {stage['jobs']} | {stage['job_seconds']:.0f} | "
            f"{stage['from']:.0f} – {stage['to']:.0f} |"
        )
    lines += ["", footer(results)]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
