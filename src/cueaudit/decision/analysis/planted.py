"""Planted disparities (PLANTED): before a null is read as "no effect", show that the analysis
finds an effect of known size injected into the same data.

:func:`plant` copies the frames and adds ``effect_sd`` outcome SDs to the focal group's
outcomes in one domain x format cell:

``rate`` / ``decide``
    ``y`` of every judgement of the cell whose race (gender) is the focal level, a shift on
    the linear scale of the lmm (a decision becomes 1 + shift or shift: the linear
    probability model's scale, no longer a 0/1 answer).
``rank``
    ``points`` of every focal candidate of the domain's rankings; ``rank`` and ``tie`` are
    left as they were. Re-ranking the shifted points would turn the shift into whole
    positions gained by some candidates only, whose expected size depends on the
    neighbours' points; shifting points alone keeps the planted value the lmm's estimand.
    The rank-ordered logit reads ranks, so it does not see a plant.

The SD is the outcome SD of the rows the cell's fit analyses
(:func:`cueaudit.decision.analysis.contrasts.cell_rows`): the ``outcome_sd`` of CONTRASTS.
A focal dummy is a column of the cell's fixed-effect design, so adding a constant to the
outcome of exactly the rows where it is 1 moves that coefficient by the constant and leaves
the REML criterion (which sees the outcome only through its residual from the fixed effects)
and hence the variance components unchanged: the lmm's estimate moves by exactly the planted
value.

:func:`planted_disparities` reports, for each cell of the family with the chosen contrast
and each size, ``recovered_sd = (estimate on the planted copy - estimate on the original) /
outcome_sd`` of the original, with the interval ``recovered_sd ± z * se`` from the planted
fit's SE (``z`` for the pre-registration's alpha), and whether it covers the planted size.
So the recovery itself checks the pipeline end to end (the right rows, groups and units; a
mismatch shows as a recovered value off its size), and the interval says what each size is
against the data's noise: a size whose interval covers zero could not be told from no
effect. All cells are planted at once in one copy per size (the cells are separate fits).
It does this for the real frames and, when given, for simulated frames
(:mod:`cueaudit.decision.analysis.simulate`), whose truth is known.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Final

import numpy as np
import polars as pl
from scipy import stats

from cueaudit.decision.analysis.contrasts import (
    cell_rows,
    design_of,
    estimate_contrasts,
    family_cells,
)
from cueaudit.decision.analysis.frames import PRIMARY, AnalysisFrames
from cueaudit.decision.preregistration import PlannedContrast, Preregistration
from cueaudit.errors import InputError

SIZES: Final = (0.05, 0.10, 0.50)
DIMENSION_COLUMNS: Final = {"race": "race", "gender": "gender"}
PLANTED_SCHEMA: Final = {
    "source": pl.String(),
    "domain": pl.String(),
    "format": pl.String(),
    "contrast": pl.String(),
    "planted_sd": pl.Float64(),
    "recovered_sd": pl.Float64(),
    "se_sd": pl.Float64(),
    "ci_low_sd": pl.Float64(),
    "ci_high_sd": pl.Float64(),
    "covered": pl.Boolean(),
    "n_obs": pl.Int64(),
}
#: A contrast estimator: frames and the pre-registration to a CONTRASTS table (its ``lmm``
#: rows with ``domain, format, contrast, estimate, se, outcome_sd, n_obs`` are read).
Estimator = Callable[[AnalysisFrames, Preregistration], pl.DataFrame]


def _planned(prereg: Preregistration, domain: str, fmt: str, contrast: str) -> PlannedContrast:
    for c in prereg.contrasts:
        if (c.domain, c.format, c.contrast) == (domain, fmt, contrast):
            return c
    raise InputError("planted disparities", f"no planned contrast {domain}.{fmt}.{contrast}")


def outcome_sd(frames: AnalysisFrames, domain: str, fmt: str, *, arm: str = PRIMARY) -> float:
    """The SD of the outcome a cell's fit analyses (CONTRASTS' ``outcome_sd``)."""
    y = design_of(cell_rows(frames.arm(arm), domain, fmt), fmt).y
    return float(np.std(y, ddof=1)) if len(y) > 1 else float("nan")


def shift(
    frames: AnalysisFrames,
    spec: PlannedContrast,
    value: float,
    *,
    arm: str = PRIMARY,
) -> AnalysisFrames:
    """A copy of ``frames`` with ``value`` (natural units) added to the outcome of the focal
    rows of ``spec``'s domain and format in ``arm`` (see the module docstring)."""
    if spec.dimension not in DIMENSION_COLUMNS:
        raise InputError("planted disparities", f"unknown dimension {spec.dimension!r}")
    focal = (
        (pl.col("arm") == arm)
        & (pl.col("domain") == spec.domain)
        & (pl.col(DIMENSION_COLUMNS[spec.dimension]) == spec.focal)
    )
    if spec.format in ("rate", "decide"):
        hit = focal & (pl.col("format") == spec.format)
        judgements = frames.judgements.with_columns(
            pl.when(hit).then(pl.col("y") + value).otherwise(pl.col("y")).alias("y")
        )
        return AnalysisFrames(judgements, frames.rankings, frames.probes)
    if spec.format != "rank":
        raise InputError("planted disparities", f"unknown format {spec.format!r}", "format")
    rankings = frames.rankings.with_columns(
        pl.when(focal).then(pl.col("points") + value).otherwise(pl.col("points")).alias("points")
    )
    return AnalysisFrames(frames.judgements, rankings, frames.probes)


