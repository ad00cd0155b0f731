"""The planned contrasts of the decision audit (CONTRASTS), their format interactions
(INTERACTIONS) and the placebo cell's false-positive check (PLACEBO).

Every domain x format cell of the pre-registered family is one design
(:mod:`~cueaudit.decision.analysis.design_matrix`), fitted by each estimator of
:data:`~cueaudit.decision.analysis.fitters.FITTERS` that fits its format (the estimands are
stated there), and each contrast read by :mod:`~cueaudit.decision.analysis.verdicts` (t test,
BH over the family estimator's rows, TOST, MDE, verdict).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Final

import numpy as np
import polars as pl

from cueaudit.decision.analysis.design_matrix import (
    RANK_BUNDLE_TYPES,
    CellDesign,
    ContrastSpec,
    cell_rows,
    default_contrasts,
    design_of,
)
from cueaudit.decision.analysis.fitters import (
    FAMILY_ESTIMATOR,
    CellFit,
    Estimate,
    estimators_for,
    fit_design,
)
from cueaudit.decision.analysis.frames import PRIMARY, AnalysisFrames
from cueaudit.decision.analysis.verdicts import (
    equivalence,
    estimate_fields,
    with_verdicts,
)
from cueaudit.decision.preregistration import PlannedContrast, Preregistration, Status
from cueaudit.errors import InputError
from cueaudit.stats.multiplicity import bh_qvalues, t_test
from cueaudit.stats.robust import cross_covariance

#: The placebo cell: the same squares, pseudo-groups in place of race.
PLACEBO_BUNDLE_TYPES: Final = ("disguised_placebo",)
PLACEBO_DIMENSIONS: Final[Mapping[str, str]] = {"race": "pseudo_race"}

CONTRASTS_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    "contrast_id": pl.String(),
    "domain": pl.String(),
    "format": pl.String(),
    "contrast": pl.String(),
    "dimension": pl.String(),
    "focal": pl.String(),
    "reference": pl.String(),
    "estimator": pl.String(),
    "unit": pl.String(),
    "estimate": pl.Float64(),
    "se": pl.Float64(),
    "df": pl.Float64(),
    "inference": pl.String(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "p_value": pl.Float64(),
    "outcome_sd": pl.Float64(),
    "estimate_sd": pl.Float64(),
    "se_sd": pl.Float64(),
    "ci_low_sd": pl.Float64(),
    "ci_high_sd": pl.Float64(),
    "n_obs": pl.Int64(),
    "in_family": pl.Boolean(),
    "q_value": pl.Float64(),
    "margin": pl.Float64(),
    "p_tost": pl.Float64(),
    "tost_bound": pl.Float64(),
    "mde": pl.Float64(),
    "mde_sd": pl.Float64(),
    "equivalence_floor": pl.Float64(),
    "equivalence_floor_sd": pl.Float64(),
    "verdict": pl.String(),
    "pre_registered": pl.Boolean(),
    "label": pl.String(),
}
INTERACTIONS_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    "domain": pl.String(),
    "contrast": pl.String(),
    "formats": pl.String(),
    "estimate_sd": pl.Float64(),
    "se_sd": pl.Float64(),
    "se_sd_independent": pl.Float64(),
    "correlation": pl.Float64(),
    "df": pl.Float64(),
    "ci_low_sd": pl.Float64(),
    "ci_high_sd": pl.Float64(),
    "p_value": pl.Float64(),
    "q_value": pl.Float64(),
    "primary": pl.Boolean(),
}
#: The placebo table: the pseudo-race contrasts of the placebo cell, per domain (mode "all")
#: and per domain x mode, with whether each rejects at the pre-registration's alpha.
PLACEBO_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    "domain": pl.String(),
    "mode": pl.String(),
    "contrast": pl.String(),
    "estimator": pl.String(),
    "unit": pl.String(),
    "estimate": pl.Float64(),
    "se": pl.Float64(),
    "df": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "p_value": pl.Float64(),
    "rejects": pl.Boolean(),
    "n_obs": pl.Int64(),
    "note": pl.String(),
    "label": pl.String(),
}


def family_cells(prereg: Preregistration) -> dict[tuple[str, str], list[PlannedContrast]]:
    """The pre-registration's contrasts grouped by (domain, format), in its order."""
    cells: dict[tuple[str, str], list[PlannedContrast]] = {}
    for c in prereg.contrasts:
        cells.setdefault((c.domain, c.format), []).append(c)
    return cells


