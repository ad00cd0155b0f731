"""Calibration of the decision audit's inference at the paper's design: rejection rates under
the null, interval coverage and mean estimates under planted effects, per estimator and format.

Every study is the design of ``config/decision/paper.yaml`` (three domains, 12 profiles and 40
name pairs per domain, five models, the precision top-up and the reasoning rerun), answered by
the simulator (:mod:`cueaudit.decision.analysis.simulate`) with random profile, name-pair and
model effects and model x name-pair interactions (``model_pair_sd``), the paper's first-listed
gain and full ties in matched bundles, then analysed exactly as the workflow analyses real
answers (:func:`cueaudit.decision.analysis.contrasts.fit_family` and the CONTRASTS,
INTERACTIONS and PLACEBO tables of the primary arm).

- **Null studies**: no demographic effect. Per estimator and format, the share of the planned
  contrasts that reject at alpha = .05 (its target: .05); the family-wise rate of the BH-
  corrected family (any of the 36 in-family q-values below .05); the same for the twelve
  Rate-Rank interactions and for the placebo cell's pseudo-race contrasts.
- **Planted studies**: Black vs White effects in every domain, in the data-generating process:
  +0.09 rating points, +0.05 probability, +0.20 rank positions (where race varies, the
  disguised bundles). Per estimator and format: coverage of the 95% intervals of every planted
  contrast against its truth (the planted size, or zero), the mean estimate and the empirical
  SD against the mean SE of the planted ones; the Rate-Rank interactions' coverage; the
  precision top-up's hiring rank estimate (analysed with the primary rows).

Studies run in two worker processes (``--workers``), each seeded by its index. Writes JSON
and a Markdown table to ``--out`` (``.json`` / ``.md``; default
benchmarks/results/decision_calibration.json), with the commit, the wall time and the load
average before and after.

    python benchmarks/decision_calibration.py [--null 200] [--planted 200] [--out FILE]
                                              [--smoke]

``--smoke`` runs 4 + 4 studies of the default config's small design (seconds), so CI notices
when it stops running; its rates mean nothing. Its files go to the temp folder unless
``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from common import begin_results, default_out, footer, write_with_table  # noqa: E402

from cueaudit.decision.analysis import contrasts  # noqa: E402
from cueaudit.decision.analysis.fitters import FAMILY_ESTIMATOR  # noqa: E402
from cueaudit.decision.analysis.inputs import pooled_with_primary  # noqa: E402
from cueaudit.decision.analysis.simulate import (  # noqa: E402
    build_design,
    rank_lapse_needed,
    simulate,
)
from cueaudit.decision.analysis.simulation_settings import (  # noqa: E402
    SimulationSettings,
    config_settings,
    paper_settings,
)
from cueaudit.decision.preregistration import load_preregistration  # noqa: E402

PREREGISTRATION = ROOT / "config/decision/preregistration.yaml"
ALPHA = 0.05
#: Planted Black vs White effects in natural units, in every domain.
PLANTED = {"rate": 0.09, "decide": 0.05, "rank": 0.20}
#: The random effects of every study (SDs on the latent quality scale); the judgement scales
#: are lowered so that every expected answer stays in its range with the planted effects.
GENERATIVE = {
    "model_pair_sd": 0.10,
    "rate_scale": 0.90,
    "decide_scale": 0.21,
}
#: The smoke size: the default config's small design (one model, hiring only).
SMOKE_CONFIG = "config/config.yaml"
_STATE: dict[str, Any] = {}


def _settings(kind: str, smoke: bool) -> SimulationSettings:
    planted = {}
    if kind == "planted":
        domains = ("hiring",) if smoke else ("hiring", "lending", "triage")
        planted = {(d, f, "black_vs_white"): v for d in domains for f, v in PLANTED.items()}
    if smoke:
        return config_settings(ROOT, SMOKE_CONFIG, planted=planted, **GENERATIVE)
    return paper_settings(ROOT, planted=planted, **GENERATIVE)


def _init(kind: str, smoke: bool) -> None:
    """A worker's settings, design and pre-registration (built after the fork: polars' threads
    do not survive one); the lapse rate is raised where the planted rank effect needs it
    (partly tied bundles double the effect among the untied answers)."""
    settings = _settings(kind, smoke)
    design = build_design(settings)
    needed = max(rank_lapse_needed(settings, arm.rankings) for arm in design.arms)
    settings = replace(settings, rank_lapse=max(settings.rank_lapse, needed))
    _STATE.update(
        kind=kind,
        settings=settings,
        design=design,
        prereg=load_preregistration(PREREGISTRATION),
    )


def _truth(row: dict[str, Any]) -> float:
    if _STATE["kind"] != "planted" or row["contrast"] != "black_vs_white":
        return 0.0
    planted = _STATE["settings"].planted
    return float(planted.get((row["domain"], row["format"], "black_vs_white"), 0.0))


def _study(seed: int) -> dict[str, Any]:
    settings, prereg = _STATE["settings"], _STATE["prereg"]
    frames = simulate(settings, seed, design=_STATE["design"])
    fits = contrasts.fit_family(frames, prereg)
    table = contrasts.estimate_contrasts(frames, prereg, pre_registered=False, fits=fits)
    rows = []
    for r in table.iter_rows(named=True):
        rows.append(
            {
                k: r[k]
                for k in (
                    *("domain", "format", "contrast", "estimator", "estimate", "se"),
                    *("ci_low", "ci_high", "p_value", "q_value", "in_family", "outcome_sd"),
                )
            }
            | {"truth": _truth(r)}
        )
    inter = contrasts.estimate_interactions(frames, prereg, fits=fits)
    inter = inter.filter(pl.col("formats") == "rate-rank")
    family = [r for r in rows if r["estimator"] == FAMILY_ESTIMATOR]
    sds = {(r["domain"], r["format"]): r["outcome_sd"] for r in family}
    interactions = []
    for r in inter.iter_rows(named=True):
        truth = 0.0
        if _STATE["kind"] == "planted" and r["contrast"] == "black_vs_white":
            key = r["domain"], "black_vs_white"
            truth = _planted_sd(key, "rate", sds) - _planted_sd(key, "rank", sds)
        interactions.append(
            {k: r[k] for k in ("domain", "contrast", "estimate_sd", "ci_low_sd", "ci_high_sd")}
            | {"p_value": r["p_value"], "q_value": r["q_value"], "truth": truth}
        )
    placebo = contrasts.estimate_placebo(frames, prereg, pre_registered=False)
    placebo = placebo.filter(pl.col("mode") == "all")
    topup = None
    if "precision_topup" in settings.extensions:
        pooled = pooled_with_primary(frames, "precision_topup").arm("precision_topup")
        fit = contrasts.fit_cell(pooled, "hiring", "rank")
        topup = fit.estimates["black_vs_white"].estimate
    return {
        "seed": seed,
        "contrasts": rows,
        "interactions": interactions,
        "placebo": placebo.select("estimator", "rejects").rows(),
        "topup": topup,
    }


def _planted_sd(key: tuple[str, str], fmt: str, sds: dict[tuple[str, str], float]) -> float:
    value = _STATE["settings"].planted.get((key[0], fmt, key[1]), 0.0)
    sd = sds.get((key[0], fmt))
    return float(value) / float(sd) if sd else 0.0


def _summary(studies: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    cells: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for study in studies:
        for r in study["contrasts"]:
            cells[f"{r['format']}/{r['estimator']}"].append(r)
    out: dict[str, Any] = {"studies": len(studies), "cells": {}}
    for name, rows in sorted(cells.items()):
        ok = [r for r in rows if r["p_value"] is not None and np.isfinite(r["p_value"])]
        null = [r for r in ok if r["truth"] == 0.0]
        planted = [r for r in ok if r["truth"] != 0.0]
        covered = [r["ci_low"] <= r["truth"] <= r["ci_high"] for r in ok]
        entry: dict[str, Any] = {
            "tests": len(ok),
            "null_tests": len(null),
            "rejection_rate": float(np.mean([r["p_value"] < ALPHA for r in null]))
            if null
            else None,
            "coverage": float(np.mean(covered)) if ok else None,
        }
        if planted:
            estimates = np.array([r["estimate"] for r in planted])
            entry |= {
                "planted": float(planted[0]["truth"]),
                "mean_estimate": float(estimates.mean()),
                "relative_bias": float(estimates.mean() / planted[0]["truth"] - 1),
                "empirical_sd": float(estimates.std(ddof=1)) if len(estimates) > 1 else None,
                "mean_se": float(np.mean([r["se"] for r in planted])),
                "planted_coverage": float(
                    np.mean([r["ci_low"] <= r["truth"] <= r["ci_high"] for r in planted])
                ),
            }
        out["cells"][name] = entry
    by_contrast: dict[str, list[bool]] = defaultdict(list)
    for study in studies:
        for r in study["contrasts"]:
            if r["truth"] == 0.0 and r["p_value"] is not None and np.isfinite(r["p_value"]):
                key = f"{r['domain']}.{r['format']}.{r['contrast']}/{r['estimator']}"
                by_contrast[key].append(r["p_value"] < ALPHA)
    out["rejection_by_contrast"] = {k: float(np.mean(v)) for k, v in sorted(by_contrast.items())}
    family = [
        any(
            r["q_value"] is not None and r["q_value"] < ALPHA
            for r in s["contrasts"]
            if r["in_family"]
        )
        for s in studies
    ]
    inter = [r for s in studies for r in s["interactions"] if np.isfinite(r["p_value"])]
    out["interactions"] = {
        "tests": len(inter),
        "rejection_rate_null": _rate([r["p_value"] < ALPHA for r in inter if r["truth"] == 0]),
        "coverage": _rate([r["ci_low_sd"] <= r["truth"] <= r["ci_high_sd"] for r in inter]),
        "family_wise_rate": _rate(
            [
                any(r["q_value"] is not None and r["q_value"] < ALPHA for r in s["interactions"])
                for s in studies
            ]
        ),
    }
    placebo = [rej for s in studies for est, rej in s["placebo"] if rej is not None]
    out["placebo_rejection_rate"] = _rate(placebo)
    out["placebo_tests"] = len(placebo)
    if kind == "null":
        out["family_wise_rate"] = _rate(family)
    topups = [s["topup"] for s in studies if s["topup"] is not None]
    if topups:
        out["topup_mean_estimate"] = float(np.mean(topups))
        out["topup_sd"] = float(np.std(topups, ddof=1)) if len(topups) > 1 else None
    return out


def _rate(values: list[bool]) -> float | None:
    return float(np.mean(values)) if values else None


def _run(kind: str, n: int, workers: int, smoke: bool) -> dict[str, Any]:
    _settings(kind, smoke)  # a bad setting fails here, not in every worker over and over
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(
        workers, initializer=_init, initargs=(kind, smoke)
    ) as pool:
        studies = pool.map(_study, range(n), chunksize=1)
    summary = _summary(studies, kind)
    summary["seconds"] = time.perf_counter() - start
    return summary


def _fmt(value: Any, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--null", type=int, default=200)
    parser.add_argument("--planted", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="4 + 4 studies of a small design")
    parser.add_argument("--out", type=Path, default=None, help="the JSON (default: results/)")
    args = parser.parse_args()
    if args.smoke:
        args.null = args.planted = 4
    results: dict[str, Any] = begin_results(args.smoke)
    results |= {
        "workers": args.workers,
        "load_average_start": os.getloadavg()[0],
        "generative": GENERATIVE,
        "planted_effects": PLANTED,
    }
    results["null"] = _run("null", args.null, args.workers, args.smoke)
    results["planted"] = _run("planted", args.planted, args.workers, args.smoke)
    results["load_average_end"] = os.getloadavg()[0]
    out = args.out or default_out("decision_calibration", args.smoke)
    write_with_table(out, results, render_table)


#: The README's name of each cell (format / estimator, with its inference).
CELLS = {
    "decide/lmm": "decide / lmm (Satterthwaite t)",
    "rank/lmm": "rank / lmm (CR2 by bundle)",
    "rank/rologit": "rank / rologit (CR1 by bundle)",
    "rate/lmm": "rate / lmm (Satterthwaite t)",
}


def render_table(results: dict[str, Any]) -> str:
    """The README's table: per cell, null rejection and coverage, planted bias, SD, SE and
    coverage; then the family-wise, interaction, placebo and top-up rates."""
    n, p = results["null"], results["planted"]
    lines = [
        "| format / estimator | null rejection (alpha .05) | coverage, null | planted | mean "
        "estimate | empirical SD | mean SE | coverage, planted |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, null in n["cells"].items():
        planted = p["cells"].get(name, {})
        cells = [
            CELLS.get(name, name),
            _fmt(null.get("rejection_rate")),
            _fmt(null.get("coverage")),
            _fmt(planted.get("planted")),
            _fmt(planted.get("mean_estimate"), 4),
            _fmt(planted.get("empirical_sd"), 4),
            _fmt(planted.get("mean_se"), 4),
            _fmt(planted.get("planted_coverage")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    inter_n, inter_p = n["interactions"], p["interactions"]
    lines += [
        "",
        f"- Family-wise rate of the BH-corrected family under the null: "
        f"{_fmt(n.get('family_wise_rate'))}.",
        f"- Rate–Rank interactions (SE with the covariance through shared name pairs): "
        f"null rejection {_fmt(inter_n['rejection_rate_null'])}, coverage "
        f"{_fmt(inter_n['coverage'])} (null) and {_fmt(inter_p['coverage'])} (planted); BH "
        f"family-wise rate {_fmt(inter_n['family_wise_rate'])}.",
        f"- Placebo cell, pseudo-race contrasts (both estimators, {n['placebo_tests']:,} tests "
        f"in the null studies): rejection {_fmt(n['placebo_rejection_rate'])} "
        f"({_fmt(p['placebo_rejection_rate'])} in the planted studies).",
    ]
    if "topup_mean_estimate" in p:
        lines.append(
            "- Precision top-up (pooled with the primary rows), hiring rank: mean "
            f"{_fmt(p['topup_mean_estimate'], 4)} for {PLANTED['rank']:.2f} (SD "
            f"{_fmt(p.get('topup_sd'), 3)})."
        )
    workers = results.get("workers")
    lines += [
        "",
        f"{n['studies']} null and {p['studies']} planted studies"
        + (f", {workers} workers" if workers else "")
        + f", {n['seconds']:.0f} s (null) and {p['seconds']:.0f} s (planted). {footer(results)}",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
