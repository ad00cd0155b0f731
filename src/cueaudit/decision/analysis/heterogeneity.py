"""Where the pooled contrasts hide differences: every planned contrast per model, per mode
and per paraphrase (:func:`contrasts_by`), its heterogeneity across them
(:func:`estimate_heterogeneity`: Cochran's Q with I² and tau² over the per-level estimates,
and the factor x group interaction of one joint lmm as a Wald test), intersectional race x
gender contrasts (:func:`estimate_intersectional`) and the mode difference of each contrast
from one joint fit of the modes (:func:`estimate_mode_differences`). None of it is in the
pre-registered family: every row is labelled exploratory.

Every fit is the family's (:func:`~cueaudit.decision.analysis.fitters.fit_design` on the
cell's :class:`~cueaudit.decision.analysis.design_matrix.CellDesign`, or for the joint fits
:func:`~cueaudit.decision.analysis.fitters.fit_lmm` on that design with interaction columns
appended: :func:`with_interactions`). A joint fit assumes the variance components and the
other nuisance effects are common to the levels; the per-level fits do not.

Per-level estimates of one design share its name pairs and profiles (every model answers the
same prompts), so they covary positively and Q, which assumes independence, is conservative;
the joint fit's Wald test accounts for the sharing through the random effects (and for rank,
the CR2 sandwich by design bundle). The modes share names, profiles and bundles too: a mode
difference therefore comes from the joint fit, not from differencing two fits (the SE that
ignores the sharing stands beside it as ``se_independent``).

One module on purpose: the per-level contrasts, Q and the joint fit's Wald test and mode
difference all come from the same joint design matrix, built once here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np
import polars as pl

from cueaudit.decision.analysis.contrasts import (
    CONTRASTS_SCHEMA,
    exploratory_reason,
    family_cells,
)
from cueaudit.decision.analysis.design_matrix import (
    BASELINES,
    CellDesign,
    ContrastSpec,
    cell_rows,
    design_of,
)
from cueaudit.decision.analysis.fitters import (
    FAMILY_ESTIMATOR,
    FITTERS,
    CellFit,
    Estimate,
    LmmFit,
    fit_design,
    fit_lmm,
    informative_rows,
)
from cueaudit.decision.analysis.frames import PRIMARY, AnalysisFrames
from cueaudit.decision.analysis.verdicts import t_interval
from cueaudit.decision.design import GENDERS, RACES
from cueaudit.decision.preregistration import Preregistration, Status
from cueaudit.errors import InputError
from cueaudit.stats.heterogeneity import cochran_q

#: The design factors a contrast is broken down by.
BY_FACTORS: Final = ("model", "mode", "paraphrase")
#: The intersectional reference cell.
REFERENCE_CELL: Final = (BASELINES["race"], BASELINES["gender"])
NOT_IN_FAMILY: Final = "not in the pre-registered family"
#: The random factor whose levels replicate a race or gender contrast.
PAIR: Final = "pair_id"

_IDENTITY: Final[Mapping[str, pl.DataType]] = {
    c: CONTRASTS_SCHEMA[c]
    for c in ("contrast_id", "domain", "format", "contrast", "dimension", "focal", "reference")
}
_INTERVAL: Final[Mapping[str, pl.DataType]] = {
    **{c: CONTRASTS_SCHEMA[c] for c in ("estimator", "unit", "estimate", "se", "df")},
    **{c: CONTRASTS_SCHEMA[c] for c in ("inference", "ci_low", "ci_high", "p_value")},
    **{c: CONTRASTS_SCHEMA[c] for c in ("outcome_sd", "estimate_sd", "se_sd")},
    **{c: CONTRASTS_SCHEMA[c] for c in ("ci_low_sd", "ci_high_sd", "n_obs")},
    "note": pl.String(),
}
_LABELS: Final[Mapping[str, pl.DataType]] = {
    "exploratory_reason": pl.String(),
    "label": pl.String(),
}
#: One row per factor (``by``) x level x planned contrast x estimator. SD units divide by the
#: pooled cell's outcome SD, so the levels of a contrast share one scale.
CONTRASTS_BY_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    "by": pl.String(),
    "level": pl.String(),
    **_IDENTITY,
    **_INTERVAL,
    **_LABELS,
}
HETEROGENEITY_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    "by": pl.String(),
    **_IDENTITY,
    "levels": pl.Int64(),
    "q": pl.Float64(),
    "q_df": pl.Int64(),
    "q_p_value": pl.Float64(),
    "i2": pl.Float64(),
    "tau2": pl.Float64(),
    "pooled_fixed": pl.Float64(),
    "wald_f": pl.Float64(),
    "wald_df1": pl.Int64(),
    "wald_df2": pl.Float64(),
    "wald_p_value": pl.Float64(),
    "inference": pl.String(),
    "unit": pl.String(),
    "note": pl.String(),
    **_LABELS,
}
INTERSECTIONAL_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    "domain": pl.String(),
    "format": pl.String(),
    "kind": pl.String(),  # "cell" (a race x gender cell against White men) or "interaction"
    "race": pl.String(),
    "gender": pl.String(),
    "reference": pl.String(),
    **_INTERVAL,
    "f_value": pl.Float64(),
    "df1": pl.Int64(),
    **_LABELS,
}
MODE_DIFFERENCES_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    **_IDENTITY,
    "modes": pl.String(),  # "a-b": the contrast in mode a minus the contrast in mode b
    **_INTERVAL,
    "se_independent": pl.Float64(),
    **_LABELS,
}


def _labels(reason: str) -> dict[str, str]:
    return {"exploratory_reason": reason, "label": f"exploratory: {reason}"}


def _reason(what: str, pre_registered: Status | bool, arm: str) -> str:
    """``what`` is not in the family, and whatever else makes the arm's results exploratory."""
    other = exploratory_reason(pre_registered, arm)
    return f"{what}: {NOT_IN_FAMILY}" + (f"; {other}" if other else "")


