"""Cues beyond names (``decision.design.cues``, :mod:`cueaudit.decision.cue_signals`): the planned
contrasts per cue type, and the convergent validity of the cue types. Exploratory: the
pre-registered family is on name pairs, and other cue types run in extension arms.

:func:`cue_contrasts` (``decision_cue_contrasts``)
    for every arm that shows a cue type beyond name pairs, each cue type's rows alone
    (:meth:`AnalysisFrames.arm` with the cue: cue types are never pooled), every planned
    contrast the cue type can express (its races and genders,
    :data:`cueaudit.decision.cue_signals.CUE_RACES`; the pre-registration's contrasts of the domain
    x format, or the family's four where it plans none, as in the aid domain), fitted by each of
    the family's estimators (:func:`~cueaudit.decision.analysis.fitters.fit_design` on the
    cell's design, the rank contrasts from the disguised bundles). Each cell carries the
    composition check of that cue type's subsample
    (:func:`~cueaudit.decision.analysis.composition.check_with_flags`: race and gender against
    profile, tier and position in the rows the fit uses, pooled and per model x mode).
:func:`cue_validity` (``decision_cue_validity``)
    the probing study's convergent validity (Tonneau et al. §4.1) applied to decisions: do
    different cues for the same group produce the same disparities? Per model and profile,
    the focal group's mean outcome minus the reference's (for black_vs_white: the Black minus
    the White mean over every name, mode, paraphrase and seed of the profile; in Rank, the
    profile's points as the focal candidate minus as the reference candidate, over the
    disguised bundles, which every four-race cue type shows with the same bundle ids) under
    each cue type; then the Pearson correlation of these deviations across profiles for every
    pair of cue types that can both express the contrast, with its Fisher-z
    interval (:func:`cueaudit.stats.correlation.pairwise_pearson`, :func:`fisher_ci`), per
    model and averaged over the models on the Fisher-z scale with equal weights (as the
    probing study averages, :func:`cueaudit.stats.correlation.fisher_z_mean`). The averaged
    row's interval is Fisher's for one correlation over the fewest units a model shares: the
    models answer the same units, so their correlations are not independent samples and an
    interval that treated them so would be too narrow.

    The unit is the profile in Rank too, not the bundle: a bundle's focal and reference
    candidates show different profiles, so a per-bundle deviation holds their difference in
    quality, the same under every cue type, and correlates the cue types whatever disparities
    they carry (:func:`deviations` with ``unit="bundle"`` shows it: on the simulator, with no
    disparity planted, the per-bundle correlation is clearly positive). Per profile, the
    focal and reference appearances of one profile are compared, as Rate compares them.

The probing study's own validity tables (``validity_race_averaged``, the deviations of
advice answers from the no-cue baseline) stand beside this one in the database and the report;
the two studies share the estimators (:mod:`cueaudit.stats.correlation`), never each other's
code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Final

import numpy as np
import polars as pl

from cueaudit.decision.analysis.composition import ALPHA, check_with_flags
from cueaudit.decision.analysis.contrasts import (
    CONTRASTS_SCHEMA,
    exploratory_reason,
    family_cells,
)
from cueaudit.decision.analysis.design_matrix import (
    RANK_BUNDLE_TYPES,
    ContrastSpec,
    cell_rows,
    default_contrasts,
    design_of,
)
from cueaudit.decision.analysis.fitters import estimators_for, fit_design
from cueaudit.decision.analysis.frames import PRIMARY, AnalysisFrames
from cueaudit.decision.analysis.verdicts import estimate_fields
from cueaudit.decision.composition_checks import CompositionError
from cueaudit.decision.cue_signals import CUE_GENDERS, CUE_RACES, NAME_PAIR
from cueaudit.decision.preregistration import Preregistration
from cueaudit.stats.correlation import OK, TOO_FEW, fisher_ci, fisher_z_mean, pairwise_pearson

FORMATS: Final = ("rate", "decide", "rank")
#: Fewer shared units than this give no correlation (as the probing study's validity).
MIN_UNITS: Final = 3
#: The ``model`` of the row averaged over models.
ALL_MODELS: Final = "all models"
#: The unit whose deviations are correlated across cue types (see the module docstring).
UNIT: Final = "profile"
_UNIT_COLUMN: Final[Mapping[str, str]] = {"profile": "profile_id", "bundle": "bundle_id"}
NOT_IN_FAMILY: Final = "cue types are compared outside the pre-registered family"

CUE_CONTRASTS_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    "arm": pl.String(),
    "cue": pl.String(),
    **{
        c: CONTRASTS_SCHEMA[c]
        for c in ("domain", "format", "contrast", "dimension", "focal", "reference")
    },
    **{
        c: CONTRASTS_SCHEMA[c]
        for c in ("estimator", "unit", "estimate", "se", "df", "inference", "ci_low", "ci_high")
    },
    **{c: CONTRASTS_SCHEMA[c] for c in ("p_value", "outcome_sd", "estimate_sd", "se_sd")},
    "n_obs": pl.Int64(),
    "note": pl.String(),
    "composition_passed": pl.Boolean(),
    "composition_tests": pl.Int64(),
    "composition_note": pl.String(),
    "label": pl.String(),
}
CUE_VALIDITY_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    "arm": pl.String(),
    "domain": pl.String(),
    "format": pl.String(),
    "unit": pl.String(),
    "contrast": pl.String(),
    "cue_a": pl.String(),
    "cue_b": pl.String(),
    "model": pl.String(),
    "r": pl.Float64(),
    "n": pl.Int64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "n_models": pl.Int64(),
    "note": pl.String(),
    "label": pl.String(),
}


def expresses(cue: str, spec: ContrastSpec) -> bool:
    """Whether a cue type signals both levels of a contrast (first names and dialect: Black
    and White only; dialect no gender)."""
    levels = CUE_RACES[cue] if spec.dimension == "race" else CUE_GENDERS[cue]
    return spec.focal in levels and spec.reference in levels


def cue_arms(frames: AnalysisFrames) -> list[str]:
    """The arms whose rows show a cue type beyond name pairs (primary first)."""
    arms: set[str] = set()
    for frame in (frames.judgements, frames.rankings):
        shown = frame.filter(pl.col("cue").fill_null(NAME_PAIR) != NAME_PAIR)
        arms |= set(shown["arm"].drop_nulls().to_list())
    return sorted(arms, key=lambda a: (a != PRIMARY, a))


def _label(arm: str) -> str:
    reason = exploratory_reason(True, arm)
    return f"exploratory: {reason or NOT_IN_FAMILY}"


def _cells(data: AnalysisFrames) -> list[tuple[str, str]]:
    """The (domain, format) cells with rows, in format order."""
    cells = []
    for fmt in FORMATS:
        if fmt == "rank":
            rows = data.rankings.filter(pl.col("bundle_type").is_in(list(RANK_BUNDLE_TYPES)))
        else:
            rows = data.judgements.filter(pl.col("format") == fmt)
        cells += [(d, fmt) for d in sorted(set(rows["domain"].drop_nulls()))]
    return cells


def _specs(prereg: Preregistration | None, domain: str, fmt: str, cue: str) -> list[ContrastSpec]:
    planned: Sequence[ContrastSpec] = default_contrasts()
    if prereg is not None:
        planned = family_cells(prereg).get((domain, fmt), planned)
    return [spec for spec in planned if expresses(cue, spec)]


def _cell_frames(data: AnalysisFrames, domain: str, fmt: str) -> AnalysisFrames:
    """One cell's rows (the rank cell: its disguised bundles), for its composition check."""
    in_domain = pl.col("domain") == domain
    if fmt == "rank":
        keep = in_domain & pl.col("bundle_type").is_in(list(RANK_BUNDLE_TYPES))
        return AnalysisFrames(data.judgements.clear(), data.rankings.filter(keep), data.probes)
    keep = in_domain & (pl.col("format") == fmt)
    return AnalysisFrames(data.judgements.filter(keep), data.rankings.clear(), data.probes)


