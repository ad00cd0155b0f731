"""The planned contrasts of the decision audit (CONTRASTS), their format interactions
(INTERACTIONS) and the placebo cell's false-positive check (PLACEBO).

Every domain x format cell of the pre-registered family is one fit, from which all its
contrasts (Black, Hispanic, Asian vs White; female vs male) are read as linear combinations.
The estimands (stated in ``docs/decision-audit-design.md``):

``rate`` / ``decide``
    The focal-minus-reference difference in the expected rating (points) or in the
    probability of a yes, over every profile x name pair x model x mode x paraphrase of the
    design. :func:`cueaudit.stats.mixed.fit_crossed_lmm` on the parsed judgements:
    ``y ~ 1 + model + mode + paraphrase + race + female + (1|profile_id) + (1|pair_id)``
    (a yes as 1: a linear probability model), t tests with Satterthwaite's degrees of freedom
    (lmerTest's). On the paper-sized simulator the model-based SE equals the estimates'
    empirical SD, with or without model x name-pair interactions.
``rank``, estimator ``"lmm"``
    The focal-minus-reference difference in expected rank points (positions gained, ``points =
    5 - mid-rank``) among candidates of **different content**: the candidates of every
    complete answer to a ``disguised_demographic`` bundle, the only type whose demographic
    varies across profiles of varying quality (:data:`RANK_BUNDLE_TYPES`). Matched bundles
    show one profile four times and are tied almost always (the paper: 100%), so pooled in they
    dilute the contrast towards zero (a planted 0.20 read as 0.14) by a share that differs by
    arm; they feed the tie and recognition analyses instead. The placebo bundles are their own
    cell (:func:`estimate_placebo`). The model is the rate one on ``points`` with position
    (2-4) and tier dummies and a third random intercept for the design bundle, as the paper
    specifies (profile, name pair, bundle); its variance is zero whenever an answer's points
    sum to 10 (mid-ranks), and the estimate equals that with an answer-level intercept. The SE
    is **CR2 by design bundle** with Satterthwaite degrees of freedom
    (:func:`cueaudit.stats.robust.cluster_robust`, the fit as working model): an answer's
    points sum to 10 (a -1/3 correlation no random intercept represents) and every model,
    mode and seed answers the same bundle, which made the model-based SE 12% too small on the
    simulator (null rejection 6.7-8.7% against 4.0-5.0% with CR2, 120-150 studies).
    Each dimension's contrasts come from the answers in which it varies (:func:`_fit_rank_lmm`).
``rank``, estimator ``"rologit"``
    :func:`cueaudit.stats.rologit.fit_rologit` (exact-marginal ties) of the ranks of the same
    answers on position, tier, race and female. The sandwich is CR1 clustered by design bundle
    (t with clusters - 1 degrees of freedom; CR2 is defined for linear estimators). Model, mode
    and paraphrase are constant within a ranking and drop out. A log-worth difference is
    reported in positions by :func:`rank_difference`, the lmm's unit. Fully tied answers carry
    no information here but count as zero differences in the lmm: the two estimands agree when
    no disguised answer is fully tied (the paper: none), and differ by that share otherwise.

Columns of the design (:class:`CellDesign`) enter in a fixed order (intercept, design
dummies, then the contrast dummies) and a column is kept only if it is not a linear
combination of those kept before it, so a dummy with no variation in the cell (no woman in a
single-gender sample, a model absent) is dropped and the contrasts that need it come out as
NaN with the reason; so do a dimension's contrasts when its reference level (White, male) has
no row. NaN marks a contrast that could not be estimated; null marks a field that does not
apply (the q-value of a row outside the family, the margin of Decide).

Every test, interval, BH q-value, TOST, MDE and equivalence floor uses the row's ``df``
(``inference`` says which): t quantiles and tails, not z.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Final, Protocol

import numpy as np
import polars as pl
from threadpoolctl import threadpool_limits

from cueaudit.decision.analysis.frames import BUNDLE_SIZE, POINTS_RULES, PRIMARY, AnalysisFrames
from cueaudit.decision.preregistration import PlannedContrast, Preregistration, Status
from cueaudit.errors import InputError
from cueaudit.stats.mixed import fit_crossed_lmm
from cueaudit.stats.multiplicity import bh_qvalues, equivalence_floor, mde, t_test, tost
from cueaudit.stats.robust import cluster_robust, cross_covariance, gls_weights, influence
from cueaudit.stats.rologit import expected_rank_gain, expected_rank_gain_se, fit_rologit

#: The reference level of each contrast dimension, and the column that holds it.
BASELINES: Final[Mapping[str, str]] = {"race": "White", "gender": "male"}
DIMENSION_COLUMNS: Final[Mapping[str, str]] = {"race": "race", "gender": "gender"}
#: Design factors entered as fixed effects whenever they vary within a cell.
NUISANCE: Final = ("model", "mode", "paraphrase")
#: The ranking covariates (baselines position 1 and tier clear_yes).
POSITIONS: Final = (2, 3, 4)
TIERS: Final = ("borderline", "clear_no")
#: The bundles a demographic rank contrast is estimated from (see the module docstring).
RANK_BUNDLE_TYPES: Final = ("disguised_demographic",)
#: The placebo cell: the same squares, pseudo-groups in place of race.
PLACEBO_BUNDLE_TYPES: Final = ("disguised_placebo",)
PLACEBO_DIMENSIONS: Final[Mapping[str, str]] = {"race": "pseudo_race"}
JUDGEMENT_FACTORS: Final = ("profile_id", "pair_id")
ANSWER: Final = "answer_id"
ANSWER_KEY: Final = ("model", "seed", "task", "mode", "paraphrase", "bundle_id")
BUNDLE: Final = "bundle_id"
RANK_FACTORS: Final = ("profile_id", "pair_id", BUNDLE)
UNITS: Final[Mapping[str, str]] = {"rate": "points", "decide": "probability", "rank": "positions"}
ESTIMATORS: Final = ("lmm", "rologit")
#: How each estimator's standard error and degrees of freedom are computed.
INFERENCE: Final[Mapping[tuple[str, str], str]] = {
    ("lmm", "judgement"): "t, Satterthwaite (lmm)",
    ("lmm", "rank"): "t, CR2 by bundle, Satterthwaite",
    ("rologit", "rank"): "t, CR1 by bundle, clusters - 1",
}
#: The factors two cells share, through which their estimates covary (interactions).
SHARED_FACTORS: Final = ("pair_id", "profile_id")
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
    """One contrast of a fit, in the outcome's natural unit, with the degrees of freedom of its
    t test (infinite: a z test); NaN with a reason when the cell cannot identify it.
    ``influence`` holds each row's term of the estimate's linear expansion (lmm fits with
    inference), which the interactions' cross-covariances add up."""

    estimate: float
    se: float
    reason: str | None = None
    n_obs: int | None = None  # rows of the fit, when it differs from the cell's
    df: float = np.inf
    influence: np.ndarray | None = dataclasses.field(default=None, repr=False, compare=False)
    rows: np.ndarray | None = dataclasses.field(default=None, repr=False, compare=False)


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
    inference: str = ""


