"""Time and peak memory of the decision audit's estimators at the paper's size: the crossed
random-intercept REML on 40,726 requests (36 profiles, 40 name pairs, ~10,200 bundles), the
rank-ordered logit on 10,000 four-candidate ranking bundles with ties, BH, TOST and MDE.

Every estimator runs in its own process, `--repeat` times on the same data; the JSON keeps
the minimum and median wall time, the process's peak RSS, its RSS before the first fit and
the peak of memory traced by tracemalloc during one fit (numpy's arrays are traced; the Rust
allocations of `mixedlm` are not). With `--compare`, the same mixed-model data also go to the
`mixedlm` package (if installed) and to R lme4 (if `Rscript` and lme4 are), and the JSON
records each one's largest difference from lme4. The README's table is ``--compare``. A job
that fails is kept in the JSON with its error, and the script exits 1.

    python benchmarks/decision_estimators.py [--repeat 3] [--compare] [--out FILE] [--smoke]

``--smoke`` runs every job once at small sizes (2,400 and 1,200 requests, 500 rankings, 10,000
p-values) with ``--compare`` (seconds), so CI notices when an estimator stops running; its
times mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import begin_results, default_out, footer, write_results  # noqa: E402

N_REQUESTS = 40_726
N_RANKINGS = 10_000
N_PVALUES = 1_000_000
N_SMALL = 2400
#: --smoke: requests, rankings, p-values and the small mixed model.
SMOKE_SIZES = (2400, 500, 10_000, 1200)
FIXED = ["intercept", "black", "hispanic", "asian", "quality"]


def lmm_data(n_rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Bundles of four requests: one profile (of 36) under four name pairs, one per race."""
    rng = np.random.default_rng(seed)
    n_bundles = -(-n_rows // 4)
    bundle = np.repeat(np.arange(n_bundles), 4)[:n_rows]
    profile = rng.integers(0, 36, n_bundles)[bundle]
    race = np.tile(np.arange(4), n_bundles)[:n_rows]
    pair = race + 4 * rng.integers(0, 10, n_rows)  # 40 pairs, 10 per race
    x = np.column_stack(
        [np.ones(n_rows), race == 1, race == 2, race == 3, rng.normal(size=n_rows)]
    ).astype(np.float64)
    y = (
        x @ np.array([3.0, 0.047, 0.02, -0.01, 0.3])
        + rng.normal(0, 0.6, 36)[profile]
        + rng.normal(0, 0.1, 40)[pair]
        + rng.normal(0, 0.3, n_bundles)[bundle]
        + rng.normal(0, 0.9, n_rows)
    )
    return y, x, {"profile": profile, "pair": pair, "bundle": bundle}


def rank_data(n_bundles: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Four candidates per bundle; 30% of bundles fully tied (matched cells), adjacent places
    of the others tied with probability 0.2."""
    rng = np.random.default_rng(seed)
    n = 4 * n_bundles
    race = rng.permuted(np.tile(np.arange(4), (n_bundles, 1)), axis=1).ravel()
    first = np.tile([1.0, 0.0, 0.0, 0.0], n_bundles)
    x = np.column_stack([first, race == 1, race == 2, race == 3, rng.normal(size=n)])
    x = x.astype(np.float64)
    utility = (x @ np.array([0.2, -0.05, 0.0, 0.03, 0.5]) + rng.gumbel(size=n)).reshape(-1, 4)
    merged = rng.random((n_bundles, 4)) < 0.2
    merged[:, 0] = False
    merged[rng.random(n_bundles) < 0.3] = [False, True, True, True]
    place_rank = np.maximum.accumulate(np.where(merged, 0, np.arange(1, 5)), axis=1)
    rank = np.empty((n_bundles, 4), dtype=np.int64)
    np.put_along_axis(rank, np.argsort(-utility, axis=1), place_rank, axis=1)
    return x, np.repeat(np.arange(n_bundles), 4), rank.ravel()


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _measure(fit: Callable[[], dict[str, Any]], repeat: int) -> dict[str, Any]:
    rss_before = _rss_mb()
    tracemalloc.start()
    start = time.perf_counter()
    out = fit()
    times = [time.perf_counter() - start]
    traced_peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    for _ in range(repeat - 1):
        start = time.perf_counter()
        fit()
        times.append(time.perf_counter() - start)
    return {
        "seconds_min": min(times),
        "seconds_median": statistics.median(times),
        "seconds_first_traced": times[0],
        "rss_before_mb": rss_before,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "traced_peak_mb": traced_peak,
        **out,
    }


def child(job: str, repeat: int) -> dict[str, Any]:
    kind, _, size = job.partition(":")
    if kind in ("lmm", "mixedlm"):
        y, x, groups = lmm_data(int(size))
        if kind == "lmm":
            from cueaudit.stats.mixed import fit_crossed_lmm

            def fit() -> dict[str, Any]:
                r = fit_crossed_lmm(y, x, groups, FIXED)
                return {
                    "coef": r.coef.tolist(),
                    "se": r.se.tolist(),
                    "vc": r.variance_components,
                    "converged": r.converged,
                    "evaluations": r.n_evaluations,
                }
        else:
            import mixedlm
            import pandas as pd

            frame = pd.DataFrame({"y": y, **dict(zip(FIXED[1:], x[:, 1:].T, strict=True))})
            for k, v in groups.items():
                frame[k] = v.astype(str)
            formula = "y ~ " + " + ".join(FIXED[1:]) + " + (1|profile) + (1|pair) + (1|bundle)"

            def fit() -> dict[str, Any]:
                r = mixedlm.lmer(formula, frame, REML=True)
                vc = {str(g): float(v) for g, v in zip(*_mixedlm_vc(r), strict=True)}
                return {
                    "coef": [float(v) for v in r.fixef().values()],
                    "se": np.sqrt(np.diag(np.asarray(r.vcov()))).tolist(),
                    "vc": vc,
                    "version": mixedlm.__version__,
                }

        return _measure(fit, repeat)
    if kind.startswith("rologit"):
        from cueaudit.stats.rologit import fit_rologit

        ties = kind.split("_")[1]
        x, bundle, rank = rank_data(int(size))

        def fit() -> dict[str, Any]:
            r = fit_rologit(x, bundle, rank, ties)  # type: ignore[arg-type]
            return {
                "coef": r.coef.tolist(),
                "se_cluster": r.se_cluster.tolist(),
                "n_informative": r.n_informative,
                "iterations": r.n_iter,
            }

        return _measure(fit, repeat)
    if kind == "bh_tost_mde":
        from cueaudit.stats.multiplicity import bh_qvalues, mde, tost

        rng = np.random.default_rng(2)
        p = rng.uniform(size=int(size))
        p[:: max(1, len(p) // 10)] = np.nan
        est, se = rng.normal(0, 0.05, 36), rng.uniform(0.01, 0.06, 36)

        def fit() -> dict[str, Any]:
            q = bh_qvalues(p)
            verdicts = [tost(e, s, 0.067).verdict for e, s in zip(est, se, strict=True)]
            return {"valid_p": int(np.isfinite(q).sum()), "mde_mean": float(np.mean(mde(se))),
                    "equivalent": verdicts.count("equivalent")}  # fmt: skip

        return _measure(fit, repeat)
    raise SystemExit(f"unknown job {job}")


def _mixedlm_vc(result: Any) -> tuple[list[str], list[float]]:
    table = result.VarCorr().as_dict()
    names = ["profile", "pair", "bundle"]
    values = [float(table[k]["(Intercept)"]) for k in names]
    return [*names, "residual"], [*values, float(result.sigma) ** 2]


def lme4_reference(n_rows: int) -> dict[str, Any] | None:
    if shutil.which("Rscript") is None:
        return None
    import pandas as pd

    y, x, groups = lmm_data(n_rows)
    with tempfile.TemporaryDirectory() as tmp:
        frame = pd.DataFrame({"y": y, **{f"x_{n}": x[:, j] for j, n in enumerate(FIXED)}})
        for k, v in groups.items():
            frame[f"g_{k}"] = v
        frame.to_csv(f"{tmp}/in.csv", index=False)
        start = time.perf_counter()
        done = subprocess.run(
            ["Rscript", str(ROOT / "tests/r/lmer_reference.R"), f"{tmp}/in.csv", f"{tmp}/out.csv"],
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            return {"error": done.stderr[-500:]}
        table = pd.read_csv(f"{tmp}/out.csv")
    get = {kind: dict(zip(t.name, t.value, strict=True)) for kind, t in table.groupby("kind")}
    return {
        "seconds_with_r_startup_and_csv": seconds,
        "coef": [get["fixef"][f"x_{n}"] for n in FIXED],
        "se": [get["se"][f"x_{n}"] for n in FIXED],
        "vc": {k.removeprefix("g_"): v for k, v in get["vc"].items()},
    }


def _against(fit: dict[str, Any], ref: dict[str, Any]) -> dict[str, float]:
    return {
        "max_abs_coef_diff": float(np.max(np.abs(np.subtract(fit["coef"], ref["coef"])))),
        "max_rel_se_diff": float(np.max(np.abs(np.divide(fit["se"], ref["se"]) - 1))),
        "max_rel_vc_diff": max(abs(fit["vc"][k] / v - 1) for k, v in ref["vc"].items()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare", action="store_true", help="also mixedlm and R lme4")
    parser.add_argument("--out", type=Path, default=None, help="the JSON (default: results/)")
    parser.add_argument("--smoke", action="store_true", help="small sizes, once, --compare")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.repeat)))
        return

    requests, rankings, pvalues, small = N_REQUESTS, N_RANKINGS, N_PVALUES, N_SMALL
    if args.smoke:
        requests, rankings, pvalues, small = SMOKE_SIZES
        args.repeat, args.compare = 1, True
    jobs = [f"lmm:{requests}", f"rologit_exact:{rankings}", f"rologit_breslow:{rankings}",
            f"rologit_efron:{rankings}", f"bh_tost_mde:{pvalues}", f"lmm:{small}"]  # fmt: skip
    have_mixedlm = (
        subprocess.run(
            [sys.executable, "-c", "import mixedlm"], stderr=subprocess.DEVNULL
        ).returncode
        == 0
    )
    if args.compare and have_mixedlm:
        jobs += [f"mixedlm:{small}", f"mixedlm:{requests}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    results: dict[str, Any] = begin_results(args.smoke)
    results["load_average_start"] = os.getloadavg()[0]
    for job in jobs:
        done = subprocess.run(
            [sys.executable, __file__, "--child", job, "--repeat", str(args.repeat)],
            capture_output=True,
            text=True,
            env=env,
        )
        if done.returncode != 0:
            results[job] = {"error": done.stderr[-1000:]}
        else:
            results[job] = json.loads(done.stdout.strip().splitlines()[-1])
        row = results[job]
        if "error" in row:
            print(f"{job:>24}  failed: {(row['error'].splitlines() or [''])[-1]}")
        else:
            print(f"{job:>24}  {row['seconds_min']:7.3f} s min  {row['seconds_median']:7.3f} s "
                  f"median  peak RSS {row['peak_rss_mb']:7.1f} MB  traced "
                  f"{row['traced_peak_mb']:7.1f} MB")  # fmt: skip
    if args.compare:
        for n_rows in (small, requests):
            ref = lme4_reference(n_rows)
            if ref is None or "error" in ref:
                continue
            results[f"lme4:{n_rows}"] = ref
            print(f"{'lme4:' + str(n_rows):>24}  {ref['seconds_with_r_startup_and_csv']:7.3f} s "
                  "(with R start-up and CSV)")  # fmt: skip
            for who in ("lmm", "mixedlm"):
                fit = results.get(f"{who}:{n_rows}")
                if fit and "error" not in fit:
                    fit["vs_lme4"] = _against(fit, ref)
                    print(f"{'':>24}  {who} vs lme4: {fit['vs_lme4']}")
    results["load_average_end"] = os.getloadavg()[0]
    out = args.out or default_out("decision_estimators", args.smoke)
    write_results(out, results)
    print(f"wrote {out}")
    failed = [job for job in jobs if "error" in results[job]]
    if failed:
        sys.exit(f"failed jobs: {', '.join(failed)}")


#: The README's name of each estimator, and the reference the unit tests check it against
#: (tests/unit/test_stats_*.py; the lme4 difference of the mixed model is this run's own).
ESTIMATORS = {
    "lmm": ("crossed-random-intercept REML (`stats.mixed`)", None),
    "mixedlm": ("same, `mixedlm` {version} (not used)", None),
    "rologit_exact": (
        "rank-ordered logit, exact-marginal ties (`stats.rologit`)",
        "tests: brute-force enumeration, loglik 5e-13",
    ),
    "rologit_breslow": (
        "rank-ordered logit, Breslow ties",
        "tests: `PHReg` and R `coxph(cluster=)`, SE ≤ 6e-15 rel",
    ),
    "rologit_efron": (
        "rank-ordered logit, Efron ties",
        "tests: `PHReg` and R `coxph(cluster=)`, SE ≤ 6e-15 rel",
    ),
    "bh_tost_mde": (
        "BH on {size} p-values + 36 TOST + MDE (`stats.multiplicity`)",
        "tests: `multipletests`, `false_discovery_control`, 1e-16",
    ),
}


def _size(kind: str, size: int, row: dict[str, Any]) -> str:
    if kind in ("lmm", "mixedlm"):
        return f"{size:,} rows"
    if kind.startswith("rologit"):
        return f"{size:,} bundles ({row['n_informative']:,} informative)"
    return "–"


def render_table(results: dict[str, Any]) -> str:
    """The README's table: every estimator's fastest fit, its memory and its reference."""
    lines = [
        "| estimator | size | min s | process peak RSS | traced peak during fit | vs reference |",
        "|---|---|---:|---:|---:|---|",
    ]
    for job, row in results.items():
        kind, _, size_text = job.partition(":")
        if kind not in ESTIMATORS or not isinstance(row, dict):
            continue
        size = int(size_text)
        name, reference = ESTIMATORS[kind]
        name = name.format(version=row.get("version", ""), size=f"{size:,}")
        if "error" in row:
            lines.append(f"| {name} | {size:,} | failed | – | – | – |")
            continue
        if "vs_lme4" in row:
            vs = row["vs_lme4"]
            reference = (
                f"lme4: fixed effects {vs['max_abs_coef_diff']:.0e}, SE "
                f"{vs['max_rel_se_diff']:.0e} rel, variance components "
                f"{vs['max_rel_vc_diff']:.0e} rel"
            )
        lines.append(
            f"| {name} | {_size(kind, size, row)} | {row['seconds_min']:.2f} "
            f"| {row['peak_rss_mb']:.0f} MB | {row['traced_peak_mb']:.0f} MB "
            f"| {reference or '–'} |"
        )
    for job, row in results.items():
        if job.startswith("lme4:"):
            lines.append(
                f"| R lme4 (the reference; with R start-up and CSV) | "
                f"{int(job.partition(':')[2]):,} rows "
                f"| {row['seconds_with_r_startup_and_csv']:.2f} | – | – | – |"
            )
    lines += ["", footer(results)]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
