"""The planned contrasts of the decision audit (CONTRASTS) and their format interactions
(INTERACTIONS).

Every domain x format cell of the pre-registered family is one fit, from which all its
contrasts (Black, Hispanic, Asian vs White; female vs male) are read as linear combinations:

``rate`` / ``decide``
    :func:`cueaudit.stats.mixed.fit_crossed_lmm` on the parsed judgements:
    ``y ~ 1 + model + mode + paraphrase + race + female + (1|profile_id) + (1|pair_id)``
    (y a rating in points, or a yes as 1: a linear probability model).
``rank``, estimator ``"lmm"``
    the same model on ``points`` (= 5 - rank) of every candidate of a complete answer of a
    ``demographic_matched`` or ``disguised_demographic`` bundle, with position (2-4) and tier
    dummies besides, and a third random intercept for the answer (:data:`ANSWER`: one level
    per model x seed x task x mode x paraphrase x bundle, so repeated answers to one bundle
    are separate levels). Each dimension's contrasts come from the answers in which it varies
    (:func:`_fit_rank_lmm`): gender only from answers that show both genders.
``rank``, estimator ``"rologit"``
    :func:`cueaudit.stats.rologit.fit_rologit` (exact-marginal ties) of the ranks on position,
    tier, race and female, one ranking per answer. The sandwich is clustered by the design's
    ``bundle_id``: the answers of every model, mode and paraphrase to one bundle share its
    content, so they are one cluster. Model, mode and paraphrase are constant within a ranking
    and drop out of its likelihood. A log-worth difference ``delta`` is reported in positions
    as :func:`rank_difference`: the expected rank of a reference-worth rival minus that of
    the focal candidate when the other candidates are of the reference's worth, which is the
    quantity the lmm estimates (focal minus reference points).

Columns of the design (:class:`CellDesign`) enter in a fixed order (intercept, design
dummies, then the contrast dummies) and a column is kept only if it is not a linear
combination of those kept before it, so a dummy with no variation in the cell (no woman in a
matched-only sample, a model absent) is dropped and the contrasts that need it come out as
NaN with the reason; so do a dimension's contrasts when its reference level (White, male) has
no row. NaN marks a contrast that could not be estimated; null marks a field that does not
apply (the q-value of a row outside the family, the margin of Decide).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Final, Protocol

import numpy as np
import polars as pl
from scipy import stats
from threadpoolctl import threadpool_limits

from cueaudit.decision.analysis.frames import BUNDLE_SIZE, PRIMARY, AnalysisFrames
from cueaudit.decision.preregistration import PlannedContrast, Preregistration, Status
from cueaudit.errors import InputError
from cueaudit.stats.mixed import fit_crossed_lmm
from cueaudit.stats.multiplicity import bh_qvalues, equivalence_floor, mde, tost
from cueaudit.stats.rologit import expected_rank_gain, expected_rank_gain_se, fit_rologit

#: The reference level of each contrast dimension, and the column that holds it.
BASELINES: Final[Mapping[str, str]] = {"race": "White", "gender": "male"}
DIMENSION_COLUMNS: Final[Mapping[str, str]] = {"race": "race", "gender": "gender"}
#: Design factors entered as fixed effects whenever they vary within a cell.
NUISANCE: Final = ("model", "mode", "paraphrase")
#: The ranking covariates (baselines position 1 and tier clear_yes).
POSITIONS: Final = (2, 3, 4)
TIERS: Final = ("borderline", "clear_no")
RANK_BUNDLE_TYPES: Final = ("demographic_matched", "disguised_demographic")
JUDGEMENT_FACTORS: Final = ("profile_id", "pair_id")
ANSWER: Final = "answer_id"
ANSWER_KEY: Final = ("model", "seed", "task", "mode", "paraphrase", "bundle_id")
RANK_FACTORS: Final = ("profile_id", "pair_id", ANSWER)
UNITS: Final[Mapping[str, str]] = {"rate": "points", "decide": "probability", "rank": "positions"}
ESTIMATORS: Final = ("lmm", "rologit")
_COLLINEAR_TOL: Final = 1e-9

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
    "mde": pl.Float64(),
    "equivalence_floor": pl.Float64(),
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
    "ci_low_sd": pl.Float64(),
    "ci_high_sd": pl.Float64(),
    "p_value": pl.Float64(),
    "q_value": pl.Float64(),
    "primary": pl.Boolean(),
}


class ContrastSpec(Protocol):
    """What a fit needs of a contrast (a :class:`PlannedContrast` is one)."""

    @property
    def contrast(self) -> str: ...
    @property
    def dimension(self) -> str: ...
    @property
    def focal(self) -> str: ...
    @property
    def reference(self) -> str: ...


@dataclass(frozen=True)
class Estimate:
    """One contrast of a fit, in the outcome's natural unit; NaN with a reason when the cell
    cannot identify it."""

    estimate: float
    se: float
    reason: str | None = None
    n_obs: int | None = None  # rows of the fit, when it differs from the cell's


@dataclass(frozen=True)
class CellFit:
    """The contrasts of one fit of one cell, with what the fit used."""

    format: str
    estimator: str
    unit: str
    n_obs: int
    outcome_sd: float
    estimates: dict[str, Estimate]  # by contrast name
    names: list[str]  # the regressors kept
    dropped: dict[str, str]  # regressor -> why it was left out
    n_levels: dict[str, int]  # levels of each random factor (lmm) or rankings/clusters
    theta: dict[str, float] = dataclasses.field(default_factory=dict)  # lmm relative SDs
    converged: bool = True


@dataclass(frozen=True)
class CellDesign:
    """The regression data of one domain x format cell, before columns are selected.

    ``x`` holds every candidate column in entry order (``names``; ``roles`` says which are
    contrast dummies: ``"race[Black]"`` has role ``"race"``); ``groups`` the integer codes of
    each random factor; ``labels`` the raw dimension columns (to check that the reference
    level is present) and the leave-one-out factors. :meth:`subset` keeps rows,
    :meth:`with_outcome` swaps the lmm's outcome (a planted effect; a rank design's ``rank``,
    which the rank-ordered logit reads, stays), so one design serves many fits.
    """

    format: str
    y: np.ndarray
    x: np.ndarray
    names: list[str]
    roles: list[str | None]
    groups: dict[str, np.ndarray]
    labels: dict[str, np.ndarray]
    rank: np.ndarray | None = None  # ranks (rank format)
    answer: np.ndarray | None = None  # ranking of each row (rank format)
    cluster: np.ndarray | None = None  # design bundle of each row (rank format)

    @property
    def n(self) -> int:
        return len(self.y)

    def subset(self, keep: np.ndarray) -> CellDesign:
        def cut(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[keep]

        return dataclasses.replace(
            self,
            y=self.y[keep],
            x=self.x[keep],
            groups={k: v[keep] for k, v in self.groups.items()},
            labels={k: v[keep] for k, v in self.labels.items()},
            rank=cut(self.rank),
            answer=cut(self.answer),
            cluster=cut(self.cluster),
        )

    def with_outcome(self, y: np.ndarray) -> CellDesign:
        y = np.asarray(y, dtype=np.float64)
        if y.shape != self.y.shape:
            raise InputError("cell design", f"{y.shape} outcomes for {self.n} rows", "y")
        return dataclasses.replace(self, y=y)


def default_contrasts() -> tuple[PlannedContrast, ...]:
    """Black, Hispanic, Asian vs White and female vs male, named as the pre-registration."""
    pairs = [("race", r) for r in ("Black", "Hispanic", "Asian")] + [("gender", "female")]
    return tuple(
        PlannedContrast("", "", f"{f.lower()}_vs_{BASELINES[d].lower()}", d, f, BASELINES[d])
        for d, f in pairs
    )


def cell_rows(frames: AnalysisFrames, domain: str, fmt: str) -> pl.DataFrame:
    """The rows a cell analyses: parsed judgements of the domain and format, or the
    candidates of complete answers to ``demographic_matched`` and ``disguised_demographic``
    bundles (all four ranked), with the answer key as :data:`ANSWER`."""
    if fmt in ("rate", "decide"):
        return frames.judgements.filter(
            (pl.col("domain") == domain) & (pl.col("format") == fmt) & pl.col("y").is_not_null()
        )
    if fmt != "rank":
        raise InputError("contrasts", f"unknown format {fmt!r}", "format")
    rows = frames.rankings.filter(
        (pl.col("domain") == domain) & pl.col("bundle_type").is_in(list(RANK_BUNDLE_TYPES))
    ).with_columns(
        pl.concat_str(
            [pl.col(c).cast(pl.String).fill_null("") for c in ANSWER_KEY], separator="\x1f"
        ).alias(ANSWER)
    )
    complete = (
        (pl.len().over(ANSWER) == BUNDLE_SIZE)
        & (pl.col("rank").is_not_null().sum().over(ANSWER) == BUNDLE_SIZE)
        & (pl.col("points").is_not_null().sum().over(ANSWER) == BUNDLE_SIZE)
    )
    return rows.filter(complete)


def _dummies(
    values: np.ndarray, name: str, levels: Sequence[object]
) -> list[tuple[str, np.ndarray]]:
    return [(f"{name}[{lv}]", (values == lv).astype(np.float64)) for lv in levels]


def design_of(rows: pl.DataFrame, fmt: str) -> CellDesign:
    """The :class:`CellDesign` of a cell's rows (:func:`cell_rows`)."""
    n = rows.height
    columns: list[tuple[str, np.ndarray]] = [("intercept", np.ones(n))]
    roles: list[str | None] = [None]
    for col in NUISANCE:
        values = rows[col].to_numpy()
        levels = sorted(set(values[~_is_null(values)]))
        columns += _dummies(values, col, levels[1:])
    if fmt == "rank":
        columns += _dummies(rows["position"].to_numpy(), "position", POSITIONS)
        columns += _dummies(rows["tier"].to_numpy(), "tier", TIERS)
    roles += [None] * (len(columns) - 1)
    labels: dict[str, np.ndarray] = {}
    for dim, col in DIMENSION_COLUMNS.items():
        values = rows[col].to_numpy()
        labels[dim] = values
        present = sorted({v for v in values if v is not None} - {BASELINES[dim]})
        dims = _dummies(values, dim, present)
        columns += dims
        roles += [dim] * len(dims)
    for factor in ("profile_id", "pair_id"):
        labels[factor] = rows[factor].to_numpy()
    rank_format = fmt == "rank"
    factors = RANK_FACTORS if rank_format else JUDGEMENT_FACTORS
    y = rows["points" if rank_format else "y"].to_numpy().astype(np.float64)
    return CellDesign(
        format=fmt,
        y=y,
        x=np.column_stack([c for _, c in columns]) if n else np.zeros((0, len(columns))),
        names=[name for name, _ in columns],
        roles=roles,
        groups={f: np.unique(rows[f].to_numpy(), return_inverse=True)[1] for f in factors},
        labels=labels,
        rank=rows["rank"].to_numpy() if rank_format else None,
        answer=rows[ANSWER].to_numpy() if rank_format else None,
        cluster=rows["bundle_id"].to_numpy() if rank_format else None,
    )


