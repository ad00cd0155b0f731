"""Expand the probing study's full design of one model x seed into its prompt tables and
time it: 4,440 healthcare + 5,000 salary + 5,000 legal base prompts x 1,025 cue variants (no
cue, 600 names, 23 explicit descriptors, AAVE, 2 sources x 50 dialog clusters x 4 dialogs of
about 2,400 characters) = 14,801,000 prompts, through the library's own ``cue_variants``,
``expand_prompts`` and ``write_parquet``. Every stage runs in its own process (as the
Snakemake jobs do) and reports its wall time and peak RSS; then one inference shard of the
largest table is read through ``runner.shard_prompts``.

    python benchmarks/expansion.py [--base-prompts N] [--race-prediction] [--shards 64]
                                   [--before] [--keep DIR] [--out PATH] [--smoke]

``--base-prompts N`` caps every task at N base prompts. ``--before`` also runs the
per-row implementation of commit 2abd3ec, the last before prompt tables were normalised,
on 1,000 base prompts of one task (``--before-base`` to change), the size issue 13 measured:
that commit's whole ``src/`` (``git archive``) expands inputs built by this checkout, so that
the old expansion imports its own library, and this checkout expands the same inputs for the
row beside it. The README's table is
``--race-prediction --before``. The results go to ``--out`` (``--json`` is the same; default
benchmarks/results/expansion.json).

``--smoke`` runs every stage (race prediction and, where the checkout has commit 2abd3ec,
the before row too) on 10 base prompts per task and 4 shards (seconds), so CI notices when a
stage stops running; its times mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
#: The library a stage imports: this checkout's, or (the before row) an extracted old tree's.
LIBRARY_ENV = "CUEAUDIT_BENCHMARK_SRC"
sys.path.insert(0, os.environ.get(LIBRARY_ENV, str(ROOT / "src")))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import begin_results, default_out, footer, write_results  # noqa: E402

#: The paper's base prompts per task (§3.1).
PAPER_TASKS = {"healthcare": 4440, "salary": 5000, "legal": 5000}
NAME_SOURCES = ("rosenman", "elder_hayes", "tzioumis")
DIALOG_CLUSTERS = 50
DIALOG_CHARS = 2400
#: The last commit whose expansion held every prompt's text (the "before" row).
BEFORE_COMMIT = "2abd3ec"


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB on Linux


def synthetic_base(task: str, n: int, seed: int = 0) -> pl.DataFrame:
    """``n`` distinct base prompts of the shipped prompts' lengths: a shipped prompt of the
    task with a sentence of random words of its vocabulary in front."""
    from cueaudit.probing.base_prompts import load_base_prompts

    shipped = load_base_prompts(ROOT / f"resources/prompts/{task}.csv", task)["text"].to_list()
    vocab = sorted({w.strip(".,?!'").lower() for t in shipped for w in t.split()} - {""})
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    seen: set[str] = set()
    while len(texts) < n:
        words = rng.choice(vocab, size=8)
        text = f"{' '.join(words).capitalize()}. {shipped[len(texts) % len(shipped)]}"
        if text not in seen:
            seen.add(text)
            texts.append(text)
    ids = [f"{task}-{i}" for i in range(n)]
    return pl.DataFrame({"base_id": ids, "task": [task] * n, "text": texts})


def synthetic_translations(base: pl.DataFrame) -> pl.DataFrame:
    """A stand-in AAVE body per base prompt (the translator is not what is timed here)."""
    text = pl.col("text").str.replace_all(r"\bI have\b", "I done").str.replace_all(" is ", " be ")
    return base.select("base_id", text=text)


def synthetic_dialog(seed: int = 0) -> pl.DataFrame:
    """2 sources x 50 clusters x 4 (race x gender) dialog histories of about 2,400 chars."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(2000)] + ["doctor", "lawyer", "salary", "advice"])
    rows = []
    for source in ("cad", "prism"):
        for k in range(DIALOG_CLUSTERS):
            for race in ("Black", "White"):
                for gender in ("female", "male"):
                    turns, length = [], 0
                    while length < DIALOG_CHARS:
                        words = " ".join(rng.choice(vocab, size=int(rng.integers(8, 30))))
                        turn = f"{'USER' if len(turns) % 2 == 0 else 'MODEL'}: {words}."
                        turns.append(turn)
                        length += len(turn) + 1
                    rows.append((f"{source}-{k}", source, race, gender, "\n".join(turns)))
    return pl.DataFrame(
        rows, schema=["cluster_id", "source", "race", "gender", "prefix"], orient="row"
    )