def _scaled(rec: dict[str, object], sd: float) -> dict[str, object]:
    scale = sd if np.isfinite(sd) and sd > 0 else np.nan
    for col in ("estimate", "se", "ci_low", "ci_high"):
        value = rec[col]
        rec[f"{col}_sd"] = float(value) / scale if value is not None else None  # type: ignore[arg-type]
    return rec


def _interval(e: Estimate, alpha: float, sd: float) -> dict[str, object]:
    df, low, high, p = t_interval(e, alpha)
    return _scaled(
        {"estimate": e.estimate, "se": e.se, "df": df, "ci_low": low, "ci_high": high,
         "p_value": p, "outcome_sd": sd},
        sd,
    )  # fmt: skip


def _levels(rows: pl.DataFrame, factor: str) -> list[str]:
    if factor not in rows.columns:
        raise InputError("contrasts by", f"no design factor {factor!r}", "by")
    return sorted({str(v) for v in rows[factor].to_list() if v is not None})


def _outcome_sd(design: CellDesign) -> float:
    return float(np.std(design.y, ddof=1)) if design.n > 1 else np.nan


# --- per level ---------------------------------------------------------------------------------
def contrasts_by(
    frames: AnalysisFrames,
    prereg: Preregistration,
    by: str | Sequence[str] = BY_FACTORS,
    *,
    arm: str = PRIMARY,
    pre_registered: Status | bool = False,
    estimators: Sequence[str] = (FAMILY_ESTIMATOR,),
) -> pl.DataFrame:
    """Every planned contrast of ``arm`` estimated within each level of each factor of
    ``by`` (``"model"``, ``"mode"``, ``"paraphrase"`` or any design column of the frames):
    the cell's rows of that level, fitted by each of ``estimators`` exactly as the family's
    cell is (the factor is then constant and drops out of the design). A factor with one
    level in a cell gives that level's row, equal to the pooled estimate. Labelled
    exploratory (the ``CONTRASTS_BY`` table)."""
    factors = [by] if isinstance(by, str) else list(by)
    data = frames.arm(arm)
    records: list[dict[str, object]] = []
    for (domain, fmt), planned in family_cells(prereg).items():
        rows = cell_rows(data, domain, fmt)
        pooled_sd = _outcome_sd(design_of(rows, fmt))
        for factor in factors:
            labels = _labels(_reason(f"per-{factor} estimate", pre_registered, arm))
            for level in _levels(rows, factor):
                part = rows.filter(pl.col(factor).cast(pl.String) == level)
                design = design_of(part, fmt)
                for estimator in estimators:
                    if fmt not in FITTERS[estimator].formats:
                        continue
                    fit = fit_design(design, planned, estimator=estimator)
                    for c in planned:
                        e = fit.estimates[c.contrast]
                        records.append(
                            {"by": factor, "level": level, **_identity(c)}
                            | _fit_columns(fit, e, prereg.alpha, pooled_sd)
                            | labels
                        )
    return pl.DataFrame(records, schema=dict(CONTRASTS_BY_SCHEMA))