def _composition(
    frames: AnalysisFrames, arm: str, cue: str, domain: str, fmt: str, alpha: float
) -> dict[str, object]:
    """The composition check of one cue type's cell: passed, tests run, the first failure."""
    cell = _cell_frames(frames.arm(arm, cue), domain, fmt)
    try:
        table, _ = check_with_flags(cell, arm=arm, alpha=alpha, cue=cue)
    except CompositionError as error:
        return {
            "composition_passed": False,
            "composition_tests": None,
            "composition_note": str(error),
        }
    failed = table.filter(~pl.col("passed"))
    return {
        "composition_passed": failed.is_empty(),
        "composition_tests": table.height,
        "composition_note": None if failed.is_empty() else failed["note"][0],
    }


def cue_contrasts(
    frames: AnalysisFrames,
    prereg: Preregistration | None = None,
    *,
    alpha: float = 0.05,
    composition_alpha: float = ALPHA,
) -> pl.DataFrame:
    """The CUE_CONTRASTS table (see the module docstring): one row per arm x cue type x
    domain x format x expressible contrast x estimator; ``alpha`` the intervals' level
    (the pre-registration's), ``composition_alpha`` the composition check's."""
    records: list[dict[str, object]] = []
    for arm in cue_arms(frames):
        label = _label(arm)
        for cue in frames.arm(arm, cue=None).cues():
            data = frames.arm(arm, cue)
            for domain, fmt in _cells(data):
                specs = _specs(prereg, domain, fmt, cue)
                if not specs:
                    continue
                common = {"arm": arm, "cue": cue, "domain": domain, "format": fmt, "label": label}
                common |= _composition(frames, arm, cue, domain, fmt, composition_alpha)
                design = design_of(cell_rows(data, domain, fmt), fmt)
                for estimator in estimators_for(fmt):
                    fit = fit_design(design, specs, estimator=estimator)
                    sd = fit.outcome_sd if np.isfinite(fit.outcome_sd) else np.nan
                    for spec in specs:
                        row = estimate_fields(fit, fit.estimates[spec.contrast], alpha)
                        scaled = sd if sd > 0 else np.nan
                        records.append(
                            common
                            | row
                            | {
                                "contrast": spec.contrast,
                                "dimension": spec.dimension,
                                "focal": spec.focal,
                                "reference": spec.reference,
                                "outcome_sd": fit.outcome_sd,
                                "estimate_sd": float(row["estimate"]) / scaled,  # type: ignore[arg-type]
                                "se_sd": float(row["se"]) / scaled,  # type: ignore[arg-type]
                            }
                        )
    order = {c: i for i, c in enumerate(frames.cues())}
    table = pl.DataFrame(records, schema=dict(CUE_CONTRASTS_SCHEMA))
    return (
        table.with_columns(_order=pl.col("cue").replace_strict(order, return_dtype=pl.Int64))
        .sort("arm", "domain", "format", "contrast", "_order", "estimator")
        .drop("_order")
    )