@dataclass(frozen=True)
class CellDesign:
    """The regression data of one domain x format cell, before columns are selected.

    ``x`` holds every candidate column in entry order (``names``; ``roles`` says which are
    contrast dummies: ``"race[Black]"`` has role ``"race"``); ``groups`` the integer codes of
    each random factor; ``labels`` the raw dimension columns (to check that the reference
    level is present) and the shared factors (leave-one-out, interactions). :meth:`subset`
    keeps rows, :meth:`with_outcome` swaps the lmm's outcome, so one design serves many fits.
    ``unit`` is the outcome's unit as the tables print it (rank points name their scale).
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
    unit: str = ""

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


def cell_rows(
    frames: AnalysisFrames,
    domain: str,
    fmt: str,
    *,
    bundle_types: Sequence[str] = RANK_BUNDLE_TYPES,
) -> pl.DataFrame:
    """The rows a cell analyses: parsed judgements of the domain and format, or the
    candidates of complete answers (all four ranked) to bundles of ``bundle_types`` (by
    default the estimand's, :data:`RANK_BUNDLE_TYPES`), with the answer key as :data:`ANSWER`."""
    if fmt in ("rate", "decide"):
        return frames.judgements.filter(
            (pl.col("domain") == domain) & (pl.col("format") == fmt) & pl.col("y").is_not_null()
        )
    if fmt != "rank":
        raise InputError("contrasts", f"unknown format {fmt!r}", "format")
    rows = frames.rankings.filter(
        (pl.col("domain") == domain) & pl.col("bundle_type").is_in(list(bundle_types))
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


def rank_unit(rows: pl.DataFrame) -> str:
    """``positions`` with the points scale of the rows: ``positions (mid-rank points)``."""
    rules = sorted(set(rows["points_rule"].drop_nulls().to_list())) if rows.height else []
    if len(rules) > 1:
        raise InputError("ranking frame", f"several points scales {rules}", "points_rule")
    return f"{UNITS['rank']} ({(rules or [POINTS_RULES[0]])[0]} points)"


def design_of(
    rows: pl.DataFrame, fmt: str, dimensions: Mapping[str, str] = DIMENSION_COLUMNS
) -> CellDesign:
    """The :class:`CellDesign` of a cell's rows (:func:`cell_rows`); ``dimensions`` maps each
    contrast dimension to the column holding it (the placebo cell reads race from
    ``pseudo_race``)."""
    n = rows.height
    columns: list[tuple[str, np.ndarray]] = [("intercept", np.ones(n))]
    roles: list[str | None] = [None]
    for col in NUISANCE:
        values = rows[col].to_numpy()
        levels = sorted(set(values[~_is_null(values)]))
        columns += _dummies(values, col, levels[1:])
    rank_format = fmt == "rank"
    if rank_format:
        columns += _dummies(rows["position"].to_numpy(), "position", POSITIONS)
        columns += _dummies(rows["tier"].to_numpy(), "tier", TIERS)
    roles += [None] * (len(columns) - 1)
    labels: dict[str, np.ndarray] = {}
    for dim, col in {**DIMENSION_COLUMNS, **dimensions}.items():
        values = rows[col].to_numpy()
        labels[dim] = values
        present = sorted({v for v in values if v is not None} - {BASELINES[dim]})
        dims = _dummies(values, dim, present)
        columns += dims
        roles += [dim] * len(dims)
    for factor in SHARED_FACTORS:
        labels[factor] = rows[factor].to_numpy()
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
        cluster=rows[BUNDLE].to_numpy() if rank_format else None,
        unit=rank_unit(rows) if rank_format else UNITS[fmt],
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
        unit=design.unit or UNITS[design.format],
        n_obs=design.n,
        outcome_sd=_sd(design.y),
        estimates={c.contrast: Estimate(np.nan, np.nan, reason) for c in contrasts},
        names=[],
        dropped={},
        n_levels={},
        inference=_inference(estimator, design.format),
    )


def _inference(estimator: str, fmt: str) -> str:
    return INFERENCE[(estimator, "rank" if fmt == "rank" else "judgement")]


def _sd(y: np.ndarray) -> float:
    return float(np.std(y, ddof=1)) if len(y) > 1 else np.nan


def fit_design(
    design: CellDesign,
    contrasts: Sequence[ContrastSpec] | None = None,
    *,
    estimator: str = "lmm",
    start: CellFit | None = None,
    inference: bool = True,
) -> CellFit:
    """Fit one cell and read off its contrasts (natural units; see the module docstring).

    This is the one place where the model of a cell is defined: robustness refits and planted
    recoveries call it on :meth:`CellDesign.subset` / :meth:`CellDesign.with_outcome`.
    ``start`` (an lmm fit of the same cell) starts the REML optimizer at its variance
    components, which a refit of a subset needs far fewer evaluations from; with
    ``inference=False`` (leave-one-out refits read only estimates) no SE is computed. Runs on
    one BLAS thread: every matrix is thin (thousands x tens), and a busy machine's OpenBLAS
    threads turn a 1 ms SVD into 50 ms of waiting (measured on the 2-core machine at load 1.5).
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _fit_design(
            design,
            default_contrasts() if contrasts is None else contrasts,
            estimator,
            start,
            inference,
        )


def _fit_design(
    design: CellDesign,
    contrasts: Sequence[ContrastSpec],
    estimator: str,
    start: CellFit | None,
    inference: bool,
) -> CellFit:
    if estimator not in ESTIMATORS or (estimator == "rologit" and design.format != "rank"):
        raise InputError("contrasts", f"no estimator {estimator!r} for {design.format}")
    if design.n == 0:
        return _unestimable(design, estimator, contrasts, "no rows")
    if estimator == "rologit":
        return _fit_rologit(design, contrasts)
    if design.format == "rank":
        return _fit_rank_lmm(design, contrasts, start, inference)
    return _fit_lmm(design, contrasts, start, inference)


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
    design: CellDesign, contrasts: Sequence[ContrastSpec], start: CellFit | None, inference: bool
) -> CellFit:
    """Each dimension's rank contrasts from the answers in which that dimension varies.

    The points of a complete answer sum to the same total in every answer, so an answer whose
    candidates share a gender says nothing about gender, yet pooled into the fit it pulls the
    female contrast towards zero (a planted 0.30 came out 0.13). Disguised bundles show both
    genders and all races, so the split matters only for designs of other bundles.
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
        rows = None if keep.all() else np.flatnonzero(keep)
        fit = _fit_lmm(part, specs, start if part is design else None, inference)
        if rows is not None:
            fit = dataclasses.replace(
                fit,
                estimates={
                    k: dataclasses.replace(e, rows=None if e.rows is None else rows[e.rows])
                    for k, e in fit.estimates.items()
                },
            )
        fits.append(fit)
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
    design: CellDesign, contrasts: Sequence[ContrastSpec], start: CellFit | None, inference: bool
) -> CellFit:
    if design.n == 0:
        return _unestimable(design, "lmm", contrasts, "no rows")
    kept, dropped = _columns(design, design.x, list(range(len(design.names))))
    names = [design.names[j] for j in kept]
    groups = {k: v for k, v in design.groups.items() if len(np.unique(v)) > 1}
    if not groups:
        return _unestimable(design, "lmm", contrasts, "no random factor with two levels")
    x = design.x[:, kept]
    try:
        theta = start.theta if start is not None else None
        res = fit_crossed_lmm(design.y, x, groups, names, start=theta)
    except InputError as error:
        return _unestimable(design, "lmm", contrasts, str(error))
    robust = None
    if inference and design.format == "rank":
        assert design.cluster is not None
        try:
            robust = cluster_robust(
                x, design.y, design.cluster, coef=res.coef, groups=groups, theta=res.theta
            )
        except InputError as error:
            return _unestimable(design, "lmm", contrasts, str(error))
    wx = gls_weights(x, groups, res.theta) if inference else None
    residual = design.y - x @ res.coef

    def estimate(vector: np.ndarray) -> Estimate:
        if not inference:
            return Estimate(float(vector @ res.coef), np.nan)
        test = res.test(vector) if robust is None else robust.test(vector)
        assert wx is not None
        return Estimate(
            test.estimate,
            test.se,
            df=test.df,
            influence=influence(x, wx, residual, vector),
            rows=np.arange(design.n),
        )

    estimates = _read_contrasts(contrasts, names, dropped, estimate)
    return CellFit(
        format=design.format,
        estimator="lmm",
        unit=design.unit or UNITS[design.format],
        n_obs=design.n,
        outcome_sd=_sd(design.y),
        estimates=estimates,
        names=names,
        dropped=dropped,
        n_levels=dict(res.n_levels),
        theta=dict(res.theta),
        converged=res.converged,
        inference=_inference("lmm", design.format),
    )


