"""The estimators of the decision audit's contrasts (:data:`FITTERS`): each fits one
:class:`~cueaudit.decision.analysis.design_matrix.CellDesign` and reads all its contrasts
(Black, Hispanic, Asian vs White; female vs male) as linear combinations of one fit. The
estimands (stated in ``docs/decision-audit-design.md``):

``rate`` / ``decide``, estimator ``"lmm"``
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
    varies across profiles of varying quality
    (:data:`~cueaudit.decision.analysis.design_matrix.RANK_BUNDLE_TYPES`). Matched bundles
    show one profile four times and are tied almost always (the paper: 100%), so pooled in they
    dilute the contrast towards zero (a planted 0.20 read as 0.14) by a share that differs by
    arm; they feed the tie and recognition analyses instead. The placebo bundles are their own
    cell (:func:`cueaudit.decision.analysis.contrasts.estimate_placebo`). The model is the rate
    one on ``points`` with position (2-4) and tier dummies and a third random intercept for the
    design bundle, as the paper specifies (profile, name pair, bundle); its variance is zero
    whenever an answer's points sum to 10 (mid-ranks), and the estimate equals that with an
    answer-level intercept. The SE is **CR2 by design bundle** with Satterthwaite degrees of
    freedom (:func:`cueaudit.stats.robust.cluster_robust`, the fit as working model): an
    answer's points sum to 10 (a -1/3 correlation no random intercept represents) and every
    model, mode and seed answers the same bundle, which made the model-based SE 12% too small
    on the simulator (null rejection 6.7-8.7% against 4.0-5.0% with CR2, 120-150 studies).
    Each dimension's contrasts come from the answers in which it varies (:func:`_fit_rank_lmm`).
``rank``, estimator ``"rologit"``
    :func:`cueaudit.stats.rologit.fit_rologit` (exact-marginal ties) of the ranks of the same
    answers on position, tier, race and female. The sandwich is CR1 clustered by design bundle
    (t with clusters - 1 degrees of freedom; CR2 is defined for linear estimators). Model, mode
    and paraphrase are constant within a ranking and drop out. A log-worth difference is
    reported in positions by :func:`rank_difference`, the lmm's unit. Fully tied answers carry
    no information here but count as zero differences in the lmm: the two estimands agree when
    no disguised answer is fully tied (the paper: none), and differ by that share otherwise.

A contrast that could not be estimated is NaN with its reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import numpy as np

from cueaudit.decision.analysis.design_matrix import (
    NUISANCE,
    UNITS,
    CellDesign,
    ContrastSpec,
    contrast_vector,
    default_contrasts,
    usable_columns,
)
from cueaudit.decision.design import BUNDLE_SIZE
from cueaudit.errors import InputError
from cueaudit.stats.mixed import RESIDUAL, MixedResult, fit_crossed_lmm, one_blas_thread
from cueaudit.stats.multiplicity import TTest, WaldTest
from cueaudit.stats.robust import ClusterRobust, cluster_robust, gls_weights, influence
from cueaudit.stats.rologit import expected_rank_gain, expected_rank_gain_se, fit_rologit

#: A residual variance at most this share of the outcome's variance (or of 1) is an exact fit.
EXACT_FIT: Final = 1e-10


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


class FitCell(Protocol):
    """Fit a cell with rows and read off ``contrasts``; ``start`` and ``inference`` as
    :func:`fit_design` documents them (an estimator that cannot use them ignores them)."""

    def __call__(
        self,
        design: CellDesign,
        contrasts: Sequence[ContrastSpec],
        start: CellFit | None,
        inference: bool,
    ) -> CellFit: ...


@dataclass(frozen=True)
class Fitter:
    """One estimator of the contrasts: how it fits a cell (``fit``), how its standard error and
    degrees of freedom come about in each format it fits (``inference``, the tables'
    ``inference`` column), and whether it is the mixed model of the planned family
    (``family``): BH runs over its rows, and the interactions, leave-one-out refits, planted
    recoveries' outcome SDs and figures read its estimates."""

    fit: FitCell
    inference: Mapping[str, str]
    family: bool = False

    @property
    def formats(self) -> tuple[str, ...]:
        return tuple(self.inference)


