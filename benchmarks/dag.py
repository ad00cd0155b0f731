"""Time `snakemake --dry-run` on a study at the paper's scale.

Three tasks, every name source and the explicit descriptors, three models, three seeds, and
inference shards sized for a few GPU-hours each (25 per task and model × seed: about 200,000
prompts a shard at the paper's 5 million prompts per task). Prints jobs and seconds and
writes them to ``--out`` (default benchmarks/results/dag.json).

    python benchmarks/dag.py [--shards 25] [--repeat 3] [--out FILE] [--smoke]

``--smoke`` dry-runs once, one model, one seed and one shard per task (seconds), so CI
notices when the benchmark stops running; its times mean nothing.
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import begin_results, default_out, footer, write_results  # noqa: E402

MODELS = ("llama-3.1-8b", "olmo2-7b", "qwen2.5-7b")
SEEDS = (0, 1, 2)


def paper_scale_config(
    shards: int, models: tuple[str, ...] = MODELS, seeds: tuple[int, ...] = SEEDS
) -> dict:
    tasks = {
        task: {
            "base_prompts": str(ROOT / f"resources/prompts/{task}.csv"),
            "outcome": "usd" if task == "salary" else "binary",
            "max_new_tokens": 16,
            "shards": shards,
        }
        for task in ("healthcare", "salary", "legal")
    }
    models = {
        name: {"backend": "hf", "path": f"models/{name}", "dtype": "bfloat16", "batch_size": 64}
        for name in models
    }
    return {
        "probing": {"tasks": tasks},
        "cues": {
            "names": {
                "lists": {
                    source: str(ROOT / f"resources/names/{source}.csv")
                    for source in ("rosenman", "elder_hayes", "tzioumis")
                },
                "per_group": None,
            },
            "explicit": {},
        },
        "models": models,
        "seeds": list(seeds),
    }


def dry_run(workdir: Path) -> tuple[float, int, str]:
    start = time.perf_counter()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(ROOT / "Snakefile"),
            "--directory",
            str(workdir),
            "--dry-run",
            "--cores",
            "2",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    seconds = time.perf_counter() - start
    match = re.search(r"^total\s+(\d+)", result.stdout, flags=re.MULTILINE)
    return seconds, int(match.group(1)) if match else -1, result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="the JSON (default: results/)")
    parser.add_argument("--smoke", action="store_true", help="one model, seed and shard; once")
    args = parser.parse_args()
    models, seeds = MODELS, SEEDS
    if args.smoke:
        args.shards, args.repeat, models, seeds = 1, 1, MODELS[:1], SEEDS[:1]
    results = begin_results(args.smoke)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "config").mkdir()
        config = paper_scale_config(args.shards, models, seeds)
        # the models' folders (empty): the workflow's pre-flight refuses a dry run whose local
        # model folders do not exist
        for name in models:
            (workdir / "models" / name).mkdir(parents=True)
        (workdir / "config/config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        timings = []
        for _ in range(args.repeat):
            seconds, jobs, _ = dry_run(workdir)
            timings.append(seconds)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"jobs: {jobs}")
    print(f"dry-run seconds: min {min(timings):.2f}, all {[round(t, 2) for t in timings]}")
    print(f"peak memory of snakemake: {peak_mb:.0f} MB")
    results |= {
        "shards": args.shards,
        "models": len(models),
        "seeds": len(seeds),
        "jobs": jobs,
        "seconds_min": min(timings),
        "seconds": timings,
        "peak_rss_mb": peak_mb,
    }
    out = args.out or default_out("dag", args.smoke)
    write_results(out, results)
    print(f"wrote {out}")


def render_table(results: dict) -> str:
    """The README's table: jobs, dry-run seconds (fastest of the repeats), peak memory."""
    return "\n".join(
        [
            "| jobs | dry-run seconds | peak memory |",
            "|---:|---:|---:|",
            f"| {results['jobs']:,} | {results['seconds_min']:.1f} "
            f"| {results['peak_rss_mb']:.0f} MB |",
            "",
            (
                f"Fastest of {len(results['seconds'])} dry runs "
                f"({', '.join(f'{t:.1f}' for t in results['seconds'])} s). "
                if len(results["seconds"]) > 1
                else "One dry run. "
            )
            + footer(results),
        ]
    )


if __name__ == "__main__":
    main()