def deviations(
    data: AnalysisFrames, domain: str, fmt: str, spec: ContrastSpec, unit: str = UNIT
) -> pl.DataFrame:
    """Per model and ``unit`` (``"profile"``; for Rank also ``"bundle"``, a disguised bundle:
    see the module docstring for why the table does not use it) of one arm and cue type's
    rows: the focal group's mean outcome minus the reference's (``deviation``), with the rows
    of each (``n_focal``, ``n_reference``); units without both groups are left out."""
    unit = _UNIT_COLUMN[unit]
    rows = cell_rows(data, domain, fmt)
    outcome = "points" if fmt == "rank" else "y"
    group = pl.col(spec.dimension)
    means = (
        rows.filter(group.is_in([spec.focal, spec.reference]))
        .group_by("model", unit, spec.dimension)
        .agg(mean=pl.col(outcome).mean(), n=pl.len())
    )
    focal = means.filter(group == spec.focal).select("model", unit, "mean", n_focal="n")
    reference = means.filter(group == spec.reference).select(
        "model", unit, reference="mean", n_reference="n"
    )
    return (
        focal.join(reference, on=["model", unit], how="inner")
        .select(
            "model",
            pl.col(unit).alias("unit_id"),
            deviation=pl.col("mean") - pl.col("reference"),
            n_focal=pl.col("n_focal").cast(pl.Int64),
            n_reference=pl.col("n_reference").cast(pl.Int64),
        )
        .sort("model", "unit_id")
    )