def paper_cues() -> pl.DataFrame:
    from cueaudit.cues.explicit import explicit_descriptors
    from cueaudit.cues.names import load_name_lists
    from cueaudit.probing.expansion import cue_variants

    names = load_name_lists([ROOT / f"resources/names/{s}.csv" for s in NAME_SOURCES])
    return cue_variants(
        names, explicit_descriptors(), dialect="rule_based", dialog=synthetic_dialog()
    )


def stage_expand(task: str, n_base: int, out: Path) -> dict[str, object]:
    """Build one task's inputs, expand and write its prompt table."""
    from cueaudit.io import write_parquet
    from cueaudit.probing.expansion import expand_prompts

    start = time.perf_counter()
    base = synthetic_base(task, n_base)
    cues = paper_cues()
    translations = synthetic_translations(base)
    inputs = time.perf_counter()
    table = expand_prompts(base, cues, task, translations)
    expanded = time.perf_counter()
    write_parquet(table, out)
    return _expansion_result(task, base, cues, table, out, start, inputs, expanded)


def stage_inputs(task: str, n_base: int, folder: Path) -> dict[str, object]:
    """Write one task's base prompts, cue variants and translations for ``stage_expand_inputs``."""
    base = synthetic_base(task, n_base)
    base.write_parquet(folder / "base.parquet")
    paper_cues().write_parquet(folder / "cues.parquet")
    synthetic_translations(base).write_parquet(folder / "translations.parquet")
    return {"task": task, "base_prompts": n_base}


def stage_expand_inputs(task: str, folder: Path, out: Path) -> dict[str, object]:
    """Expand and write the inputs of ``stage_inputs`` with the library on ``sys.path``: the
    before row runs this under an old commit's whole source tree, so that its expansion imports
    its own library, and the same-size after row under this checkout's."""
    from cueaudit.io import write_parquet
    from cueaudit.probing.expansion import expand_prompts

    start = time.perf_counter()
    base = pl.read_parquet(folder / "base.parquet")
    cues = pl.read_parquet(folder / "cues.parquet")
    translations = pl.read_parquet(folder / "translations.parquet")
    inputs = time.perf_counter()
    table = expand_prompts(base, cues, task, translations)
    expanded = time.perf_counter()
    write_parquet(table, out)
    return _expansion_result(task, base, cues, table, out, start, inputs, expanded)


def _expansion_result(
    task: str,
    base: pl.DataFrame,
    cues: pl.DataFrame,
    table: pl.DataFrame,
    out: Path,
    start: float,
    inputs: float,
    expanded: float,
) -> dict[str, object]:
    written = time.perf_counter()
    return {
        "task": task,
        "base_prompts": base.height,
        "cue_variants": cues.height,
        "prompts": table.height,
        "inputs_s": inputs - start,
        "expand_s": expanded - inputs,
        "write_s": written - expanded,
        "wall_s": written - start,
        "parquet_mb": out.stat().st_size / 1e6,
        "peak_rss_gb": _peak_rss_gb(),
    }


def stage_race_prediction(source: Path, out: Path) -> dict[str, object]:
    from cueaudit.probing.race_prediction import write_race_prediction_table

    start = time.perf_counter()
    rows = write_race_prediction_table([source], out)
    return {
        "prompts": rows,
        "wall_s": time.perf_counter() - start,
        "parquet_mb": out.stat().st_size / 1e6,
        "peak_rss_gb": _peak_rss_gb(),
    }


def stage_shards(path: Path, n_shards: int, reads: int) -> dict[str, object]:
    from cueaudit.inference.runner import shard_prompts

    times, rows, chars = [], [], []
    for shard in np.linspace(0, n_shards - 1, reads).astype(int):
        start = time.perf_counter()
        frame = shard_prompts(path, int(shard), n_shards)
        times.append(time.perf_counter() - start)
        rows.append(frame.height)
        chars.append(int(frame["text"].str.len_chars().sum()))
    return {
        "n_shards": n_shards,
        "reads": reads,
        "rows_per_shard": int(np.mean(rows)),
        "text_mb_per_shard": float(np.mean(chars)) / 1e6,
        "first_s": times[0],
        "max_s": max(times),
        "mean_s": float(np.mean(times)),
        "peak_rss_gb": _peak_rss_gb(),
    }