def _read_contrasts(
    contrasts: Sequence[ContrastSpec],
    names: list[str],
    dropped: Mapping[str, str],
    estimate: Callable[[np.ndarray], Estimate],
) -> dict[str, Estimate]:
    """Each contrast as a linear combination of the fit's coefficients, read by ``estimate``
    (NaN with the reason when a regressor it needs was dropped)."""
    estimates = {}
    for spec in contrasts:
        vector, reason = _combination(names, spec, dropped)
        estimates[spec.contrast] = (
            Estimate(np.nan, np.nan, reason) if vector is None else estimate(vector)
        )
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
    except InputError as error:
        return _unestimable(design, "rologit", contrasts, str(error))
    df = float(res.n_clusters - 1) if res.n_clusters > 1 else np.nan

    def estimate(vector: np.ndarray) -> Estimate:
        delta = float(vector @ res.coef)
        se = float(np.sqrt(vector @ res.cov_cluster @ vector))
        return Estimate(*rank_difference(delta, se), df=df)

    estimates = _read_contrasts(contrasts, names, dropped, estimate)
    return CellFit(
        format="rank",
        estimator="rologit",
        unit=design.unit or UNITS["rank"],
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
        inference=_inference("rologit", "rank"),
    )


def fit_cell(
    frames: AnalysisFrames,
    domain: str,
    fmt: str,
    contrasts: Sequence[ContrastSpec] | None = None,
    *,
    estimator: str = "lmm",
    bundle_types: Sequence[str] = RANK_BUNDLE_TYPES,
) -> CellFit:
    """All contrasts of one domain x format from one fit (``frames`` already one arm)."""
    rows = cell_rows(frames, domain, fmt, bundle_types=bundle_types)
    return fit_design(design_of(rows, fmt), contrasts, estimator=estimator)


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
        for estimator in ESTIMATORS if fmt == "rank" else ESTIMATORS[:1]:
            fits[(domain, fmt, estimator)] = fit_design(design, planned, estimator=estimator)
    return fits


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
        for estimator in ESTIMATORS if fmt == "rank" else ESTIMATORS[:1]:
            fit = fits[(domain, fmt, estimator)]
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
            df=row["df"],
        )
        for row in table.iter_rows(named=True)
    ]
    table = table.with_columns(
        pl.Series("verdict", verdicts, dtype=pl.String()),
        pl.lit(reason is None).alias("pre_registered"),
        pl.lit(label).alias("label"),
    )
    return table.select(list(CONTRASTS_SCHEMA)).sort(["domain", "format", "contrast", "estimator"])