def exploratory_reason(pre_registered: Status | bool, arm: str) -> str | None:
    """Why results are exploratory, or None when they are pre-registered."""
    reasons = []
    if arm != PRIMARY:
        reasons.append(f"arm {arm!r} is not the pre-registered design")
    if isinstance(pre_registered, Status):
        if not pre_registered.pre_registered:
            reasons.append(pre_registered.reason)
    elif not pre_registered:
        reasons.append("the pre-registration is not locked")
    return "; ".join(reasons) if reasons else None


#: Fits of a family: (domain, format, estimator) -> the cell's fit.
FamilyFits = dict[tuple[str, str, str], CellFit]


def fit_family(
    frames: AnalysisFrames,
    prereg: Preregistration,
    *,
    arm: str = PRIMARY,
    bundle_types: Sequence[str] = RANK_BUNDLE_TYPES,
) -> FamilyFits:
    """Every cell of the family fitted by each of its estimators (lmm; rank also rologit).
    ``bundle_types`` is the estimand's; the checks pass others to show what a pooled
    construction does."""
    data = frames.arm(arm)
    fits: FamilyFits = {}
    for (domain, fmt), planned in family_cells(prereg).items():
        rows = cell_rows(data, domain, fmt, bundle_types=bundle_types)
        design = design_of(rows, fmt)
        for estimator in estimators_for(fmt):
            fits[(domain, fmt, estimator)] = fit_design(design, planned, estimator=estimator)
    return fits


def fit_cell(
    frames: AnalysisFrames,
    domain: str,
    fmt: str,
    contrasts: Sequence[ContrastSpec] | None = None,
    *,
    estimator: str | None = None,
    bundle_types: Sequence[str] = RANK_BUNDLE_TYPES,
) -> CellFit:
    """All contrasts of one domain x format from one fit by ``estimator`` (by default the
    family's; ``frames`` already one arm)."""
    rows = cell_rows(frames, domain, fmt, bundle_types=bundle_types)
    return fit_design(design_of(rows, fmt), contrasts, estimator=estimator)


def estimate_contrasts(
    frames: AnalysisFrames,
    prereg: Preregistration,
    *,
    pre_registered: Status | bool,
    arm: str = PRIMARY,
    fits: FamilyFits | None = None,
) -> pl.DataFrame:
    """The CONTRASTS table: every planned contrast of ``arm`` by its lmm, and the rank ones
    also by the rank-ordered logit; BH over the in-family (lmm) rows, TOST against the
    format's margin, the verdict and the label (``fits`` from :func:`fit_family` saves
    refitting).

    Verdict: ``"equivalent"`` when TOST rejects at alpha; else ``"different"`` when the
    difference test rejects (on the q-value for in-family rows, on p otherwise); else
    ``"inconclusive"``, with the MDE when it exceeds the margin. Decide has no margin: its
    verdict is ``"no margin"``. ``mde``, ``equivalence_floor`` and ``tost_bound`` (the
    smallest symmetric margin the data exclude) are in natural units, ``*_sd`` in SDs.
    """
    fits = fit_family(frames, prereg, arm=arm) if fits is None else fits
    reason = exploratory_reason(pre_registered, arm)
    label = "pre-registered" if reason is None else f"exploratory: {reason}"
    records: list[dict[str, object]] = []
    for (domain, fmt), planned in family_cells(prereg).items():
        for estimator in estimators_for(fmt):
            fit = fits[(domain, fmt, estimator)]
            for c in planned:
                e = fit.estimates[c.contrast]
                margin = prereg.margins.get(fmt)
                in_family = estimator == FAMILY_ESTIMATOR
                records.append(_record(c, fit, e, prereg, margin, in_family, reason))
    table = pl.DataFrame(records, schema=dict(CONTRASTS_SCHEMA) | {"_reason": pl.String()})
    table = with_verdicts(table, alpha=prereg.alpha, power=prereg.power).with_columns(
        pl.lit(reason is None).alias("pre_registered"),
        pl.lit(label).alias("label"),
    )
    return table.select(list(CONTRASTS_SCHEMA)).sort(["domain", "format", "contrast", "estimator"])


def _record(
    c: PlannedContrast,
    fit: CellFit,
    e: Estimate,
    prereg: Preregistration,
    margin: float | None,
    in_family: bool,
    reason: str | None,
) -> dict[str, object]:
    sd = fit.outcome_sd
    fields = estimate_fields(fit, e, prereg.alpha)
    df = float(fields.pop("df"))  # type: ignore[arg-type]
    rec: dict[str, object] = {
        "contrast_id": c.id,
        "domain": c.domain,
        "format": c.format,
        "contrast": c.contrast,
        "dimension": c.dimension,
        "focal": c.focal,
        "reference": c.reference,
        **fields,
        "df": df,
        "outcome_sd": sd,
        "in_family": in_family,
        "q_value": None,
        "margin": margin,
        **equivalence(e, df, margin, prereg.alpha, prereg.power),
        "verdict": None,
        "pre_registered": reason is None,
        "label": None,
        "_reason": fields.pop("note"),
    }
    scaled = sd if np.isfinite(sd) and sd > 0 else np.nan
    for col in ("estimate", "se", "ci_low", "ci_high", "mde", "equivalence_floor"):
        rec[f"{col}_sd"] = float(rec[col]) / scaled  # type: ignore[arg-type]
    return rec