def _child(*args: str, library: Path | None = None) -> dict[str, object]:
    """Run one stage in a fresh process (importing the library under ``library``, else this
    checkout's); its JSON line is the result."""
    env = dict(os.environ)
    if library is not None:
        env[LIBRARY_ENV] = str(library)
    done = subprocess.run(
        [sys.executable, __file__, "--stage", *args],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _have_before() -> bool:
    """Whether this checkout holds commit 2abd3ec's expansion (a shallow clone may not)."""
    spec = f"{BEFORE_COMMIT}:src/cueaudit/probing/expansion.py"
    done = subprocess.run(["git", "cat-file", "-e", spec], cwd=ROOT, capture_output=True)
    return done.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-prompts", type=int, default=None, help="cap per task")
    parser.add_argument("--race-prediction", action="store_true", help="of the legal task")
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--shard-reads", type=int, default=5)
    parser.add_argument(
        "--before", action="store_true", help=f"also time commit {BEFORE_COMMIT}'s expansion"
    )
    parser.add_argument("--before-base", type=int, default=1000)
    parser.add_argument("--keep", type=Path, default=None, help="write the tables here")
    parser.add_argument(
        "--out", "--json", type=Path, default=None, help="the JSON (default: results/)"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="every stage on 10 base prompts per task"
    )
    parser.add_argument("--stage", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.stage:
        kind, *rest = args.stage
        if kind == "expand":
            result = stage_expand(rest[0], int(rest[1]), Path(rest[2]))
        elif kind == "inputs":
            result = stage_inputs(rest[0], int(rest[1]), Path(rest[2]))
        elif kind == "expand_inputs":
            result = stage_expand_inputs(rest[0], Path(rest[1]), Path(rest[2]))
        elif kind == "race_prediction":
            result = stage_race_prediction(Path(rest[0]), Path(rest[1]))
        else:
            result = stage_shards(Path(rest[0]), int(rest[1]), int(rest[2]))
        print(json.dumps(result))
        return

    results: dict[str, object] = begin_results(args.smoke)
    if args.smoke:
        args.base_prompts, args.shards, args.shard_reads = 10, 4, 2
        args.race_prediction, args.before_base = True, 10
        args.before = _have_before()
        if not args.before:
            results["before_skipped"] = f"commit {BEFORE_COMMIT} is not in this checkout"
    results["options"] = {
        "base_prompts": args.base_prompts,
        "race_prediction": args.race_prediction,
        "before": args.before,
        "before_base": args.before_base,
    }
    tmp = tempfile.TemporaryDirectory(prefix="cueaudit-expansion-")
    root = args.keep or Path(tmp.name)
    root.mkdir(parents=True, exist_ok=True)
    tasks = {t: min(n, args.base_prompts or n) for t, n in PAPER_TASKS.items()}
    start = time.perf_counter()
    expanded = {}
    for task, n in tasks.items():
        expanded[task] = _child("expand", task, str(n), str(root / f"{task}.parquet"))
        print(json.dumps(expanded[task]), flush=True)
    results["expand"] = expanded
    results["expand_total_s"] = time.perf_counter() - start
    results["prompts"] = sum(r["prompts"] for r in expanded.values())  # type: ignore[misc]
    largest = max(tasks, key=lambda t: tasks[t])
    shards = _child(
        "shards", str(root / f"{largest}.parquet"), str(args.shards), str(args.shard_reads)
    )
    results["shards"] = {"task": largest, **shards}
    print(json.dumps(results["shards"]), flush=True)
    if args.race_prediction:
        results["race_prediction"] = _child(
            "race_prediction", str(root / "legal.parquet"), str(root / "race_prediction.parquet")
        )
        print(json.dumps(results["race_prediction"]), flush=True)
    if args.before:
        old_tree = root / f"commit-{BEFORE_COMMIT}"
        old_tree.mkdir()
        archive = subprocess.run(
            ["git", "archive", BEFORE_COMMIT, "src"], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive, check=True)
        inputs = root / "before-inputs"
        inputs.mkdir()
        _child("inputs", "legal", str(args.before_base), str(inputs))
        results["before"] = _child(
            "expand_inputs",
            "legal",
            str(inputs),
            str(root / "before.parquet"),
            library=old_tree / "src",
        )
        results["after_same_size"] = _child(
            "expand_inputs", "legal", str(inputs), str(root / "after.parquet")
        )
        print(json.dumps(results["before"]), json.dumps(results["after_same_size"]), flush=True)
    print(json.dumps(results, indent=1))
    out = args.out or default_out("expansion", args.smoke)
    write_results(out, results)
    print(f"wrote {out}")
    tmp.cleanup()


def _stage_row(label: str, r: dict) -> str:
    return (
        f"| {label} | {r['prompts']:,} | {r['wall_s']:.1f} ({r['expand_s']:.1f} expand + "
        f"{r['write_s']:.1f} write) | {r['peak_rss_gb']:.2f} GB | {r['parquet_mb']:.0f} MB |"
    )


#: Issue 13's targets: peak RSS, the three tasks' expansion, one shard's read.
TARGETS = {"peak_rss_gb": 4.0, "expand_total_s": 180.0, "shard_read_s": 1.0}


def render_table(results: dict) -> str:
    """The README's table: each stage's prompts, seconds, peak RSS and parquet size, and the
    targets."""
    lines = [
        "| stage | prompts | seconds | peak RSS | parquet |",
        "|---|---:|---:|---:|---:|",
    ]
    if "before" in results:
        before, after = results["before"], results["after_same_size"]
        lines.append(
            _stage_row(
                f"before (commit {BEFORE_COMMIT}'s per-row expansion), {before['task']}, "
                f"{before['base_prompts']:,} base prompts",
                before,
            )
        )
        lines.append(_stage_row(f"after, same {after['base_prompts']:,} base prompts", after))
    expand = results["expand"]
    for task, r in expand.items():
        lines.append(_stage_row(f"after, {task} ({r['base_prompts']:,} base prompts)", r))
    peak = max(r["peak_rss_gb"] for r in expand.values())
    parquet = sum(r["parquet_mb"] for r in expand.values())
    lines.append(
        f"| **after, the {len(expand)} tasks one after the other** | **{results['prompts']:,}** "
        f"| **{results['expand_total_s']:.1f}** | **{peak:.2f} GB** (max) | {parquet:.0f} MB |"
    )
    if "race_prediction" in results:
        r = results["race_prediction"]
        lines.append(
            "| race-prediction prompts of the legal task (`write_race_prediction_table`, "
            f"chunks of 1 M rows) | {r['prompts']:,} | {r['wall_s']:.1f} "
            f"| {r['peak_rss_gb']:.2f} GB | {r['parquet_mb']:.0f} MB |"
        )
    sh = results["shards"]
    lines.append(
        f"| one inference shard of {sh['n_shards']} ({sh['task']}, `runner.shard_prompts`, "
        f"{sh['rows_per_shard']:,} prompts, {sh['text_mb_per_shard']:.0f} MB of text) "
        f"| {sh['rows_per_shard']:,} | {sh['mean_s']:.2f} mean, {sh['max_s']:.2f} max of "
        f"{sh['reads']} | {sh['peak_rss_gb']:.2f} GB | – |"
    )

    def met(ok: bool) -> str:
        return "met" if ok else "**not met**"

    peak_all = max(
        [peak, sh["peak_rss_gb"]]
        + ([results["race_prediction"]["peak_rss_gb"]] if "race_prediction" in results else [])
    )
    lines += [
        "",
        f"Targets (under {TARGETS['peak_rss_gb']:.0f} GB, under "
        f"{TARGETS['expand_total_s'] / 60:.0f} minutes on 2 cores, each shard read under "
        f"{TARGETS['shard_read_s']:.0f} s): memory {met(peak_all < TARGETS['peak_rss_gb'])} "
        f"({peak_all:.2f} GB), time {met(results['expand_total_s'] < TARGETS['expand_total_s'])} "
        f"({results['expand_total_s']:.0f} s), shard reads "
        f"{met(sh['max_s'] < TARGETS['shard_read_s'])} ({sh['mean_s']:.2f} s mean, "
        f"{sh['max_s']:.2f} s max, the first {sh['first_s']:.2f} s). {footer(results)}",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