def unestimable(
    design: CellDesign, estimator: str, contrasts: Sequence[ContrastSpec], reason: str
) -> CellFit:
    """A fit of ``design`` whose every contrast is NaN for ``reason``."""
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
        inference=FITTERS[estimator].inference[design.format],
    )


def _sd(y: np.ndarray) -> float:
    return float(np.std(y, ddof=1)) if len(y) > 1 else np.nan


def fit_design(
    design: CellDesign,
    contrasts: Sequence[ContrastSpec] | None = None,
    *,
    estimator: str | None = None,
    start: CellFit | None = None,
    inference: bool = True,
) -> CellFit:
    """Fit one cell by ``estimator`` (a name of :data:`FITTERS`; by default the family's,
    :data:`FAMILY_ESTIMATOR`) and read off its contrasts (natural units; see the module
    docstring).

    This is the one place where the model of a cell is defined: robustness refits and planted
    recoveries call it on :meth:`CellDesign.subset` / :meth:`CellDesign.with_outcome`.
    ``start`` (an lmm fit of the same cell) starts the REML optimizer at its variance
    components, which a refit of a subset needs far fewer evaluations from; with
    ``inference=False`` (leave-one-out refits read only estimates) no SE is computed. Runs on
    one BLAS thread: every matrix is thin (thousands x tens), and a busy machine's OpenBLAS
    threads turn a 1 ms SVD into 50 ms of waiting (measured on the 2-core machine at load 1.5).
    """
    name = FAMILY_ESTIMATOR if estimator is None else estimator
    fitter = FITTERS.get(name)
    if fitter is None or design.format not in fitter.formats:
        raise InputError("contrasts", f"no estimator {name!r} for {design.format}")
    specs = default_contrasts() if contrasts is None else contrasts
    if design.n == 0:
        return unestimable(design, name, specs, "no rows")
    with one_blas_thread():
        return fitter.fit(design, specs, start, inference)


def informative_rows(design: CellDesign, dimensions: Sequence[str]) -> np.ndarray:
    """The rows a fit of ``dimensions`` together reads: every row of a Rate or Decide cell; in
    a rank cell, the answers in which each of them varies (see :func:`_fit_rank_lmm`)."""
    keep = np.ones(design.n, dtype=bool)
    if design.format == "rank" and design.n:
        for dimension in dimensions:
            keep &= _varies_within_answer(design, dimension)
    return keep


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


def _fit_mixed(
    design: CellDesign, contrasts: Sequence[ContrastSpec], start: CellFit | None, inference: bool
) -> CellFit:
    if design.format == "rank":
        return _fit_rank_lmm(design, contrasts, start, inference)
    return _fit_lmm(design, contrasts, start, inference)


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
            fits.append(unestimable(design, "lmm", specs, why))
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


@dataclass(frozen=True)
class LmmFit:
    """The lmm of a cell's kept columns (``names``, the others ``dropped`` with why) and its
    inference: model-based Satterthwaite tests, or CR2 by design bundle for rank (``robust``).
    Joint fits (interactions with a design factor) read their tests from it."""

    result: MixedResult
    robust: ClusterRobust | None
    x: np.ndarray
    names: list[str]
    dropped: dict[str, str]
    groups: dict[str, np.ndarray]

    def test(self, vector: np.ndarray) -> TTest:
        return self.result.test(vector) if self.robust is None else self.robust.test(vector)

    def wald_test(self, matrix: np.ndarray) -> WaldTest:
        """The joint test of ``matrix @ coef = 0`` under the cell's inference (lmerTest's
        ``contestMD``, or CR2 referred to F(q, bundles - 1) for rank)."""
        if self.robust is None:
            return self.result.wald_test(matrix)
        return self.robust.wald_test(matrix)