def _format_pairs(prereg: Preregistration) -> tuple[list[tuple[str, str]], tuple[str, str]]:
    """Every pair of the family's formats (family order; the primary's pair as it is listed)."""
    formats = list(dict.fromkeys(c.format for c in prereg.contrasts))
    primary = tuple(prereg.primary.get("interaction", ()))
    if len(primary) != 2 or any(f not in formats for f in primary):
        raise InputError("pre-registration", f"primary interaction {list(primary)}", "primary")
    pairs = [
        (a, b) if {a, b} != set(primary) else (primary[0], primary[1])
        for a, b in combinations(formats, 2)
    ]
    return pairs, (primary[0], primary[1])


#: The factor through which two cells' contrasts covary: the name pair. The cells also share
#: profiles, but a Rate or Decide cell shows every profile under every name pair, so its
#: contrast's weights sum to zero over each profile's rows and no profile effect moves it; every
#: pair of formats has such a cell, so a profile term has zero expectation. Summed in anyway,
#: it only added noise: the estimated correlation then passed +-1 in 4-6% of simulated studies.
COVARYING_FACTORS: Final = ("pair_id",)


def interaction_covariance(
    a: Estimate, design_a: CellDesign, b: Estimate, design_b: CellDesign
) -> float:
    """The covariance of two cells' estimates through the name pairs they share
    (:data:`COVARYING_FACTORS`; :func:`cueaudit.stats.robust.cross_covariance` of their
    influences): a Rate and a Rank contrast of one domain show the same names, so they are
    not independent. A ranking's candidates are one unit: each one's points depend on the
    names it was ranked against, so a ranking counts towards every name pair it shows."""
    if a.influence is None or b.influence is None or a.rows is None or b.rows is None:
        return np.nan
    return cross_covariance(
        a.influence,
        {f: design_a.labels[f][a.rows] for f in COVARYING_FACTORS},
        b.influence,
        {f: design_b.labels[f][b.rows] for f in COVARYING_FACTORS},
        units_a=_units(design_a, a.rows),
        units_b=_units(design_b, b.rows),
    )


def _units(design: CellDesign, rows: np.ndarray) -> np.ndarray | None:
    """The ranking answer of each row of a rank cell (None: each judgement its own unit)."""
    return None if design.answer is None else design.answer[rows]


def estimate_interactions(
    frames: AnalysisFrames,
    prereg: Preregistration,
    *,
    arm: str = PRIMARY,
    fits: FamilyFits | None = None,
) -> pl.DataFrame:
    """The INTERACTIONS table: for each domain x contrast and each pair of formats ``a-b``,
    the difference of the lmm estimates in SD units (a minus b), its SE from the two cells'
    variances and their covariance through the name pairs they share
    (:func:`interaction_covariance`, scaled by both outcome SDs; ``se_sd_independent`` is the
    SE that ignores it and ``correlation`` the estimated correlation, bounded by +-1), a t
    interval with Welch-Satterthwaite degrees of freedom and two-sided p. The q-values are BH
    over the pairs of the primary interaction's formats (rate-rank: twelve), null elsewhere;
    ``primary`` flags the pre-registration's primary (domain, contrast, formats)."""
    pairs, primary_pair = _format_pairs(prereg)
    fits = fit_family(frames, prereg, arm=arm) if fits is None else fits
    data = frames.arm(arm)
    designs = {
        (domain, fmt): design_of(cell_rows(data, domain, fmt), fmt)
        for domain, fmt in family_cells(prereg)
    }
    keys = list(dict.fromkeys((c.domain, c.contrast) for c in prereg.contrasts))
    records = []
    for domain, contrast in keys:
        for fa, fb in pairs:
            records.append(
                _interaction(fits, designs, domain, contrast, fa, fb, prereg)
                | {
                    "primary": (
                        domain == prereg.primary.get("domain")
                        and contrast == prereg.primary.get("contrast")
                        and (fa, fb) == primary_pair
                    )
                }
            )
    table = pl.DataFrame(records, schema=dict(INTERACTIONS_SCHEMA))
    in_bh = (table["formats"] == "-".join(primary_pair)).to_numpy()
    q = np.full(table.height, np.nan)
    q[in_bh] = bh_qvalues(table["p_value"].to_numpy()[in_bh])
    return table.with_columns(
        pl.when(pl.Series(in_bh)).then(pl.Series(q)).otherwise(None).alias("q_value")
    )