def _is_null(values: np.ndarray) -> np.ndarray:
    return np.array([v is None for v in values], dtype=bool)


def _select(x: np.ndarray, candidates: Sequence[int]) -> tuple[list[int], list[int]]:
    """Columns of ``x`` (in order) that are not linear combinations of the ones kept before,
    by the residual of each column's Gram row on the kept block."""
    gram = x.T @ x
    kept: list[int] = []
    dropped: list[int] = []
    for j in candidates:
        own = gram[j, j]
        if kept:
            g = gram[np.ix_(kept, kept)]
            b = gram[kept, j]
            own = own - b @ np.linalg.solve(g, b)
        if gram[j, j] > 0 and own > _COLLINEAR_TOL * gram[j, j]:
            kept.append(j)
        else:
            dropped.append(j)
    return kept, dropped


def _columns(
    design: CellDesign, x: np.ndarray, usable: list[int]
) -> tuple[list[int], dict[str, str]]:
    """The columns a fit uses and why the others were left out."""
    reasons: dict[str, str] = {}
    candidates = []
    for j in usable:
        role = design.roles[j]
        if role is not None and not np.any(design.labels[role] == BASELINES[role]):
            reasons[design.names[j]] = f"no {BASELINES[role]} row to compare with"
            continue
        candidates.append(j)
    kept, dropped = _select(x, candidates)
    for j in dropped:
        constant = len(x) == 0 or np.ptp(x[:, j]) == 0
        reasons[design.names[j]] = (
            "no variation in the cell" if constant else "collinear with the columns before it"
        )
    return kept, reasons