def fit_lmm(
    design: CellDesign, start: CellFit | None = None, inference: bool = True
) -> LmmFit | str:
    """The family's lmm of ``design`` (every usable column, every random factor with two
    levels), or why it cannot be fitted."""
    if design.n == 0:
        return "no rows"
    kept, dropped = usable_columns(design, design.x, list(range(len(design.names))))
    names = [design.names[j] for j in kept]
    groups = {k: v for k, v in design.groups.items() if len(np.unique(v)) > 1}
    if not groups:
        return "no random factor with two levels"
    x = design.x[:, kept]
    try:
        theta = start.theta if start is not None else None
        res = fit_crossed_lmm(design.y, x, groups, names, start=theta)
    except InputError as error:
        return str(error)
    if not res.variance_components[RESIDUAL] > EXACT_FIT * max(float(np.var(design.y)), 1.0):
        # no residual variance: the Satterthwaite t test has nothing to test against (and
        # its deviance Hessian is singular), as in a cell of a few answers fitted exactly
        return "the answers are fitted exactly (no residual variance): nothing to test against"
    robust = None
    if inference and design.format == "rank":
        assert design.cluster is not None
        try:
            robust = cluster_robust(
                x, design.y, design.cluster, coef=res.coef, groups=groups, theta=res.theta
            )
        except InputError as error:
            return str(error)
    return LmmFit(res, robust, x, names, dropped, groups)


def _fit_lmm(
    design: CellDesign, contrasts: Sequence[ContrastSpec], start: CellFit | None, inference: bool
) -> CellFit:
    fit = fit_lmm(design, start, inference)
    if isinstance(fit, str):
        return unestimable(design, "lmm", contrasts, fit)
    res, x, names, dropped, groups = fit.result, fit.x, fit.names, fit.dropped, fit.groups
    wx = gls_weights(x, groups, res.theta) if inference else None
    residual = design.y - x @ res.coef

    def estimate(vector: np.ndarray) -> Estimate:
        if not inference:
            return Estimate(float(vector @ res.coef), np.nan)
        test = fit.test(vector)
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
        inference=FITTERS["lmm"].inference[design.format],
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
        vector, reason = contrast_vector(names, spec, dropped)
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


def _fit_rologit(
    design: CellDesign,
    contrasts: Sequence[ContrastSpec],
    start: CellFit | None,
    inference: bool,
) -> CellFit:
    """The rank-ordered logit of a rank cell (``start`` and ``inference`` are the lmm's: it
    always starts from zero and computes its sandwich)."""
    assert design.answer is not None and design.rank is not None and design.cluster is not None
    _, answer = np.unique(design.answer, return_inverse=True)
    # a ranking with a single rank (all tied) has likelihood 1: it identifies nothing
    lo = np.full(answer.max() + 1, np.inf)
    hi = np.full(answer.max() + 1, -np.inf)
    np.minimum.at(lo, answer, design.rank)
    np.maximum.at(hi, answer, design.rank)
    informative = (hi > lo)[answer]
    if not informative.any():
        return unestimable(design, "rologit", contrasts, "every ranking is fully tied")
    # what a ranking identifies is the variation within it, in the rankings that inform
    counts = np.bincount(answer)
    sums = np.zeros((len(counts), design.x.shape[1]))
    np.add.at(sums, answer, design.x)
    within = np.where(informative[:, None], design.x - sums[answer] / counts[answer, None], 0.0)
    constant = ("intercept", *(f"{c}[" for c in NUISANCE))
    usable = [j for j, name in enumerate(design.names) if not name.startswith(constant)]
    kept, dropped = usable_columns(design, within, usable)
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
        return unestimable(design, "rologit", contrasts, str(error))
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
        inference=FITTERS["rologit"].inference["rank"],
    )


#: The estimators by name, in the tables' order: a new one is a row here (and its estimator
#: in :mod:`cueaudit.stats`).
FITTERS: Final[Mapping[str, Fitter]] = {
    "lmm": Fitter(
        _fit_mixed,
        {
            "rate": "t, Satterthwaite (lmm)",
            "decide": "t, Satterthwaite (lmm)",
            "rank": "t, CR2 by bundle, Satterthwaite",
        },
        family=True,
    ),
    "rologit": Fitter(_fit_rologit, {"rank": "t, CR1 by bundle, clusters - 1"}),
}
#: The estimator of the planned family (BH, interactions, leave-one-out, figures).
(FAMILY_ESTIMATOR,) = (name for name, fitter in FITTERS.items() if fitter.family)


def estimators_for(fmt: str) -> tuple[str, ...]:
    """The estimators that fit a cell of format ``fmt``, in :data:`FITTERS` order."""
    return tuple(name for name, fitter in FITTERS.items() if fmt in fitter.formats)