def plant(
    frames: AnalysisFrames,
    *,
    domain: str,
    format: str,
    contrast: str,
    effect_sd: float,
    prereg: Preregistration,
    arm: str = PRIMARY,
) -> AnalysisFrames:
    """A copy of ``frames`` with ``effect_sd`` outcome SDs added to the focal group of one
    planned contrast (``"hiring", "rate", "black_vs_white"``); see the module docstring."""
    spec = _planned(prereg, domain, format, contrast)
    sd = outcome_sd(frames, domain, format, arm=arm)
    if not np.isfinite(sd):
        raise InputError("planted disparities", f"no outcome SD in {domain}.{format}", "frames")
    return shift(frames, spec, effect_sd * sd, arm=arm)


def default_estimator() -> Estimator:
    """The CONTRASTS table of :func:`estimate_contrasts` (labels do not matter here)."""
    return partial(estimate_contrasts, pre_registered=False)


def _lmm(table: pl.DataFrame, contrast: str) -> dict[tuple[str, str], dict[str, object]]:
    rows = table.filter((pl.col("estimator") == "lmm") & (pl.col("contrast") == contrast))
    return {(r["domain"], r["format"]): r for r in rows.iter_rows(named=True)}


def _source_rows(
    source: str,
    frames: AnalysisFrames,
    prereg: Preregistration,
    sizes: Sequence[float],
    specs: Sequence[PlannedContrast],
    estimate: Estimator,
) -> list[dict[str, object]]:
    z = float(stats.norm.ppf(1 - prereg.alpha / 2))
    base = _lmm(estimate(frames, prereg), specs[0].contrast) if specs else {}
    records = []
    for size in sizes:
        planted = frames
        for spec in specs:
            sd = _finite(base.get((spec.domain, spec.format), {}).get("outcome_sd"))
            if np.isfinite(sd) and sd > 0:
                planted = shift(planted, spec, size * sd)
        fits = _lmm(estimate(planted, prereg), specs[0].contrast) if specs else {}
        for spec in specs:
            before = base.get((spec.domain, spec.format), {})
            after = fits.get((spec.domain, spec.format), {})
            sd = _finite(before.get("outcome_sd"))
            if not (np.isfinite(sd) and sd > 0):
                sd = float("nan")
            recovered = (_finite(after.get("estimate")) - _finite(before.get("estimate"))) / sd
            se = _finite(after.get("se")) / sd
            low, high = recovered - z * se, recovered + z * se
            ok = bool(np.isfinite(recovered) and np.isfinite(se))
            records.append(
                {
                    "source": source,
                    "domain": spec.domain,
                    "format": spec.format,
                    "contrast": spec.contrast,
                    "planted_sd": float(size),
                    "recovered_sd": recovered,
                    "se_sd": se,
                    "ci_low_sd": low,
                    "ci_high_sd": high,
                    "covered": bool(low <= size <= high) if ok else None,
                    "n_obs": after.get("n_obs"),
                }
            )
    return records


def _finite(value: object) -> float:
    return float("nan") if value is None else float(value)  # type: ignore[arg-type]


def planted_disparities(
    frames: AnalysisFrames,
    prereg: Preregistration,
    *,
    sizes: Sequence[float] = SIZES,
    contrast: str = "black_vs_white",
    simulated: AnalysisFrames | None = None,
    estimate: Estimator | None = None,
) -> pl.DataFrame:
    """The PLANTED table: each cell of the family with ``contrast``, each size (in SD), for
    the real frames (``source`` "real") and the simulated ones ("simulated", when given);
    ``estimate`` defaults to :func:`default_estimator`. See the module docstring."""
    estimate = default_estimator() if estimate is None else estimate
    specs = [c for cell in family_cells(prereg).values() for c in cell if c.contrast == contrast]
    if not specs:
        raise InputError("planted disparities", f"no planned contrast {contrast!r}", "contrast")
    records = _source_rows("real", frames, prereg, sizes, specs, estimate)
    if simulated is not None:
        records += _source_rows("simulated", simulated, prereg, sizes, specs, estimate)
    return pl.DataFrame(records, schema=dict(PLANTED_SCHEMA))
