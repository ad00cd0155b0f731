"""Time the whole analysis (every table of paper §4 and Appendices C-D, figures excluded) on a
synthetic response table of N rows for one task and one model (default 5 million), plus the
race-prediction outcomes of the same prompts. Reports wall time and peak RSS per step and
writes them to ``--out`` (default benchmarks/results/analysis.json).

    python benchmarks/analysis.py [--rows 5000000] [--boot 2000] [--keep DIR] [--out FILE]
                                  [--smoke]

``--smoke`` runs every step on 30,000 rows of 200 base prompts with 20 bootstrap replicates
(seconds), so CI notices when a step stops running; its times mean nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import begin_results, default_out, footer, write_results  # noqa: E402

CUES = [("none", None), ("name_rosenman", "Black"), ("name_rosenman", "White"),
        ("name_elder_hayes", "Black"), ("name_elder_hayes", "White"),
        ("name_tzioumis", "Black"), ("name_tzioumis", "White"), ("explicit", "Black"),
        ("explicit", "White"), ("dialog_cad", "Black"), ("dialog_cad", "White"),
        ("dialog_prism", "Black"), ("dialog_prism", "White"),
        ("dialect_aave", "Black")]  # fmt: skip


def make_data(root: Path, rows: int, n_base: int = 5000, seeds: int = 3) -> None:
    rng = np.random.default_rng(0)
    n_prompts = rows // seeds
    per_base = n_prompts // n_base
    base = np.repeat(np.arange(n_base), per_base)
    n_prompts = len(base)
    which = rng.integers(0, len(CUES), n_prompts)
    which[::per_base] = 0  # every base prompt has a no-cue baseline
    cue = np.array([c for c, _ in CUES])[which]
    race = np.array([r or "" for _, r in CUES])[which]
    uid = np.char.add("p", np.arange(n_prompts).astype(str))
    prompts = pl.DataFrame(
        {"prompt_uid": uid, "task": "legal", "base_id": np.char.add("b", base.astype(str)),
         "cue": cue, "cue_type": cue, "cue_source": None, "race": race,
         "gender": np.where(rng.random(n_prompts) < 0.5, "male", "female"),
         "cue_value": None, "text": "x", "fk_grade": rng.normal(8, 2, n_prompts)}
    ).with_columns(pl.col("race").replace("", None))  # fmt: skip
    (root / "prompts").mkdir(parents=True)
    prompts.write_parquet(root / "prompts/legal.parquet")
    rp = prompts.select(
        prompt_uid=pl.lit("r") + pl.col("prompt_uid"), task=pl.lit("race_prediction"),
        base_id="base_id", cue="cue", cue_type="cue_type", cue_source="cue_source",
        race="race", gender="gender", cue_value="cue_value", text="text", fk_grade="fk_grade",
        source_prompt_uid="prompt_uid", source_task="task",
    )  # fmt: skip
    rp.write_parquet(root / "prompts/race_prediction.parquet")
    alpha = rng.random(n_base)
    for s in range(seeds):
        out = root / f"outcomes/m/seed{s}"
        out.mkdir(parents=True)
        p = np.clip(alpha[base] + 0.05 * (race == "Black"), 0, 1)
        ans = (rng.random(n_prompts) < p).astype(float)
        pl.DataFrame(
            {"prompt_uid": uid, "model": "m", "seed": s, "task": "legal",
             "answer": np.where(rng.random(n_prompts) < 0.97, ans, np.nan),
             "parse_error": None, "p_affirmative": p, "answer_mass": 1.0, "answer_label": None}
        ).with_columns(pl.col("answer").fill_nan(None)).write_parquet(
            out / "legal.parquet"
        )  # fmt: skip
        label = np.where(rng.random(n_prompts) < 0.1, "Black",
                         np.where(rng.random(n_prompts) < 0.05, "Unknown", "White"))  # fmt: skip
        pl.DataFrame(
            {"prompt_uid": np.char.add("r", uid), "model": "m", "seed": s,
             "task": "race_prediction", "answer": None, "parse_error": None,
             "p_affirmative": None, "answer_mass": None, "answer_label": label}
        ).write_parquet(out / "race_prediction.parquet")  # fmt: skip


STEP = """
import sys, time, glob, resource
sys.path.insert(0, {src!r})
from cueaudit.probing.analysis import tables as t
root = {root!r}
prompts = sorted(glob.glob(root + "/prompts/*.parquet"))
outcomes = sorted(glob.glob(root + "/outcomes/*/*/*.parquet"))
kinds = {{"legal": "binary", "race_prediction": "race"}}
settings = {{"binary_outcome": "answer", "bootstrap_replicates": {boot}, "ci_level": 0.95,
             "bootstrap_seed": 0}}