def _interaction(
    fits: FamilyFits,
    designs: Mapping[tuple[str, str], CellDesign],
    domain: str,
    contrast: str,
    fa: str,
    fb: str,
    prereg: Preregistration,
) -> dict[str, object]:
    nan = float("nan")
    out: dict[str, object] = {"domain": domain, "contrast": contrast, "formats": f"{fa}-{fb}"}
    out |= dict.fromkeys(
        ("estimate_sd", "se_sd", "se_sd_independent", "correlation", "df", "ci_low_sd",
         "ci_high_sd", "p_value"), nan,
    )  # fmt: skip
    fit_a = fits.get((domain, fa, FAMILY_ESTIMATOR))
    fit_b = fits.get((domain, fb, FAMILY_ESTIMATOR))
    if fit_a is None or fit_b is None:
        return out
    a, b = fit_a.estimates.get(contrast), fit_b.estimates.get(contrast)
    sd_a, sd_b = fit_a.outcome_sd, fit_b.outcome_sd
    if (
        a is None
        or b is None
        or not all(np.isfinite([a.estimate, a.se, b.estimate, b.se, sd_a, sd_b]))
    ):
        return out
    va, vb = (a.se / sd_a) ** 2, (b.se / sd_b) ** 2
    cov = interaction_covariance(a, designs[(domain, fa)], b, designs[(domain, fb)])
    cov = cov / (sd_a * sd_b) if np.isfinite(cov) else 0.0
    # an estimated covariance cannot make the variance of the difference negative
    cov = float(np.clip(cov, -np.sqrt(va * vb), np.sqrt(va * vb)))
    variance = va + vb - 2 * cov
    if not variance > 0:
        return out
    df = variance**2 / (va**2 / a.df + vb**2 / b.df)
    test = t_test(a.estimate / sd_a - b.estimate / sd_b, float(np.sqrt(variance)), df)
    low, high = test.conf_int(1 - prereg.alpha)
    return out | {
        "estimate_sd": test.estimate,
        "se_sd": test.se,
        "se_sd_independent": float(np.sqrt(va + vb)),
        "correlation": cov / float(np.sqrt(va * vb)),
        "df": float(df),
        "ci_low_sd": low,
        "ci_high_sd": high,
        "p_value": test.p,
    }


def estimate_placebo(
    frames: AnalysisFrames,
    prereg: Preregistration,
    *,
    pre_registered: Status | bool,
    arm: str = PRIMARY,
) -> pl.DataFrame:
    """The PLACEBO table: the race contrasts of the planned family estimated on the placebo
    cell, with ``pseudo_race`` in place of race and otherwise the identical fits (both
    estimators), per domain (``mode`` "all") and per domain x mode. The pseudo-groups carry
    no demographic content, so every true contrast is zero and the share of rows that reject
    at alpha is the design's false-positive rate."""
    data = frames.arm(arm)
    reason = exploratory_reason(pre_registered, arm)
    label = "pre-registered" if reason is None else f"exploratory: {reason}"
    specs = [c for c in default_contrasts() if c.dimension in PLACEBO_DIMENSIONS]
    domains = list(dict.fromkeys(c.domain for c in prereg.contrasts if c.format == "rank"))
    rows_all = data.rankings.filter(pl.col("bundle_type").is_in(list(PLACEBO_BUNDLE_TYPES)))
    records = []
    for domain in domains:
        rows = cell_rows(data, domain, "rank", bundle_types=PLACEBO_BUNDLE_TYPES)
        modes = sorted(rows_all.filter(pl.col("domain") == domain)["mode"].unique().to_list())
        for mode in ["all", *(modes if len(modes) > 1 else [])]:
            part = rows if mode == "all" else rows.filter(pl.col("mode") == mode)
            design = design_of(part, "rank", PLACEBO_DIMENSIONS)
            for estimator in estimators_for("rank"):
                fit = fit_design(design, specs, estimator=estimator)
                for c in specs:
                    records.append(_placebo_record(domain, mode, c, fit, prereg.alpha, label))
    return pl.DataFrame(records, schema=dict(PLACEBO_SCHEMA))


def _placebo_record(
    domain: str, mode: str, c: ContrastSpec, fit: CellFit, alpha: float, label: str
) -> dict[str, object]:
    row = estimate_fields(fit, fit.estimates[c.contrast], alpha)
    p = float(row["p_value"])  # type: ignore[arg-type]
    rejects = bool(p < alpha) if np.isfinite(p) else None
    return {"domain": domain, "mode": mode, "contrast": c.contrast, **row, "rejects": rejects} | {
        "label": label
    }