def _identity(c: ContrastSpec) -> dict[str, object]:
    return {
        "contrast_id": getattr(c, "id", None),
        "domain": getattr(c, "domain", None),
        "format": getattr(c, "format", None),
        "contrast": c.contrast,
        "dimension": c.dimension,
        "focal": c.focal,
        "reference": c.reference,
    }


def _fit_columns(fit: CellFit, e: Estimate, alpha: float, sd: float) -> dict[str, object]:
    return {
        "estimator": fit.estimator,
        "unit": fit.unit,
        "inference": fit.inference,
        "n_obs": fit.n_obs if e.n_obs is None else e.n_obs,
        "note": e.reason,
        **_interval(e, alpha, sd),
    }


# --- joint fits --------------------------------------------------------------------------------
def with_interactions(
    design: CellDesign, factor: str, dimensions: Sequence[str]
) -> tuple[CellDesign, list[str]]:
    """``design`` with one column ``"<factor>[l]:<dimension>[g]"`` per non-baseline level
    ``l`` of ``factor`` (its dummy column ``<factor>[l]``: a nuisance factor such as model, or
    a contrast dimension such as gender) and each contrast dummy of ``dimensions``, the
    product of the two; and the factor's non-baseline levels. The new columns are nuisance
    columns to the fit (role None): a product without variation is dropped as any column."""
    prefix = f"{factor}["
    level_columns = [j for j, n in enumerate(design.names) if n.startswith(prefix)]
    group_columns = [j for j, r in enumerate(design.roles) if r in dimensions]
    names, columns = [], []
    for j in level_columns:
        for k in group_columns:
            names.append(f"{design.names[j]}:{design.names[k]}")
            columns.append(design.x[:, j] * design.x[:, k])
    levels = [design.names[j][len(prefix) : -1] for j in level_columns]
    if not columns:
        return design, levels
    return (
        dataclasses.replace(
            design,
            x=np.column_stack([design.x, *columns]),
            names=[*design.names, *names],
            roles=[*design.roles, *([None] * len(names))],
        ),
        levels,
    )


def _group_columns(spec: ContrastSpec) -> list[tuple[str, float]]:
    """The contrast dummies of ``spec`` with their signs (the baseline has none)."""
    return [
        (f"{spec.dimension}[{level}]", sign)
        for level, sign in ((spec.focal, 1.0), (spec.reference, -1.0))
        if level != BASELINES[spec.dimension]
    ]


def interaction_vector(
    names: Sequence[str], spec: ContrastSpec, factor_column: str
) -> np.ndarray | None:
    """The weights on ``names`` of how much ``spec`` differs at the factor level of dummy
    ``factor_column`` (``"model[m2]"``) from the baseline level, or None when a product
    column it needs was dropped."""
    vector = np.zeros(len(names))
    for column, sign in _group_columns(spec):
        name = f"{factor_column}:{column}"
        if name not in names:
            return None
        vector[list(names).index(name)] += sign
    return vector


@dataclasses.dataclass(frozen=True)
class JointFit:
    """One lmm of a cell with ``factor`` x group interactions (``fit`` a reason string when it
    could not be fitted); ``levels`` are the factor's non-baseline levels."""

    factor: str
    levels: list[str]
    fit: LmmFit | str
    n_obs: int
    outcome_sd: float
    unit: str

    def difference(self, spec: ContrastSpec, level: str) -> tuple[np.ndarray | None, str | None]:
        """The weights of ``spec`` at ``level`` minus at the baseline level, or why not."""
        if isinstance(self.fit, str):
            return None, self.fit
        vector = interaction_vector(self.fit.names, spec, f"{self.factor}[{level}]")
        if vector is None:
            return None, f"{self.factor} {level} x {spec.dimension}: no variation in the cell"
        return vector, None


