"""Calibration of the INTERACTIONS table (format x group): does the SE of the difference of two
formats' SD-unit contrasts match the spread of that difference over simulated studies?

Every study is one domain (hiring) at the paper's granularity (12 profiles x 40 name pairs,
five models, 48 disguised bundles; Rate and Decide as text, Rank as JSON), answered by the
simulator (:mod:`cueaudit.decision.analysis.simulate`) without any planted effect, and
analysed by the workflow's own code (:func:`cueaudit.decision.analysis.contrasts.fit_family`
and :func:`~cueaudit.decision.analysis.contrasts.estimate_interactions`). Two regimes:

- **calibration**: the random effects of benchmarks/decision_calibration.py (name-pair SD
  0.04, model x name-pair SD 0.10): the formats' contrasts correlate weakly (about 0.1);
- **shared names**: name-pair SD 0.20, so the names move every format's contrasts together
  (correlations 0.2-0.5): the covariance term matters.

Per pair of formats (Rate-Decide, Rate-Rank, Decide-Rank) and contrast: the empirical SD of
the interaction estimate against the root mean square of its SE (the ratio with a 95%
bootstrap interval over studies), the empirical correlation of the two contrasts against the
mean estimated one, how often the estimated correlation was clipped at +-1, and the null
rejection rate at alpha = .05 (target .05). Studies run in ``--workers`` processes, each
seeded by its index. Writes JSON and a Markdown table to ``--out`` (default
benchmarks/results/interaction_calibration.json).

    python benchmarks/interaction_calibration.py [--studies 400] [--workers 2] [--out FILE]
                                                 [--smoke]

``--smoke`` runs 4 studies of each regime (seconds), so CI notices when it stops running;
its rates mean nothing. Its files go to the temp folder unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
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
from cueaudit.decision.analysis.simulate import build_design, simulate  # noqa: E402
from cueaudit.decision.analysis.simulation_settings import SimulationSettings  # noqa: E402
from cueaudit.decision.preregistration import load_preregistration  # noqa: E402

PREREGISTRATION = ROOT / "config/decision/preregistration.yaml"
ALPHA = 0.05
DOMAIN = "hiring"
DESIGN = {
    "domains": [DOMAIN],
    "paraphrases": 1,
    "profiles_per_tier": 4,
    "names_per_cell": 5,
    "bundles_per_type": {"disguised_demographic": 48},
    "probe_bundles": 0,
    "tasks": ["decision_rate_text", "decision_decide_text", "decision_rank_json"],
}
#: The smoke size: one profile per tier and one name pair per race x gender.
SMOKE_DESIGN = DESIGN | {"profiles_per_tier": 1, "names_per_cell": 1}
#: Each regime's generative settings (SDs on the latent quality scale); the judgement scales
#: keep every expected answer in its range.
REGIMES: dict[str, dict[str, float]] = {
    "calibration": {"model_pair_sd": 0.10, "rate_scale": 0.90, "decide_scale": 0.21},
    "shared names": {
        "pair_sd": 0.20,
        "model_pair_sd": 0.10,
        "rate_scale": 0.80,
        "decide_scale": 0.21,
    },
}
BOOTSTRAP = 2000
_STATE: dict[str, Any] = {}


def _settings(regime: str, smoke: bool) -> SimulationSettings:
    design = SMOKE_DESIGN if smoke else DESIGN
    return SimulationSettings(design=design, root=str(ROOT), **REGIMES[regime])  # type: ignore[arg-type]


def _init(regime: str, smoke: bool) -> None:
    settings = _settings(regime, smoke)
    _STATE.update(
        settings=settings,
        design=build_design(settings),
        prereg=load_preregistration(PREREGISTRATION),
    )


def _study(seed: int) -> list[dict[str, Any]]:
    """One study's interaction rows of the domain, with both formats' SD-unit contrasts."""
    prereg = _STATE["prereg"]
    frames = simulate(_STATE["settings"], seed, design=_STATE["design"])
    fits = contrasts.fit_family(frames, prereg)
    table = contrasts.estimate_interactions(frames, prereg, fits=fits)
    rows = []
    for r in table.filter(pl.col("domain") == DOMAIN).iter_rows(named=True):
        fa, fb = r["formats"].split("-")
        sd = {}
        for fmt in (fa, fb):
            fit = fits[(DOMAIN, fmt, FAMILY_ESTIMATOR)]
            sd[fmt] = fit.estimates[r["contrast"]].estimate / fit.outcome_sd
        rows.append(
            {
                "seed": seed,
                "contrast": r["contrast"],
                "formats": r["formats"],
                "a": sd[fa],
                "b": sd[fb],
                **{k: r[k] for k in ("estimate_sd", "se_sd", "se_sd_independent")},
                **{k: r[k] for k in ("correlation", "df", "p_value")},
            }
        )
    return rows


def _ratio(diff: np.ndarray, se: np.ndarray) -> float:
    """The root mean square SE over the empirical SD (NaN when the SD is zero)."""
    sd = np.std(diff, ddof=1) if len(diff) > 1 else 0.0
    return float(np.sqrt(np.mean(se**2)) / sd) if sd > 0 else np.nan


def _summary(rows: list[dict[str, Any]], seeds: int) -> dict[str, Any]:
    """Per formats (all contrasts) and per formats x contrast: SE/SD with its bootstrap
    interval over studies, correlations, clipping and null rejection."""
    table = pl.DataFrame(rows).filter(pl.col("se_sd").is_not_nan())
    rng = np.random.default_rng(0)
    draws = rng.integers(0, seeds, (BOOTSTRAP, seeds))
    out: dict[str, Any] = {}
    for (formats,), part in table.group_by(["formats"], maintain_order=True):
        by_contrast = {}
        ratios = np.zeros(BOOTSTRAP)
        names = part["contrast"].unique(maintain_order=True).to_list()
        for contrast in names:
            cell = part.filter(pl.col("contrast") == contrast).sort("seed")
            diff, se = cell["estimate_sd"].to_numpy(), cell["se_sd"].to_numpy()
            a, b = cell["a"].to_numpy(), cell["b"].to_numpy()
            independent = cell["se_sd_independent"].to_numpy()
            by_seed = np.full((2, seeds), np.nan)
            by_seed[:, cell["seed"].to_numpy()] = diff, se
            boot = []
            for d in draws:
                x, s = by_seed[:, d]
                ok = ~np.isnan(x)
                boot.append(_ratio(x[ok], s[ok]))
            ratios += np.asarray(boot) / len(names)
            by_contrast[contrast] = {
                "studies": len(cell),
                "empirical_sd": float(np.std(diff, ddof=1)),
                "rms_se": float(np.sqrt(np.mean(se**2))),
                "rms_se_independent": float(np.sqrt(np.mean(independent**2))),
                "se_to_sd": _ratio(diff, se),
                "se_to_sd_95": [float(q) for q in np.nanquantile(boot, [0.025, 0.975])],
                "empirical_correlation": float(np.corrcoef(a, b)[0, 1]),
                "mean_correlation": float(cell["correlation"].mean()),  # type: ignore[arg-type]
                "clipped": float((cell["correlation"].abs() >= 1 - 1e-9).mean()),
                "rejection_rate": float((cell["p_value"] < ALPHA).mean()),
            }
        values = list(by_contrast.values())
        rejections = part["p_value"].to_numpy() < ALPHA
        out[formats] = {
            "se_to_sd": float(np.mean([v["se_to_sd"] for v in values])),
            "se_to_sd_95": [float(q) for q in np.nanquantile(ratios, [0.025, 0.975])],
            "empirical_correlation": float(np.mean([v["empirical_correlation"] for v in values])),
            "mean_correlation": float(np.mean([v["mean_correlation"] for v in values])),
            "clipped": float(np.mean([v["clipped"] for v in values])),
            "rejection_rate": float(rejections.mean()),
            "tests": len(rejections),
            "contrasts": by_contrast,
        }
    return out


def _run(regime: str, n: int, workers: int, smoke: bool) -> dict[str, Any]:
    _settings(regime, smoke)  # a bad setting fails here, not in every worker
    start = time.perf_counter()
    if workers == 1:
        _init(regime, smoke)
        studies = [_study(seed) for seed in range(n)]
    else:  # spawned: a forked child can inherit a lock held by one of polars' threads
        with multiprocessing.get_context("spawn").Pool(
            workers, initializer=_init, initargs=(regime, smoke)
        ) as pool:
            studies = pool.map(_study, range(n), chunksize=4)
    summary = {
        "studies": n,
        "generative": REGIMES[regime],
        "formats": _summary([r for s in studies for r in s], n),
        "seconds": time.perf_counter() - start,
    }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=400, help="per regime")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="4 studies of a small design")
    parser.add_argument("--out", type=Path, default=None, help="the JSON (default: results/)")
    args = parser.parse_args()
    if args.smoke:
        args.studies = 4
    results: dict[str, Any] = begin_results(args.smoke) | {"workers": args.workers}
    results["regimes"] = {
        regime: _run(regime, args.studies, args.workers, args.smoke) for regime in REGIMES
    }
    out = args.out or default_out("interaction_calibration", args.smoke)
    write_with_table(out, results, render_table)


def _interval(values: list[float]) -> str:
    return f"[{values[0]:.2f}, {values[1]:.2f}]"


def render_table(results: dict[str, Any]) -> str:
    """The README's table: per regime and pair of formats (the four contrasts pooled), SE/SD
    with its bootstrap interval, empirical and estimated correlation, clipping and null
    rejection."""
    lines = [
        "| regime | formats | SE / empirical SD (95% interval) | correlation: empirical | "
        "estimated | clipped at ±1 | null rejection (alpha .05) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    seconds = 0.0
    for regime, run in results["regimes"].items():
        seconds += run["seconds"]
        for formats, row in run["formats"].items():
            lines.append(
                f"| {regime} | {formats} | {row['se_to_sd']:.3f} "
                f"{_interval(row['se_to_sd_95'])} | {row['empirical_correlation']:.3f} | "
                f"{row['mean_correlation']:.3f} | {row['clipped']:.3f} | "
                f"{row['rejection_rate']:.3f} ({row['tests']:,} tests) |"
            )
    studies = ", ".join(f"{run['studies']} {r}" for r, run in results["regimes"].items())
    lines += [
        "",
        f"Studies: {studies}; {results.get('workers')} workers, {seconds:.0f} s. "
        + footer(results),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