out = root + "/tables/{name}.csv"
start = time.perf_counter()
{call}
print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6)
"""
CALLS = {
    "parse_rates": "t.write_parse_rates(prompts, outcomes, kinds, out)",
    "sample_sizes": "t.write_sample_sizes(prompts, outcomes, kinds, settings, out)",
    "validity_race": "t.write_validity(prompts, outcomes, kinds, settings, 'race', "
    "per_model_out=out, averaged_out=out.replace('.csv', '_avg.csv'))",
    "ratios_race": "t.write_outcome_ratios(prompts, outcomes, kinds, settings, 'race', out)",
    "means_race": "t.write_group_means(prompts, outcomes, kinds, settings, 'race', out)",
    "race_prediction": "t.write_race_prediction(prompts, outcomes, kinds, settings, out)",
    "readability": "t.write_readability(prompts, outcomes, kinds, settings, out)",
    "regressions": "t.write_regressions(prompts, outcomes, kinds, settings, out)",
}


#: The README's name of each step.
LABELS = {
    "validity_race": "validity_race (deviations, correlations, Fisher z)",
    "ratios_race": "ratios_race (cluster bootstrap)",
    "means_race": "means_race (cluster bootstrap)",
    "race_prediction": "race_prediction (Table 3)",
    "readability": "readability (Table 4)",
    "regressions": "regressions (Tables 5–7, 3 specs, within transformation + CR1)",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--boot", type=int, default=2000)
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="the JSON (default: results/)")
    parser.add_argument("--smoke", action="store_true", help="30,000 rows, 20 replicates")
    args = parser.parse_args()
    n_base = 5000
    if args.smoke:
        args.rows, args.boot, n_base = 30_000, 20, 200
    results = begin_results(args.smoke)
    results |= {"rows": args.rows, "base_prompts": n_base, "bootstrap_replicates": args.boot}
    print("load:", os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        start_data = time.perf_counter()
        if not (root / "prompts").exists():
            make_data(root, args.rows, n_base=n_base)
        results["data_seconds"] = time.perf_counter() - start_data
        print(f"data: {args.rows:,} rows per table, {results['data_seconds']:.1f} s")
        (root / "tables").mkdir(exist_ok=True)
        total = 0.0
        peak = 0.0
        steps = {}
        print("| step | wall s | peak RSS GB |\n|---|---|---|")
        for name, call in CALLS.items():
            code = STEP.format(src=str(ROOT / "src"), root=str(root), boot=args.boot,
                               name=name, call=call)  # fmt: skip
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True)  # fmt: skip
            wall = time.perf_counter() - t0
            _, rss = res.stdout.split()[-2:]
            total += wall
            peak = max(peak, float(rss))
            steps[name] = {"wall_s": wall, "peak_rss_gb": float(rss)}
            print(f"| {name} | {wall:.1f} | {float(rss):.2f} |", flush=True)
        print(f"| **total** | **{total:.1f}** | **{peak:.2f}** (max) |")
        print("load:", os.getloadavg())
    results |= {"steps": steps, "total_s": total, "peak_rss_gb": peak}
    out = args.out or default_out("analysis", args.smoke)
    write_results(out, results)
    print(f"wrote {out}")


def render_table(results: dict) -> str:
    """The README's table: wall time and peak RSS of each step, then the total."""
    lines = ["| step | wall s | peak RSS GB |", "|---|---:|---:|"]
    for name, step in results["steps"].items():
        lines.append(
            f"| {LABELS.get(name, name)} | {step['wall_s']:.1f} | {step['peak_rss_gb']:.2f} |"
        )
    lines += [
        f"| **total** | **{results['total_s']:.1f}** | **{results['peak_rss_gb']:.2f}** (max) |",
        "",
        f"{results['rows']:,} outcome rows and as many race-prediction rows, "
        f"{results['base_prompts']:,} base prompts, {results['bootstrap_replicates']:,} "
        f"bootstrap replicates; generating the data took {results['data_seconds']:.0f} s "
        f"(not counted). {footer(results)}",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
