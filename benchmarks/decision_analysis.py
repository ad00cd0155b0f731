"""Time and peak memory of the whole decision-audit analysis on a simulated study of the
paper's size (:func:`cueaudit.decision.analysis.simulation_settings.paper_settings`: the design of
``config/decision/paper.yaml``, 40,728 requests over the primary arm and two extensions):
the composition checks, CONTRASTS (of the primary arm, and of each extension arm apart),
INTERACTIONS, LEAVE_ONE_OUT, POSITION, TIES, RECOGNITION,
AGREEMENT and PLANTED (real = the simulated study, simulated = fresh answers to its prompts).

Every step runs in its own process, as the workflow's rules do, on the same simulated study
(seed 0; simulating it is timed apart). The JSON keeps each step's minimum and median wall
time over ``--repeat`` runs and the process's peak RSS (``getrusage``), the commit, the load
average and ``uptime`` before and after; ``--out`` (default
benchmarks/results/decision_analysis.json). The README's table is ``--repeat 3``.

    python benchmarks/decision_analysis.py [--repeat 1] [--out FILE] [--smoke]

``--smoke`` runs every step on the default config's one-domain design with 2 models
(seconds), so CI notices when a step stops running; its times mean nothing. Its JSON goes to
the temp folder unless ``--out`` says otherwise.
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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import begin_results, default_out, footer, write_results  # noqa: E402

STEPS = ("simulate", "composition", "contrasts", "contrasts_extensions", "interactions",
         "placebo", "leave_one_out", "position", "ties", "recognition", "agreement",
         "planted")  # fmt: skip
PREREGISTRATION = ROOT / "config/decision/preregistration.yaml"


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _uptime() -> str:
    if shutil.which("uptime") is None:
        return ""
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def child(step: str, repeat: int, smoke: bool) -> dict[str, Any]:
    import dataclasses

    from cueaudit.decision.analysis import composition, contrasts, instrument, planted, robustness
    from cueaudit.decision.analysis.simulate import build_design, simulate
    from cueaudit.decision.analysis.simulation_settings import (
        SimulationSettings,
        config_settings,
        paper_settings,
        request_counts,
    )
    from cueaudit.decision.preregistration import load_preregistration

    settings = paper_settings(ROOT)
    if not settings.path(settings.fairfund_stimuli or "").is_file():
        # FairFund-Bench's stimuli are not shipped (shared/data beside the checkout): the
        # paper's aid arm, which needs them, is left out
        aid_free = {a: e for a, e in settings.extensions.items() if a != "fairfund_aid"}
        settings = dataclasses.replace(settings, extensions=aid_free, fairfund_stimuli=None)
    if smoke:  # the default config's design, with the paper's extensions
        small = config_settings(ROOT, "config/config.yaml")
        settings = dataclasses.replace(settings, design=small.design, models=("m1", "m2"))
    start = time.perf_counter()
    design = build_design(settings)
    built = time.perf_counter() - start
    frames = simulate(settings, 0, design=design)
    prereg = load_preregistration(PREREGISTRATION)
    table = None
    if step == "position":
        table = contrasts.estimate_contrasts(frames, prereg, pre_registered=False)
    prompts = str(ROOT / "resources/decision/prompts.yaml")
    kinds = planted.answer_kinds(prompts)
    simulated = SimulationSettings(design={"prompts": prompts})

    jobs: dict[str, Callable[[], Any]] = {
        "simulate": lambda: simulate(settings, 0, design=build_design(settings)),
        "composition": lambda: composition.check_analysis_subsamples(frames),
        "contrasts": lambda: contrasts.estimate_contrasts(frames, prereg, pre_registered=False),
        "contrasts_extensions": lambda: [
            contrasts.estimate_contrasts(frames, prereg, pre_registered=False, arm=arm)
            for arm in settings.extensions
        ][-1],
        "interactions": lambda: contrasts.estimate_interactions(frames, prereg),
        "placebo": lambda: contrasts.estimate_placebo(frames, prereg, pre_registered=False),
        "leave_one_out": lambda: robustness.leave_one_out(frames, prereg),
        "position": lambda: instrument.position_effects(frames, table),
        "ties": lambda: instrument.tie_rates(frames),
        "recognition": lambda: instrument.recognition_rates(frames),
        "agreement": lambda: instrument.format_agreement(frames),
        "planted": lambda: planted.planted_disparities(frames, prereg, kinds, simulated=simulated),
    }
    rss_before = _peak_mb()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = jobs[step]()
        times.append(time.perf_counter() - start)
    result: dict[str, Any] = {
        "seconds_min": min(times),
        "seconds_median": statistics.median(times),
        "peak_rss_mb_before": rss_before,
        "peak_rss_mb": _peak_mb(),
        "design_seconds": built,
    }
    if step == "simulate":
        counts = request_counts(settings)
        result |= {
            "requests": counts,
            "requests_total": sum(counts.values()),
            "rows": {
                name: getattr(out, name).height for name in ("judgements", "rankings", "probes")
            },
        }
    else:
        result["table_rows"] = out.height if hasattr(out, "height") else None
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="the JSON (default: results/)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true", help="a one-domain design, seconds")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.repeat, args.smoke)))
        return
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    results: dict[str, Any] = begin_results(args.smoke)
    results |= {
        "repeat": args.repeat,
        "load_average_start": os.getloadavg()[0],
        "uptime_start": _uptime(),
        "cpus": os.cpu_count(),
    }
    for step in STEPS:
        smoke = ["--smoke"] if args.smoke else []
        done = subprocess.run(
            [sys.executable, __file__, "--child", step, "--repeat", str(args.repeat), *smoke],
            capture_output=True,
            text=True,
            env=env,
        )
        if done.returncode != 0:
            results[step] = {"error": done.stderr[-2000:]}
            print(f"{step:>20}  failed: {done.stderr.strip().splitlines()[-1]}")
            continue
        row = results[step] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{step:>20}  {row['seconds_min']:7.3f} s min  {row['seconds_median']:7.3f} s median"
              f"  peak RSS {row['peak_rss_mb']:7.1f} MB")  # fmt: skip
    analysis = [s for s in STEPS if s != "simulate" and "error" not in results[s]]
    results["analysis_seconds_total"] = sum(results[s]["seconds_min"] for s in analysis)
    results["peak_rss_mb_max"] = max(results[s]["peak_rss_mb"] for s in analysis)
    results["load_average_end"] = os.getloadavg()[0]
    results["uptime_end"] = _uptime()
    if "error" not in results["simulate"]:
        print(f"{'requests':>20}  {results['simulate']['requests_total']:,} "
              f"({results['simulate']['requests']})")  # fmt: skip
    print(f"{'total':>20}  {results['analysis_seconds_total']:7.3f} s (analysis steps, min of "
          f"each)  max peak RSS {results['peak_rss_mb_max']:7.1f} MB")  # fmt: skip
    print(f"load: {results['uptime_start']}  ->  {results['uptime_end']}")
    out = args.out or default_out("decision_analysis", args.smoke)
    write_results(out, results)
    print(f"wrote {out}")
    failed = [step for step in STEPS if "error" in results[step]]
    if failed:
        sys.exit(f"failed steps: {', '.join(failed)}")


#: The README's name of each analysis step (their sizes are those of the paper's design).
LABELS = {
    "composition": "composition of every analysed subsample",
    "contrasts": "36 planned contrasts (lmm with Satterthwaite / CR2) + 12 rologit re-estimates",
    "contrasts_extensions": "contrasts of the two extension arms",
    "interactions": "interactions (with the cells' cross-covariance; refits the family)",
    "placebo": "placebo cell (3 domains × 4 modes × 2 estimators)",
    "leave_one_out": "leave-one-name-out and leave-one-profile-out (52 refits × 9 cells)",
    "position": "position effect (bundle-clustered)",
    "ties": "tie rates",
    "recognition": "recognition rates",
    "agreement": "text vs tool agreement",
    "planted": "planted disparities (3 sizes × 9 cells, answers rendered and parsed; and "
    "simulated)",
}
ARMS = {"precision_topup": "top-up", "reasoning_rerun": "reasoning rerun"}
#: Targets on 2 cores: the analysis steps' seconds and the largest peak RSS.
TARGETS = {"seconds": 60.0, "peak_rss_mb": 4096.0}


def render_table(results: dict[str, Any]) -> str:
    """The README's table: every analysis step's fastest run and peak RSS, then the total."""
    lines = ["| step | seconds | peak RSS |", "|---|---:|---:|"]
    for step in STEPS[1:]:
        row = results[step]
        if "error" in row:
            lines.append(f"| {LABELS[step]} | failed | – |")
        else:
            lines.append(
                f"| {LABELS[step]} | {row['seconds_min']:.2f} | {row['peak_rss_mb']:.0f} MB |"
            )
    total, peak = results["analysis_seconds_total"], results["peak_rss_mb_max"]
    lines.append(f"| **total** | **{total:.1f}** | **{peak:.0f} MB** |")
    met = total < TARGETS["seconds"] and peak < TARGETS["peak_rss_mb"]
    sim = results["simulate"]
    repeat = results.get("repeat")
    lines += [
        "",
        f"{sim['requests_total']:,} requests ("
        + ", ".join(f"{n:,} {ARMS.get(k, k)}" for k, n in sim["requests"].items())
        + f"): {sim['rows']['judgements']:,} judgements, {sim['rows']['rankings']:,} candidate "
        f"rows of rankings, {sim['rows']['probes']:,} probe answers. "
        + (f"Fastest of {repeat} runs of each step. " if repeat and repeat > 1 else "")
        + ("One run of each step. " if repeat == 1 else "")
        + f"Simulating the study takes {sim['seconds_min']:.2f} s more. Targets (under "
        f"{TARGETS['seconds']:.0f} s and {TARGETS['peak_rss_mb'] / 1024:.0f} GB on 2 cores): "
        f"{'met' if met else '**not met**'}. {footer(results)}",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