def _pair_rows(
    by_cue: Mapping[str, pl.DataFrame], cue_a: str, cue_b: str
) -> list[tuple[str, float | None, int, float | None, float | None, str | None]]:
    """(model, r, n, ci_low, ci_high, note) of two cue types' deviations, per model."""
    out = []
    models = sorted(set(by_cue[cue_a]["model"]) & set(by_cue[cue_b]["model"]))
    for model in models:
        a = by_cue[cue_a].filter(pl.col("model") == model).select("unit_id", a="deviation")
        b = by_cue[cue_b].filter(pl.col("model") == model).select("unit_id", b="deviation")
        both = a.join(b, on="unit_id", how="full", coalesce=True)
        x = both.select("a", "b").to_numpy().astype(np.float64)
        r, n, status = pairwise_pearson(x, MIN_UNITS)
        if status[0, 1] == OK:
            low, high = fisher_ci(float(r[0, 1]), int(n[0, 1]))
            out.append((model, float(r[0, 1]), int(n[0, 1]), low, high, None))
        else:
            note = (
                f"fewer than {MIN_UNITS} shared units"
                if status[0, 1] == TOO_FEW
                else "zero variance in a deviation vector"
            )
            out.append((model, None, int(n[0, 1]), None, None, note))
    return out


def cue_validity(frames: AnalysisFrames) -> pl.DataFrame:
    """The CUE_VALIDITY table (see the module docstring): per arm with two cue types or more,
    domain x format x contrast x pair of cue types that both express it, one row per model
    and one averaged over the models (``model`` = :data:`ALL_MODELS`)."""
    records: list[dict[str, object]] = []
    for arm in cue_arms(frames):
        cues = frames.arm(arm, cue=None).cues()
        label = _label(arm)
        cells = sorted(
            {cell for cue in cues for cell in _cells(frames.arm(arm, cue))},
            key=lambda c: (c[0], FORMATS.index(c[1])),
        )
        for domain, fmt in cells:
            for spec in default_contrasts():
                able = [c for c in cues if expresses(c, spec)]
                by_cue = {c: deviations(frames.arm(arm, c), domain, fmt, spec) for c in able}
                for cue_a, cue_b in combinations(able, 2):
                    if by_cue[cue_a].is_empty() or by_cue[cue_b].is_empty():
                        continue
                    common = {
                        "arm": arm,
                        "domain": domain,
                        "format": fmt,
                        "unit": UNIT,
                        "contrast": spec.contrast,
                        "cue_a": cue_a,
                        "cue_b": cue_b,
                        "label": label,
                    }
                    per_model = _pair_rows(by_cue, cue_a, cue_b)
                    fields = ("model", "r", "n", "ci_low", "ci_high", "note")
                    records += [
                        common
                        | dict(zip(fields, row, strict=True))
                        | {"n_models": int(row[1] is not None)}
                        for row in per_model
                    ]
                    records.append(common | _averaged(per_model))
    return pl.DataFrame(records, schema=dict(CUE_VALIDITY_SCHEMA))


def _averaged(
    per_model: Sequence[tuple[str, float | None, int, float | None, float | None, str | None]],
) -> dict[str, object]:
    """The models' correlations averaged on the Fisher-z scale (equal weights), its interval
    Fisher's over the fewest units a model shares."""
    valid = [(r, n) for _, r, n, *_ in per_model if r is not None]
    if not valid:
        return {
            "model": ALL_MODELS, "r": None, "n": None, "ci_low": None, "ci_high": None,
            "n_models": 0, "note": "no model with a correlation",
        }  # fmt: skip
    r = fisher_z_mean(np.array([v for v, _ in valid]))
    n = min(n for _, n in valid)
    low, high = fisher_ci(r, n)
    return {
        "model": ALL_MODELS,
        "r": r,
        "n": n,
        "ci_low": low,
        "ci_high": high,
        "n_models": len(valid),
        "note": None if low is not None else f"{n} shared units: no interval",
    }