def _test(e: Estimate, alpha: float) -> tuple[float, float, float, float]:
    """``(df, ci_low, ci_high, p)`` of an estimate's t test; NaN where it has none."""
    nan = float("nan")
    if not (np.isfinite(e.estimate) and np.isfinite(e.se) and e.se > 0 and e.df > 0):
        return nan, nan, nan, nan
    test = t_test(e.estimate, e.se, e.df)
    return float(e.df), *test.conf_int(1 - alpha), test.p


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
    df, low, high, p = _test(e, alpha)
    finite = bool(np.isfinite(df))
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
        "df": df,
        "inference": fit.inference,
        "ci_low": low,
        "ci_high": high,
        "p_value": p,
        "outcome_sd": sd,
        "n_obs": fit.n_obs if e.n_obs is None else e.n_obs,
        "in_family": in_family,
        "q_value": None,
        "margin": margin,
        "p_tost": None,
        "tost_bound": nan,
        "mde": float(mde(e.se, alpha, power, df)) if finite else nan,
        "equivalence_floor": float(equivalence_floor(e.se, alpha, power, df)) if finite else nan,
        "verdict": None,
        "pre_registered": reason is None,
        "label": None,
        "_reason": e.reason,
    }
    if finite:
        rec["tost_bound"] = tost(e.estimate, e.se, margin or 1.0, alpha, power, df).bound
    scaled = sd if np.isfinite(sd) and sd > 0 else nan
    for col in ("estimate", "se", "ci_low", "ci_high", "mde", "equivalence_floor"):
        rec[f"{col}_sd"] = float(rec[col]) / scaled  # type: ignore[arg-type]
    if margin is not None and finite:
        rec["p_tost"] = tost(e.estimate, e.se, margin, alpha, power, df).p_tost
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
    df: float = np.inf,
) -> str:
    """The verdict of one contrast: ``"equivalent"`` when TOST against ``(-margin, margin)``
    rejects at ``alpha``; else ``"different"`` when ``p_difference`` (the q-value for a planned
    contrast) is below ``alpha``; else ``"inconclusive"``, naming the MDE when it exceeds the
    margin. ``"no margin"`` without a margin; ``"inconclusive: not estimable (reason)"``
    without a finite estimate, SE and degrees of freedom."""
    ok = np.isfinite(estimate) and np.isfinite(se) and se > 0 and df is not None and df > 0
    if reason is not None or not ok:
        return f"inconclusive: not estimable ({reason or 'no standard error'})"
    if margin is None:
        return "no margin"
    test = tost(estimate, se, margin, alpha, power, df)
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