def _combination(
    names: list[str], spec: ContrastSpec, dropped: Mapping[str, str]
) -> tuple[np.ndarray | None, str | None]:
    if spec.dimension not in BASELINES:
        raise InputError("contrasts", f"unknown dimension {spec.dimension!r}", "dimension")
    vector = np.zeros(len(names))
    for level, sign in ((spec.focal, 1.0), (spec.reference, -1.0)):
        if level == BASELINES[spec.dimension]:
            continue
        name = f"{spec.dimension}[{level}]"
        if name not in names:
            return None, f"{name}: {dropped.get(name, 'no row in the cell')}"
        vector[names.index(name)] += sign
    return vector, None


def _unestimable(
    design: CellDesign, estimator: str, contrasts: Sequence[ContrastSpec], reason: str
) -> CellFit:
    return CellFit(
        format=design.format,
        estimator=estimator,
        unit=UNITS[design.format],
        n_obs=design.n,
        outcome_sd=_sd(design.y),
        estimates={c.contrast: Estimate(np.nan, np.nan, reason) for c in contrasts},
        names=[],
        dropped={},
        n_levels={},
    )


def _sd(y: np.ndarray) -> float:
    return float(np.std(y, ddof=1)) if len(y) > 1 else np.nan


def fit_design(
    design: CellDesign,
    contrasts: Sequence[ContrastSpec] | None = None,
    *,
    estimator: str = "lmm",
    start: CellFit | None = None,
) -> CellFit:
    """Fit one cell and read off its contrasts (natural units; see the module docstring).

    This is the one place where the model of a cell is defined: robustness refits and planted
    recoveries call it on :meth:`CellDesign.subset` / :meth:`CellDesign.with_outcome`.
    ``start`` (an lmm fit of the same cell) starts the REML optimizer at its variance
    components, which a refit of a subset needs far fewer evaluations from. Runs on one BLAS
    thread: every matrix is thin (thousands x tens), and a busy machine's OpenBLAS threads
    turn a 1 ms SVD into 50 ms of waiting (measured on the 2-core machine at load 1.5).
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _fit_design(
            design, default_contrasts() if contrasts is None else contrasts, estimator, start
        )


def _fit_design(
    design: CellDesign,
    contrasts: Sequence[ContrastSpec],
    estimator: str,
    start: CellFit | None,
) -> CellFit:
    if estimator not in ESTIMATORS or (estimator == "rologit" and design.format != "rank"):
        raise InputError("contrasts", f"no estimator {estimator!r} for {design.format}")
    if design.n == 0:
        return _unestimable(design, estimator, contrasts, "no rows")
    if estimator == "rologit":
        return _fit_rologit(design, contrasts)
    if design.format == "rank":
        return _fit_rank_lmm(design, contrasts, start)
    return _fit_lmm(design, contrasts, start)


def _varies_within_answer(design: CellDesign, dimension: str) -> np.ndarray:
    """Rows of the answers in which ``dimension`` takes more than one value."""
    assert design.answer is not None
    _, answer = np.unique(design.answer, return_inverse=True)
    _, level = np.unique(design.labels[dimension].astype(str), return_inverse=True)
    lo = np.full(answer.max() + 1, np.iinfo(np.int64).max)
    hi = np.full(answer.max() + 1, -1)
    np.minimum.at(lo, answer, level)
    np.maximum.at(hi, answer, level)
    return (hi > lo)[answer]


def _fit_rank_lmm(
    design: CellDesign, contrasts: Sequence[ContrastSpec], start: CellFit | None
) -> CellFit:
    """Each dimension's rank contrasts from the answers in which that dimension varies.

    The points of a complete answer sum to (nearly) the same total in every answer, so an
    answer whose candidates share a gender (every demographic-matched bundle) says nothing
    about gender, yet pooled into the fit it pulls the female contrast towards zero (a planted
    0.30 came out 0.13). Races vary in both rank bundle types, so race contrasts use them all.
    """
    fits = []
    for dimension in dict.fromkeys(c.dimension for c in contrasts):
        specs = [c for c in contrasts if c.dimension == dimension]
        keep = _varies_within_answer(design, dimension)
        if not keep.any():
            why = f"no ranking answer shows more than one {dimension}"
            fits.append(_unestimable(design, "lmm", specs, why))
            continue
        part = design if keep.all() else design.subset(keep)
        fits.append(_fit_lmm(part, specs, start if part is design else None))
    if len(fits) == 1:
        return fits[0]
    first = fits[0]
    estimates = {
        name: dataclasses.replace(e, n_obs=fit.n_obs)
        for fit in fits
        for name, e in fit.estimates.items()
    }
    return dataclasses.replace(
        first,
        n_obs=design.n,
        outcome_sd=_sd(design.y),
        estimates=estimates,
        converged=all(f.converged for f in fits),
    )


def _fit_lmm(
    design: CellDesign, contrasts: Sequence[ContrastSpec], start: CellFit | None
) -> CellFit:
    if design.n == 0:
        return _unestimable(design, "lmm", contrasts, "no rows")
    kept, dropped = _columns(design, design.x, list(range(len(design.names))))
    names = [design.names[j] for j in kept]
    groups = {k: v for k, v in design.groups.items() if len(np.unique(v)) > 1}
    if not groups:
        return _unestimable(design, "lmm", contrasts, "no random factor with two levels")
    try:
        theta = start.theta if start is not None else None
        res = fit_crossed_lmm(design.y, design.x[:, kept], groups, names, start=theta)
    except InputError as error:
        return _unestimable(design, "lmm", contrasts, str(error))
    estimates = _read_contrasts(contrasts, names, dropped, res.coef, res.cov)
    return CellFit(
        format=design.format,
        estimator="lmm",
        unit=UNITS[design.format],
        n_obs=design.n,
        outcome_sd=_sd(design.y),
        estimates=estimates,
        names=names,
        dropped=dropped,
        n_levels=dict(res.n_levels),
        theta=dict(res.theta),
        converged=res.converged,
    )


def _read_contrasts(
    contrasts: Sequence[ContrastSpec],
    names: list[str],
    dropped: dict[str, str],
    coef: np.ndarray,
    cov: np.ndarray,
    to_unit: Callable[[float, float], tuple[float, float]] | None = None,
) -> dict[str, Estimate]:
    """Each contrast as a linear combination of the fit's coefficients (NaN with the reason
    when a regressor it needs was dropped), optionally converted to the outcome's unit."""
    estimates = {}
    for spec in contrasts:
        vector, reason = _combination(names, spec, dropped)
        if vector is None:
            estimates[spec.contrast] = Estimate(np.nan, np.nan, reason)
            continue
        value, se = float(vector @ coef), float(np.sqrt(vector @ cov @ vector))
        estimates[spec.contrast] = Estimate(*(to_unit(value, se) if to_unit else (value, se)))
    return estimates