def fit_joint(design: CellDesign, factor: str, dimensions: Sequence[str]) -> JointFit:
    """The family's lmm of ``design`` with ``factor`` x ``dimensions`` interactions, on the
    rows in which those dimensions all vary (rank: see :func:`informative_rows`), and a random
    intercept of factor level x name pair beside the family's.

    The name pair is what replicates a race or gender contrast, so a test of whether the
    contrast differs by level has factor x pair variation as its error: models (modes) react
    to the same names differently. Without that intercept the test took rows as replicates and
    over-rejected: 11% at 0.05 in 300 null studies with model x pair effects (SD 0.2); with
    it 5.0%, and Q over the per-model fits (each with its own pair intercept) 6.3%."""
    keep = informative_rows(design, dimensions)
    part = design if keep.all() else design.subset(keep)
    augmented, levels = with_interactions(part, factor, dimensions)
    if levels and PAIR in augmented.groups:
        augmented = dataclasses.replace(
            augmented, groups={**augmented.groups, f"{factor}:{PAIR}": _crossed_codes(part, factor)}
        )
    fit: LmmFit | str = fit_lmm(augmented) if levels else f"one level of {factor} in the cell"
    return JointFit(
        factor=factor,
        levels=levels,
        fit=fit,
        n_obs=part.n,
        outcome_sd=_outcome_sd(design),
        unit=design.unit,
    )


def _crossed_codes(design: CellDesign, factor: str) -> np.ndarray:
    """Each row's (factor level, name pair) as one code: the level read off its dummies (the
    baseline has none)."""
    dummies = design.x[:, [j for j, n in enumerate(design.names) if n.startswith(f"{factor}[")]]
    level = (dummies @ np.arange(1, dummies.shape[1] + 1)).astype(np.int64)
    pair = design.groups[PAIR]
    return level * (int(pair.max()) + 1) + pair


def _dimensions(planned: Sequence[ContrastSpec]) -> list[str]:
    return list(dict.fromkeys(c.dimension for c in planned))


def _cell_designs(
    frames: AnalysisFrames, prereg: Preregistration, arm: str
) -> dict[tuple[str, str], CellDesign]:
    data = frames.arm(arm)
    return {
        (domain, fmt): design_of(cell_rows(data, domain, fmt), fmt)
        for domain, fmt in family_cells(prereg)
    }