def interaction_covariance(
    a: Estimate, design_a: CellDesign, b: Estimate, design_b: CellDesign
) -> float:
    """The covariance of two cells' estimates through the name pairs and profiles they share
    (:func:`cueaudit.stats.robust.cross_covariance` of their influences): a Rate and a Rank
    contrast of one domain show the same names and profiles, so they are not independent."""
    if a.influence is None or b.influence is None or a.rows is None or b.rows is None:
        return np.nan
    labels_a = {f: design_a.labels[f][a.rows] for f in SHARED_FACTORS}
    labels_b = {f: design_b.labels[f][b.rows] for f in SHARED_FACTORS}
    return cross_covariance(a.influence, labels_a, b.influence, labels_b)


def estimate_interactions(
    frames: AnalysisFrames,
    prereg: Preregistration,
    *,
    arm: str = PRIMARY,
    fits: FamilyFits | None = None,
) -> pl.DataFrame:
    """The INTERACTIONS table: for each domain x contrast and each pair of formats ``a-b``,
    the difference of the lmm estimates in SD units (a minus b), its SE from the two cells'
    variances and their covariance through shared name pairs and profiles (the stacked
    estimating equations of both fits; ``se_sd_independent`` is the SE that ignores it and
    ``correlation`` the estimated correlation), a t interval with Welch-Satterthwaite degrees
    of freedom and two-sided p. The q-values are BH over the pairs of the primary
    interaction's formats (rate-rank: twelve), null elsewhere; ``primary`` flags the
    pre-registration's primary (domain, contrast, formats)."""
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
    fit_a, fit_b = fits.get((domain, fa, "lmm")), fits.get((domain, fb, "lmm"))
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
            for estimator in ESTIMATORS:
                fit = fit_design(design, specs, estimator=estimator)
                for c in specs:
                    records.append(_placebo_record(domain, mode, c, fit, prereg.alpha, label))
    return pl.DataFrame(records, schema=dict(PLACEBO_SCHEMA))


def _placebo_record(
    domain: str, mode: str, c: ContrastSpec, fit: CellFit, alpha: float, label: str
) -> dict[str, object]:
    e = fit.estimates[c.contrast]
    df, low, high, p = _test(e, alpha)
    return {
        "domain": domain,
        "mode": mode,
        "contrast": c.contrast,
        "estimator": fit.estimator,
        "unit": fit.unit,
        "estimate": e.estimate,
        "se": e.se,
        "df": df,
        "ci_low": low,
        "ci_high": high,
        "p_value": p,
        "rejects": bool(p < alpha) if np.isfinite(p) else None,
        "n_obs": fit.n_obs if e.n_obs is None else e.n_obs,
        "note": e.reason,
        "label": label,
    }