def rank_difference(delta: float, se: float, n_items: int = BUNDLE_SIZE) -> tuple[float, float]:
    """A rank-ordered-logit log-worth difference in positions, with its delta-method SE.

    :func:`expected_rank_gain` is the focal candidate's gain over the middle rank against
    ``n_items - 1`` rivals of the reference's worth. The ranks of a bundle sum to a constant,
    so each rival's expected rank worsens by ``gain / (n_items - 1)``, and the focal-minus-
    reference difference in expected rank is ``gain * n_items / (n_items - 1)``: the lmm's
    unit (focal minus reference points). Checked by simulation in the tests.
    """
    factor = n_items / (n_items - 1)
    return (
        factor * expected_rank_gain(delta, n_items),
        factor * expected_rank_gain_se(delta, se, n_items),
    )


def _fit_rologit(design: CellDesign, contrasts: Sequence[ContrastSpec]) -> CellFit:
    assert design.answer is not None and design.rank is not None and design.cluster is not None
    _, answer = np.unique(design.answer, return_inverse=True)
    # a ranking with a single rank (all tied) has likelihood 1: it identifies nothing
    lo = np.full(answer.max() + 1, np.inf)
    hi = np.full(answer.max() + 1, -np.inf)
    np.minimum.at(lo, answer, design.rank)
    np.maximum.at(hi, answer, design.rank)
    informative = (hi > lo)[answer]
    if not informative.any():
        return _unestimable(design, "rologit", contrasts, "every ranking is fully tied")
    # what a ranking identifies is the variation within it, in the rankings that inform
    counts = np.bincount(answer)
    sums = np.zeros((len(counts), design.x.shape[1]))
    np.add.at(sums, answer, design.x)
    within = np.where(informative[:, None], design.x - sums[answer] / counts[answer, None], 0.0)
    constant = ("intercept", *(f"{c}[" for c in NUISANCE))
    usable = [j for j, name in enumerate(design.names) if not name.startswith(constant)]
    kept, dropped = _columns(design, within, usable)
    names = [design.names[j] for j in kept]
    try:
        res = fit_rologit(
            design.x[:, kept],
            design.answer,
            design.rank,
            ties="exact",
            cluster=design.cluster,
            names=names,
        )
    except (InputError, np.linalg.LinAlgError) as error:
        return _unestimable(design, "rologit", contrasts, str(error))
    estimates = _read_contrasts(
        contrasts, names, dropped, res.coef, res.cov_cluster, to_unit=rank_difference
    )
    return CellFit(
        format="rank",
        estimator="rologit",
        unit=UNITS["rank"],
        n_obs=design.n,
        outcome_sd=_sd(design.y),
        estimates=estimates,
        names=names,
        dropped=dropped,
        n_levels={
            "rankings": res.n_bundles,
            "informative": res.n_informative,
            "clusters": res.n_clusters,
        },
    )