def estimate_heterogeneity(
    frames: AnalysisFrames,
    prereg: Preregistration,
    *,
    by: Sequence[str] = BY_FACTORS,
    arm: str = PRIMARY,
    pre_registered: Status | bool = False,
    per_level: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The HETEROGENEITY table: for each planned contrast and each factor of ``by`` with two
    or more levels in its cell, Cochran's Q (I², tau², the fixed-effect mean) over the
    per-level lmm estimates of :func:`contrasts_by` (``per_level`` saves re-estimating them),
    and the Wald test of the factor x group interaction in one joint lmm of the cell
    (:func:`fit_joint`; H0: the contrast is the same at every level)."""
    if per_level is None:
        per_level = contrasts_by(frames, prereg, by, arm=arm, pre_registered=pre_registered)
    per_level = per_level.filter(pl.col("estimator") == FAMILY_ESTIMATOR)
    designs = _cell_designs(frames, prereg, arm)
    records = []
    for (domain, fmt), planned in family_cells(prereg).items():
        for factor in by:
            joint = fit_joint(designs[(domain, fmt)], factor, _dimensions(planned))
            if not joint.levels:
                continue
            labels = _labels(_reason(f"heterogeneity by {factor}", pre_registered, arm))
            for c in planned:
                levels = per_level.filter(
                    (pl.col("by") == factor) & (pl.col("contrast_id") == c.id)
                )
                q = cochran_q(levels["estimate"].to_numpy(), levels["se"].to_numpy())
                rec = {"by": factor, **_identity(c), "levels": levels.height} | labels
                rec |= {
                    "q": q.q, "q_df": q.df, "q_p_value": q.p, "i2": q.i2, "tau2": q.tau2,
                    "pooled_fixed": q.fixed, "unit": joint.unit,
                }  # fmt: skip
                records.append(rec | _joint_test(joint, c))
    return pl.DataFrame(records, schema=dict(HETEROGENEITY_SCHEMA))


def _joint_test(joint: JointFit, spec: ContrastSpec) -> dict[str, object]:
    nan = float("nan")
    out: dict[str, object] = {"wald_f": nan, "wald_df1": 0, "wald_df2": nan, "wald_p_value": nan}
    out["inference"] = "Q: inverse-variance, chi2(k - 1); Wald: " + (
        "contestMD, Satterthwaite" if joint_format(joint) != "rank" else "CR2, F(q, G - 1)"
    )
    rows, notes = [], []
    for level in joint.levels:
        vector, why = joint.difference(spec, level)
        if vector is None:
            notes.append(str(why))
        else:
            rows.append(vector)
    out["note"] = "; ".join(dict.fromkeys(notes)) or None
    if not rows or isinstance(joint.fit, str):
        return out
    test = joint.fit.wald_test(np.vstack(rows))
    return out | {
        "wald_f": test.f,
        "wald_df1": test.df1,
        "wald_df2": test.df2,
        "wald_p_value": test.p,
    }


def joint_format(joint: JointFit) -> str | None:
    return None if isinstance(joint.fit, str) or joint.fit.robust is None else "rank"


# --- modes ---------------------------------------------------------------------------------------
def estimate_mode_differences(
    frames: AnalysisFrames,
    prereg: Preregistration,
    *,
    arm: str = PRIMARY,
    pre_registered: Status | bool = False,
    per_mode: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The MODE_DIFFERENCES table: each planned contrast in each mode minus the same contrast
    in the cell's first mode (alphabetical: text before tool, json before tool), from one
    joint lmm of the cell with mode x group interactions (:func:`fit_joint`): the modes share
    the name pairs, profiles and bundles, so the difference's SE comes from the one fit.
    ``se_independent`` is the SE that differencing two per-mode fits would give, which
    ignores the sharing (``per_mode``: the mode rows of :func:`contrasts_by`)."""
    if per_mode is None:
        per_mode = contrasts_by(frames, prereg, "mode", arm=arm, pre_registered=pre_registered)
    per_mode = per_mode.filter((pl.col("by") == "mode") & (pl.col("estimator") == FAMILY_ESTIMATOR))
    se_of = {(r["contrast_id"], r["level"]): r["se"] for r in per_mode.iter_rows(named=True)}
    designs = _cell_designs(frames, prereg, arm)
    labels = _labels(_reason("mode difference", pre_registered, arm))
    records = []
    for (domain, fmt), planned in family_cells(prereg).items():
        design = designs[(domain, fmt)]
        joint = fit_joint(design, "mode", _dimensions(planned))
        modes = sorted(
            {n[len("mode[") : -1] for n in design.names if n.startswith("mode[")}
            | set(_present_modes(frames.arm(arm), domain, fmt))
        )
        if not joint.levels:
            continue
        baseline = next(m for m in modes if m not in joint.levels)
        for c in planned:
            for level in joint.levels:
                vector, why = joint.difference(c, level)
                if vector is None or isinstance(joint.fit, str):
                    e = Estimate(np.nan, np.nan, why)
                else:
                    test = joint.fit.test(vector)
                    e = Estimate(test.estimate, test.se, df=test.df)
                a, b = se_of.get((c.id, level)), se_of.get((c.id, baseline))
                independent = float(np.hypot(a, b)) if a is not None and b is not None else None
                records.append(
                    {**_identity(c), "modes": f"{level}-{baseline}"}
                    | {
                        "estimator": FAMILY_ESTIMATOR,
                        "unit": joint.unit,
                        "inference": "joint lmm, mode x group; "
                        + FITTERS[FAMILY_ESTIMATOR].inference[fmt],
                        "n_obs": joint.n_obs,
                        "note": e.reason,
                        **_interval(e, prereg.alpha, joint.outcome_sd),
                        "se_independent": independent,
                    }
                    | labels
                )
    return pl.DataFrame(records, schema=dict(MODE_DIFFERENCES_SCHEMA))


def _present_modes(frames: AnalysisFrames, domain: str, fmt: str) -> list[str]:
    rows = cell_rows(frames, domain, fmt)
    return [str(m) for m in rows["mode"].unique().to_list() if m is not None]


# --- race x gender ----------------------------------------------------------------------------
def estimate_intersectional(
    frames: AnalysisFrames,
    prereg: Preregistration,
    *,
    arm: str = PRIMARY,
    pre_registered: Status | bool = False,
) -> pl.DataFrame:
    """The INTERSECTIONAL table: per domain x format of the family, each race x gender cell
    against White men (seven rows; White men are the reference) from one lmm with race x
    gender interactions (:func:`with_interactions` of gender's dummy with the race dummies),
    and the joint Wald test that every race x gender interaction is zero (the race contrasts
    are the same for women and men; ``kind`` ``"interaction"``)."""
    designs = _cell_designs(frames, prereg, arm)
    labels = _labels(_reason("intersectional contrast", pre_registered, arm))
    reference = " ".join(REFERENCE_CELL)
    records = []
    for domain, fmt in family_cells(prereg):
        design = designs[(domain, fmt)]
        if design.n == 0:
            continue
        keep = informative_rows(design, ("race", "gender"))
        part = design if keep.all() else design.subset(keep)
        female = f"gender[{GENDERS[0]}]"
        augmented, _ = with_interactions(part, "gender", ("race",))
        fit = fit_lmm(augmented)
        names = [] if isinstance(fit, str) else fit.names
        sd = _outcome_sd(design)
        base = {
            "domain": domain, "format": fmt, "reference": reference,
            "estimator": FAMILY_ESTIMATOR, "unit": design.unit, "n_obs": part.n,
            "inference": FITTERS[FAMILY_ESTIMATOR].inference[fmt],
            "f_value": None, "df1": None,
        }  # fmt: skip
        for race in RACES:
            for gender in GENDERS:
                if (race, gender) == REFERENCE_CELL:
                    continue
                wanted = [f"race[{race}]"] if race != REFERENCE_CELL[0] else []
                if gender != REFERENCE_CELL[1]:
                    wanted.append(female)
                    if race != REFERENCE_CELL[0]:
                        wanted.append(f"{female}:race[{race}]")
                e = _combination(fit, names, wanted)
                records.append(
                    base | {"kind": "cell", "race": race, "gender": gender, "note": e.reason}
                    | _interval(e, prereg.alpha, sd) | labels
                )  # fmt: skip
        products = [n for n in names if n.startswith(f"{female}:race[")]
        row = base | {"kind": "interaction", "race": None, "gender": None} | labels
        row |= dict.fromkeys(("estimate", "se", "ci_low", "ci_high", "estimate_sd", "se_sd",
                              "ci_low_sd", "ci_high_sd"), None)  # fmt: skip
        row |= {"outcome_sd": sd, "note": fit if isinstance(fit, str) else None}
        if products and not isinstance(fit, str):
            matrix = np.vstack([np.eye(len(names))[names.index(n)] for n in products])
            test = fit.wald_test(matrix)
            row |= {"f_value": test.f, "df1": test.df1, "df": test.df2, "p_value": test.p}
        else:
            row |= {"df": None, "p_value": None}
            row["note"] = row["note"] or "no race x gender variation in the cell"
        records.append(row)
    return pl.DataFrame(records, schema=dict(INTERSECTIONAL_SCHEMA))


def _combination(fit: LmmFit | str, names: Sequence[str], wanted: Sequence[str]) -> Estimate:
    if isinstance(fit, str):
        return Estimate(np.nan, np.nan, fit)
    missing = [n for n in wanted if n not in names]
    if missing:
        why = fit.dropped.get(missing[0], "no row in the cell")
        return Estimate(np.nan, np.nan, f"{missing[0]}: {why}")
    vector = np.zeros(len(names))
    for n in wanted:
        vector[list(names).index(n)] = 1.0
    test = fit.test(vector)
    return Estimate(test.estimate, test.se, df=test.df)