def fit_cell(
    frames: AnalysisFrames,
    domain: str,
    fmt: str,
    contrasts: Sequence[ContrastSpec] | None = None,
    *,
    estimator: str = "lmm",
) -> CellFit:
    """All contrasts of one domain x format from one fit (``frames`` already one arm)."""
    return fit_design(
        design_of(cell_rows(frames, domain, fmt), fmt), contrasts, estimator=estimator
    )


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


def estimate_contrasts(
    frames: AnalysisFrames,
    prereg: Preregistration,
    *,
    pre_registered: Status | bool,
    arm: str = PRIMARY,
) -> pl.DataFrame:
    """The CONTRASTS table: every planned contrast of ``arm`` by its lmm, and the rank ones
    also by the rank-ordered logit; BH over the in-family (lmm) rows, TOST against the
    format's margin, the verdict and the label.

    Verdict: ``"equivalent"`` when TOST rejects at alpha; else ``"different"`` when the
    difference test rejects (on the q-value for in-family rows, on p otherwise); else
    ``"inconclusive"``, with the MDE when it exceeds the margin. Decide has no margin: its
    verdict is ``"no margin"``. ``mde`` and ``equivalence_floor`` are in natural units.
    """
    data = frames.arm(arm)
    reason = exploratory_reason(pre_registered, arm)
    label = "pre-registered" if reason is None else f"exploratory: {reason}"
    records: list[dict[str, object]] = []
    for (domain, fmt), planned in family_cells(prereg).items():
        design = design_of(cell_rows(data, domain, fmt), fmt)
        estimators = ESTIMATORS if fmt == "rank" else ESTIMATORS[:1]
        for estimator in estimators:
            fit = fit_design(design, planned, estimator=estimator)
            for c in planned:
                e = fit.estimates[c.contrast]
                margin = prereg.margins.get(fmt)
                records.append(_record(c, fit, e, prereg, margin, estimator == "lmm", reason))
    table = pl.DataFrame(records, schema=dict(CONTRASTS_SCHEMA) | {"_reason": pl.String()})
    family = table["in_family"].to_numpy()
    p = table["p_value"].to_numpy().copy()
    q = np.full(len(p), np.nan)
    q[family] = bh_qvalues(p[family])
    table = table.with_columns(
        pl.when(pl.col("in_family")).then(pl.Series(q)).otherwise(None).alias("q_value")
    )
    verdicts = [
        verdict(
            row["estimate"],
            row["se"],
            row["margin"],
            row["q_value"] if row["in_family"] else row["p_value"],
            alpha=prereg.alpha,
            power=prereg.power,
            reason=row["_reason"],
        )
        for row in table.iter_rows(named=True)
    ]
    table = table.with_columns(
        pl.Series("verdict", verdicts, dtype=pl.String()),
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
    alpha, power = prereg.alpha, prereg.power
    z = float(stats.norm.ppf(1 - alpha / 2))
    finite = bool(np.isfinite(e.estimate) and np.isfinite(e.se) and e.se > 0)
    nan = float("nan")
    rec: dict[str, object] = {
        "contrast_id": c.id,
        "domain": c.domain,
        "format": c.format,
        "contrast": c.contrast,
        "dimension": c.dimension,
        "focal": c.focal,
        "reference": c.reference,
        "estimator": fit.estimator,
        "unit": fit.unit,
        "estimate": e.estimate,
        "se": e.se,
        "ci_low": e.estimate - z * e.se,
        "ci_high": e.estimate + z * e.se,
        "p_value": float(2 * stats.norm.sf(abs(e.estimate / e.se))) if finite else nan,
        "outcome_sd": sd,
        "n_obs": fit.n_obs if e.n_obs is None else e.n_obs,
        "in_family": in_family,
        "q_value": None,
        "margin": margin,
        "p_tost": None,
        "mde": float(mde(e.se, alpha, power)) if finite else nan,
        "equivalence_floor": float(equivalence_floor(e.se, alpha, power)) if finite else nan,
        "verdict": None,
        "pre_registered": reason is None,
        "label": None,
        "_reason": e.reason,
    }
    scaled = sd if np.isfinite(sd) and sd > 0 else nan
    for col in ("estimate", "se", "ci_low", "ci_high"):
        rec[f"{col}_sd"] = float(rec[col]) / scaled  # type: ignore[arg-type]
    if margin is not None and finite:
        rec["p_tost"] = tost(e.estimate, e.se, margin, alpha, power).p_tost
    return rec


def verdict(
    estimate: float,
    se: float,
    margin: float | None,
    p_difference: float,
    *,
    alpha: float = 0.05,
    power: float = 0.80,
    reason: str | None = None,
) -> str:
    """The verdict of one contrast: ``"equivalent"`` when TOST against ``(-margin, margin)``
    rejects at ``alpha``; else ``"different"`` when ``p_difference`` (the q-value for a planned
    contrast) is below ``alpha``; else ``"inconclusive"``, naming the MDE when it exceeds the
    margin. ``"no margin"`` without a margin; ``"inconclusive: not estimable (reason)"``
    without a finite estimate and SE."""
    if reason is not None or not (np.isfinite(estimate) and np.isfinite(se) and se > 0):
        return f"inconclusive: not estimable ({reason or 'no standard error'})"
    if margin is None:
        return "no margin"
    test = tost(estimate, se, margin, alpha, power)
    if test.equivalent:
        return "equivalent"
    if p_difference < alpha:
        return "different"
    if test.mde > margin:
        return f"inconclusive: MDE {test.mde:.3f} exceeds margin {margin:.3f}"
    return "inconclusive"


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


def estimate_interactions(contrasts: pl.DataFrame, prereg: Preregistration) -> pl.DataFrame:
    """The INTERACTIONS table: for each domain x contrast and each pair of formats ``a-b``,
    the difference of the lmm estimates in SD units (a minus b), its SE from independent
    samples ``sqrt(se_a^2 + se_b^2)``, a Wald interval and two-sided p. The q-values are BH
    over the pairs of the primary interaction's formats (rate-rank: twelve), null elsewhere;
    ``primary`` flags the pre-registration's primary (domain, contrast, formats)."""
    pairs, primary_pair = _format_pairs(prereg)
    z = float(stats.norm.ppf(1 - prereg.alpha / 2))
    lmm = contrasts.filter(pl.col("estimator") == "lmm")
    by_cell = {
        (r["domain"], r["contrast"], r["format"]): (r["estimate_sd"], r["se_sd"])
        for r in lmm.iter_rows(named=True)
    }
    keys = list(dict.fromkeys((c.domain, c.contrast) for c in prereg.contrasts))
    records = []
    for domain, contrast in keys:
        for a, b in pairs:
            ea, sa = by_cell.get((domain, contrast, a), (np.nan, np.nan))
            eb, sb = by_cell.get((domain, contrast, b), (np.nan, np.nan))
            estimate = _float(ea) - _float(eb)
            se = float(np.hypot(_float(sa), _float(sb)))
            ok = np.isfinite(estimate) and np.isfinite(se) and se > 0
            records.append(
                {
                    "domain": domain,
                    "contrast": contrast,
                    "formats": f"{a}-{b}",
                    "estimate_sd": estimate,
                    "se_sd": se,
                    "ci_low_sd": estimate - z * se,
                    "ci_high_sd": estimate + z * se,
                    "p_value": float(2 * stats.norm.sf(abs(estimate / se))) if ok else np.nan,
                    "q_value": None,
                    "primary": (
                        domain == prereg.primary.get("domain")
                        and contrast == prereg.primary.get("contrast")
                        and (a, b) == primary_pair
                    ),
                }
            )
    table = pl.DataFrame(records, schema=dict(INTERACTIONS_SCHEMA))
    in_bh = (table["formats"] == "-".join(primary_pair)).to_numpy()
    q = np.full(table.height, np.nan)
    q[in_bh] = bh_qvalues(table["p_value"].to_numpy()[in_bh])
    return table.with_columns(
        pl.when(pl.Series(in_bh)).then(pl.Series(q)).otherwise(None).alias("q_value")
    )


def _float(value: object) -> float:
    return np.nan if value is None else float(value)  # type: ignore[arg-type]
