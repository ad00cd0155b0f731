"""The verdict across the audit's own design choices: a specification curve (exploratory).

The paper's thesis is that an audit's construction decides its verdict. This module makes it
something to run: for each demographic contrast of interest it computes every estimate the
study's frames can give across its design choices, reads each one's verdict, and tests the
whole curve against the null (Simonsohn, Simmons & Nelson 2020; the array-level inference is
:mod:`cueaudit.stats.specification_curve`).

**A specification** is one combination of choices (:data:`CHOICES`):

- ``arm``: the pre-registered design, and each extension arm with rows in the frames;
- ``domain`` x ``format``: every cell the frames hold;
- each design factor of :data:`DESIGN_CHOICES` (mode, paraphrase, model, cue): one level, or
  all levels pooled (``"all"``, the factor a nuisance of the fit as in the family). A factor
  with one level in the rows has that level as its only choice (it is also the pool); a factor
  that is not a column of the frames is no choice (null in the table). A new design column is
  one more entry of :data:`DESIGN_CHOICES`;
- ``bundle_type`` (Rank only, :data:`RANK_BUNDLE_CHOICES`): ``disguised_demographic`` (the
  family's estimand), ``demographic_matched`` (one profile under four names), the two pooled,
  which the paper showed dilutes the estimand, and the exploratory ``paraphrase_matched`` (one
  profile, one line worded four ways) and ``position_balanced`` (two Black and two White
  candidates, race orthogonal to the half of the list) where the design has them;
- ``estimator``: every :data:`~cueaudit.decision.analysis.fitters.FITTERS` entry that fits the
  format (lmm; for Rank also the rank-ordered logit);
- ``outcome`` (:data:`OUTCOMES`): ``answer``, the parsed answer; ``expectation``, the option-
  score expectation the judgement frame carries in ``score`` (E[rating] for Rate, P(yes) for
  Decide; only where the model returned option scores).

Every combination with rows is fitted by :func:`~cueaudit.decision.analysis.fitters.fit_design`
on :func:`~cueaudit.decision.analysis.design_matrix.design_of` of its rows, exactly as the
family's cells are; a fit that fails is a row with NaN and its reason (``note``), verdict
``not estimable``. The pre-registered family's own specification of a planned contrast (the
primary arm, every factor pooled, the estimand's bundles, the lmm, the answer) is flagged
``family_spec``: its estimate is the contrasts table's.

**Verdicts** (:func:`spec_verdict`, from :func:`~cueaudit.decision.analysis.verdicts.verdict`
on the specification's own p-value, unadjusted): ``equivalent`` when TOST rejects against the
format's pre-registered margin; else ``favours`` / ``penalises`` when ``p < alpha`` and the
estimate is above / below 0 (positive is favourable for the focal group in every format); else
``inconclusive`` (``note``: ``no margin`` for Decide, which has none, or the MDE that exceeds
the margin).

**Inference on the curve** keeps the dependence between specifications: a permutation of the
race labels among name pairs within gender (race contrasts) or of the gender labels among name
pairs within race (gender contrasts), applied to every row of every arm, and every
specification refitted under it. The curve's statistics (median estimate in SD units, share
of specifications with ``p < alpha``, the count significant in the dominant sign) get
permutation p-values. With few name pairs there are few distinct relabellings (8 pairs, one
per race x gender: 4!·4! = 576 race labellings, 2^4 = 16 gender ones): all of them are used
when there are no more than asked for, else a sample without replacement, as the summary says.

One module on purpose: enumerating the specifications, their verdicts and the permutation
tests of the whole curve share one list of specifications and one way of fitting them.
"""

from __future__ import annotations

import functools
import itertools
import logging
import multiprocessing
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl

from cueaudit.decision.analysis.contrasts import (
    CONTRASTS_SCHEMA,
    exploratory_reason,
    family_cells,
)
from cueaudit.decision.analysis.design_matrix import (
    DIMENSION_COLUMNS,
    RANK_BUNDLE_TYPES,
    ContrastSpec,
    cell_rows,
    default_contrasts,
    design_of,
)
from cueaudit.decision.analysis.fitters import (
    FAMILY_ESTIMATOR,
    CellFit,
    estimators_for,
    fit_design,
)
from cueaudit.decision.analysis.frames import PRIMARY, AnalysisFrames
from cueaudit.decision.analysis.heterogeneity import NOT_IN_FAMILY, PAIR
from cueaudit.decision.analysis.verdicts import equivalence, t_interval, verdict
from cueaudit.decision.formats import FORMATS
from cueaudit.decision.preregistration import Preregistration, Status
from cueaudit.errors import InputError
from cueaudit.stats.specification_curve import (
    CurveTest,
    curve_test,
    within_strata_permutations,
)

log = logging.getLogger(__name__)

#: The design columns a specification takes one level of, or pools (a column absent from the
#: frames is no choice): a new design factor of the frames is one more entry here.
DESIGN_CHOICES: Final = ("mode", "paraphrase", "model", "cue")
#: The value of a design factor whose levels are pooled.
POOLED: Final = "all"
#: The rank cell's bundle choices: the family's estimand, the matched bundles, both pooled, and
#: the exploratory types whose candidates differ in a demographic (a type the design lacks
#: gives no specification).
RANK_BUNDLE_CHOICES: Final[Mapping[str, tuple[str, ...]]] = {
    RANK_BUNDLE_TYPES[0]: RANK_BUNDLE_TYPES,
    "demographic_matched": ("demographic_matched",),
    "all demographic bundles": (*RANK_BUNDLE_TYPES, "demographic_matched"),
    "paraphrase_matched": ("paraphrase_matched",),
    "position_balanced": ("position_balanced",),
}
#: The outcome sources and the formats that have them.
OUTCOMES: Final[Mapping[str, tuple[str, ...]]] = {
    "answer": FORMATS,
    "expectation": ("rate", "decide"),
}
#: Every choice of a specification, in the tables' order.
CHOICES: Final = ("arm", "domain", "format", *DESIGN_CHOICES, "bundle_type", "estimator", "outcome")
#: The factor a dimension's labels are permuted within (among name pairs).
PERMUTED_WITHIN: Final[Mapping[str, str]] = {"race": "gender", "gender": "race"}
VERDICTS: Final = ("favours", "penalises", "equivalent", "inconclusive", "not estimable")
DEFAULT_CONTRASTS: Final = ("black_vs_white", "female_vs_male")

_CONTRAST: Final[Mapping[str, pl.DataType]] = {
    c: CONTRASTS_SCHEMA[c] for c in ("contrast", "dimension", "focal", "reference")
}
_ESTIMATE: Final = (
    *("unit", "estimate", "se", "df", "ci_low", "ci_high", "p_value", "outcome_sd"),
    *("estimate_sd", "se_sd", "ci_low_sd", "ci_high_sd", "n_obs", "inference", "margin"),
)
#: One row per specification x contrast of interest.
CURVE_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    **_CONTRAST,
    "specification": pl.String(),
    **{c: pl.String() for c in CHOICES},
    "family_spec": pl.Boolean(),
    **{c: CONTRASTS_SCHEMA[c] for c in _ESTIMATE},
    "p_tost": pl.Float64(),
    "verdict": pl.String(),
    "note": pl.String(),
    "label": pl.String(),
}
#: One row per contrast of interest: the curve's counts, statistics and permutation tests.
SUMMARY_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    **_CONTRAST,
    "specifications": pl.Int64(),
    "estimable": pl.Int64(),
    **{v.replace(" ", "_"): pl.Int64() for v in VERDICTS},
    "alpha": pl.Float64(),
    "median_estimate_sd": pl.Float64(),
    "p_median": pl.Float64(),
    "significant": pl.Int64(),
    "share_significant": pl.Float64(),
    "p_share": pl.Float64(),
    "dominant_sign": pl.String(),
    "significant_dominant": pl.Int64(),
    "p_dominant": pl.Float64(),
    "permutations": pl.Int64(),
    "permutations_requested": pl.Int64(),
    "permutations_distinct": pl.Float64(),  # may exceed 2^63 (40 name pairs: about 1.4e20)
    "permutation_scheme": pl.String(),
    "permutation_note": pl.String(),
    "family_verdicts": pl.String(),
    "label": pl.String(),
}


@dataclass(frozen=True)
class Specification:
    """The rows of one combination of choices (every estimator of its format fits them):
    ``levels`` the choice of each design factor (a level, :data:`POOLED`, or None where the
    factor is no column of the rows); ``pooled`` when it is the family's construction (the
    primary arm, every factor pooled, the estimand's bundles, the answer)."""

    arm: str
    domain: str
    format: str
    levels: Mapping[str, str | None]
    bundle_type: str | None
    outcome: str
    pooled: bool
    rows: pl.DataFrame

    def choices(self, estimator: str) -> dict[str, str | None]:
        return {
            "arm": self.arm,
            "domain": self.domain,
            "format": self.format,
            **self.levels,
            "bundle_type": self.bundle_type,
            "estimator": estimator,
            "outcome": self.outcome,
        }


def specification_id(choices: Mapping[str, str | None]) -> str:
    """``primary|hiring|rate|mode=text|...``: the choices that apply, in :data:`CHOICES` order."""
    head = [str(choices[c]) for c in ("arm", "domain", "format")]
    tail = [f"{c}={choices[c]}" for c in CHOICES[3:] if choices.get(c) is not None]
    return "|".join(head + tail)


def contrasts_of_interest(names: Sequence[str]) -> list[ContrastSpec]:
    """The planned contrasts named (``black_vs_white``, ``female_vs_male``, ...)."""
    known = {c.contrast: c for c in default_contrasts()}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise InputError(
            "specification curve",
            f"contrasts {unknown or list(names)}: choose from {sorted(known)}",
            "contrasts",
        )
    return [known[n] for n in dict.fromkeys(names)]


# --- the specifications -------------------------------------------------------------------------
def _arms(frames: AnalysisFrames) -> list[str]:
    arms = set(frames.judgements["arm"].drop_nulls()) | set(frames.rankings["arm"].drop_nulls())
    return sorted(arms, key=lambda a: (a != PRIMARY, a))


def _cells(frames: AnalysisFrames) -> list[tuple[str, str]]:
    cells = {(d, f) for d, f in frames.judgements.select("domain", "format").unique().iter_rows()}
    cells |= {(d, "rank") for d in frames.rankings["domain"].unique().to_list()}
    return sorted(
        ((d, f) for d, f in cells if d is not None and f in FORMATS),
        key=lambda c: (c[0], FORMATS.index(c[1])),
    )


def outcome_rows(
    frames: AnalysisFrames, domain: str, fmt: str, outcome: str, bundle_types: Sequence[str]
) -> pl.DataFrame:
    """A cell's rows with the outcome source as ``y``: the parsed answers
    (:func:`~cueaudit.decision.analysis.design_matrix.cell_rows`), or the judgements with an
    option-score expectation (``score``)."""
    if outcome == "answer":
        return cell_rows(frames, domain, fmt, bundle_types=bundle_types)
    if outcome != "expectation" or fmt not in OUTCOMES["expectation"]:
        raise InputError("specification curve", f"no outcome {outcome!r} for {fmt}", "outcome")
    return frames.judgements.filter(
        (pl.col("domain") == domain) & (pl.col("format") == fmt) & pl.col("score").is_not_null()
    ).with_columns(y=pl.col("score"))


def _options(rows: pl.DataFrame) -> dict[str, list[str | None]]:
    """Each design factor's choices in ``rows``: pooled and each level, or its one level, or
    None (no column, or no value)."""
    options: dict[str, list[str | None]] = {}
    for factor in DESIGN_CHOICES:
        if factor not in rows.columns:
            options[factor] = [None]
            continue
        levels = sorted({str(v) for v in rows[factor].to_list() if v is not None})
        options[factor] = [POOLED, *levels] if len(levels) > 1 else (levels or [None])
    return options


def specifications(frames: AnalysisFrames) -> Iterator[Specification]:
    """Every combination of choices with rows, in the order arm, domain, format, outcome,
    bundle type, then the design factors (pooled first)."""
    for arm in _arms(frames):
        data = frames.arm(arm, cue=None)
        for domain, fmt in _cells(data):
            bundles = RANK_BUNDLE_CHOICES.items() if fmt == "rank" else [(None, RANK_BUNDLE_TYPES)]
            for outcome, formats in OUTCOMES.items():
                if fmt not in formats:
                    continue
                for bundle, types in bundles:
                    rows = outcome_rows(data, domain, fmt, outcome, types)
                    if rows.is_empty():
                        continue
                    options = _options(rows)
                    construction = (
                        arm == PRIMARY
                        and outcome == "answer"
                        and bundle in (None, *RANK_BUNDLE_TYPES)
                    )
                    for combination in itertools.product(*options.values()):
                        levels = dict(zip(options, combination, strict=True))
                        part = rows
                        for factor, level in levels.items():
                            if level not in (None, POOLED):
                                part = part.filter(pl.col(factor).cast(pl.String) == level)
                        if part.is_empty():
                            continue
                        pooled = construction and all(
                            level in (None, POOLED) or len(options[f]) == 1
                            for f, level in levels.items()
                        )
                        yield Specification(arm, domain, fmt, levels, bundle, outcome, pooled, part)


# --- fitting ------------------------------------------------------------------------------------
def _fits(
    specs: Sequence[Specification],
    contrasts: Sequence[ContrastSpec],
    relabel: tuple[str, Mapping[str, str]] | None = None,
    starts: Sequence[CellFit] | None = None,
) -> Iterator[tuple[Specification, CellFit]]:
    """Each specification fitted by each estimator of its format; ``relabel`` = (column,
    name pair -> label) replaces that column first (a permutation), and ``starts`` (the
    observed fits, in the same order) start each lmm at its variance components."""
    fits = iter(starts or ())
    for spec in specs:
        rows = spec.rows
        if relabel is not None:
            column, mapping = relabel
            rows = rows.with_columns(
                pl.col(PAIR).replace_strict(mapping, return_dtype=pl.String).alias(column)
            )
        design = design_of(rows, spec.format)
        for estimator in estimators_for(spec.format):
            start = next(fits, None)
            yield spec, fit_design(design, contrasts, estimator=estimator, start=start)


def _sd_scale(fit: CellFit) -> float:
    sd = fit.outcome_sd
    return sd if np.isfinite(sd) and sd > 0 else np.nan


def spec_verdict(
    estimate: float,
    se: float,
    df: float,
    p: float,
    margin: float | None,
    *,
    alpha: float,
    power: float,
    reason: str | None = None,
) -> tuple[str, str | None]:
    """One specification's verdict (:data:`VERDICTS`) and its note (see the module
    docstring), from :func:`~cueaudit.decision.analysis.verdicts.verdict` on ``p``
    (``reason``: why the estimate is missing)."""
    read = verdict(estimate, se, margin, p, alpha=alpha, power=power, reason=reason, df=df)
    direction = "favours" if estimate > 0 else "penalises"
    if read.startswith("inconclusive: not estimable"):
        return "not estimable", reason or "no standard error"
    if read == "equivalent":
        return read, None
    if read == "different":
        return direction, None
    if read == "no margin":
        return (direction if p < alpha else "inconclusive"), "no margin"
    detail = read.removeprefix("inconclusive").removeprefix(": ")
    return "inconclusive", detail or None


def _label(arm: str, pre_registered: Status | bool) -> str:
    other = exploratory_reason(pre_registered, arm)
    reason = f"specification curve: {NOT_IN_FAMILY}" + (f"; {other}" if other else "")
    return f"exploratory: {reason}"


def _record(
    spec: Specification,
    fit: CellFit,
    c: ContrastSpec,
    prereg: Preregistration,
    alpha: float,
    pre_registered: Status | bool,
) -> dict[str, object]:
    e = fit.estimates[c.contrast]
    df, low, high, p = t_interval(e, alpha)
    scale = _sd_scale(fit)
    margin = prereg.margins.get(spec.format)
    read, note = spec_verdict(
        e.estimate, e.se, df, p, margin, alpha=alpha, power=prereg.power, reason=e.reason
    )
    planned = {x.contrast for x in family_cells(prereg).get((spec.domain, spec.format), [])}
    choices = spec.choices(fit.estimator)
    return {
        "contrast": c.contrast,
        "dimension": c.dimension,
        "focal": c.focal,
        "reference": c.reference,
        "specification": specification_id(choices),
        **choices,
        "family_spec": spec.pooled and fit.estimator == FAMILY_ESTIMATOR and c.contrast in planned,
        "unit": fit.unit,
        "estimate": e.estimate,
        "se": e.se,
        "df": df,
        "ci_low": low,
        "ci_high": high,
        "p_value": p,
        "outcome_sd": fit.outcome_sd,
        "estimate_sd": e.estimate / scale,
        "se_sd": e.se / scale,
        "ci_low_sd": low / scale,
        "ci_high_sd": high / scale,
        "n_obs": fit.n_obs if e.n_obs is None else e.n_obs,
        "inference": fit.inference,
        "margin": margin,
        "p_tost": equivalence(e, df, margin, alpha, prereg.power)["p_tost"],
        "verdict": read,
        "note": note,
        "label": _label(spec.arm, pre_registered),
    }


def _curve_point(fit: CellFit, c: ContrastSpec, alpha: float) -> tuple[float, float]:
    """A specification's place on the curve: its estimate in SD units and its p-value."""
    e = fit.estimates[c.contrast]
    return e.estimate / _sd_scale(fit), t_interval(e, alpha)[3]


# --- permutations -------------------------------------------------------------------------------
def name_pair_groups(frames: AnalysisFrames) -> pl.DataFrame:
    """Each name pair's race, gender and design ``role``: the arm x domain x format cells it
    appears in (every row of a pair must agree on its race and gender)."""
    cell = pl.concat_str(["arm", "domain", "format"], separator="/")
    rows = pl.concat(
        [
            frames.judgements.select(PAIR, "race", "gender", cell.alias("cell")),
            frames.rankings.select(
                PAIR,
                "race",
                "gender",
                pl.concat_str(["arm", "domain"], separator="/").add("/rank").alias("cell"),
            ),
        ]
    ).drop_nulls(PAIR)
    pairs = (
        rows.group_by(PAIR, "race", "gender")
        .agg(pl.col("cell").unique().sort().str.join(" ").alias("role"))
        .sort(PAIR)
    )
    clash = pairs.filter(pl.len().over(PAIR) > 1)
    if clash.height:
        raise InputError(
            "analysis frames",
            f"name pair {clash[PAIR][0]!r} has several races or genders: "
            f"{clash.filter(pl.col(PAIR) == clash[PAIR][0]).select('race', 'gender').rows()}",
            PAIR,
        )
    return pairs


@dataclass(frozen=True)
class _Null:
    test: CurveTest
    requested: int
    distinct: int
    exhaustive: bool


def _scheme(dimension: str) -> str:
    return (
        f"{dimension} labels permuted among name pairs of one {PERMUTED_WITHIN[dimension]} and "
        "design role (the cells a pair appears in)"
    )


def _permutation_note(null: _Null) -> str:
    if null.distinct == 0:
        return "no relabelling other than the observed one exists: no permutation test"
    if null.requested == 0:
        return "no permutations requested"
    if null.exhaustive:
        fewer = (
            f" (fewer than the {null.requested} requested)"
            if null.distinct < null.requested
            else ""
        )
        return f"all {null.distinct} distinct permutations besides the observed labels{fewer}"
    return (
        f"{null.test.permutations} of {null.distinct:.4g} distinct permutations, drawn without "
        "replacement"
    )


def _null_points(
    specs: Sequence[Specification],
    contrasts: Sequence[ContrastSpec],
    starts: Sequence[CellFit],
    relabel: tuple[str, Sequence[str]],
    alpha: float,
    labels: np.ndarray,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every specification refitted under each row of ``labels`` (the labels of the name
    pairs ``relabel[1]`` in ``relabel[0]``): each contrast's estimates and p-values, one row
    per relabelling."""
    column, pair_ids = relabel
    k = sum(len(estimators_for(spec.format)) for spec in specs)
    out = {c.contrast: (np.full((len(labels), k), np.nan), np.full((len(labels), k), np.nan))
           for c in contrasts}  # fmt: skip
    for i, row in enumerate(labels):
        mapping = dict(zip(pair_ids, [str(v) for v in row], strict=True))
        for j, (_, fit) in enumerate(_fits(specs, contrasts, (column, mapping), starts)):
            for c in contrasts:
                out[c.contrast][0][i, j], out[c.contrast][1][i, j] = _curve_point(fit, c, alpha)
    return out


#: How many times per worker the log reports the permutation refits' progress.
PROGRESS_STEPS: Final = 5


class _Progress:
    """Logs the relabellings refitted so far, as their chunks come back."""

    def __init__(self, dimension: str, total: int, fits: int) -> None:
        self.dimension, self.total, self.fits = dimension, total, fits
        self.count, self.started = 0, time.monotonic()

    def done(self, part: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict:
        self.count += len(next(iter(part.values()))[0]) if part else 0
        log.info(
            "specification curve: %s relabellings refitted: %d of %d (%d fits each), %.0f s",
            self.dimension,
            self.count,
            self.total,
            self.fits,
            time.monotonic() - self.started,
        )
        return part


def _permutation_tests(
    specs: Sequence[Specification],
    contrasts: Sequence[ContrastSpec],
    observed: Mapping[str, tuple[np.ndarray, np.ndarray]],
    frames: AnalysisFrames,
    starts: Sequence[CellFit],
    *,
    permutations: int,
    alpha: float,
    seed: int,
    workers: int = 1,
) -> dict[str, _Null]:
    """Each contrast's curve test against its dimension's relabellings (one set per dimension,
    shared by its contrasts), every specification refitted under each, the relabellings split
    over ``workers`` processes (the result does not depend on how many)."""
    pairs = name_pair_groups(frames)
    out: dict[str, _Null] = {}
    for dimension in dict.fromkeys(c.dimension for c in contrasts):
        within = PERMUTED_WITHIN[dimension]
        rng = np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(dimension.encode())]))
        strata = [f"{a}|{b}" for a, b in zip(pairs[within], pairs["role"], strict=True)]
        relabellings = within_strata_permutations(
            pairs[dimension].to_list(), strata, permutations, rng
        )
        specs_d = [c for c in contrasts if c.dimension == dimension]
        relabel = (DIMENSION_COLUMNS[dimension], pairs[PAIR].to_list())
        job = functools.partial(_null_points, specs, specs_d, starts, relabel, alpha)
        labels = relabellings.labels
        # small chunks, so that the log says how far the refits are (each relabelling is
        # refitted on its own: the chunking changes no result)
        chunks = np.array_split(labels, max(1, min(len(labels), PROGRESS_STEPS * workers)))
        progress = _Progress(dimension, len(labels), len(starts))
        if workers > 1 and len(chunks) > 1:
            # spawned, not forked: a forked worker can inherit a lock held by a polars thread
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(min(workers, len(chunks)), mp_context=context) as pool:
                parts = [progress.done(part) for part in pool.map(job, chunks)]
        else:
            parts = [progress.done(job(chunk)) for chunk in chunks]
        null_y = {c.contrast: np.vstack([part[c.contrast][0] for part in parts]) for c in specs_d}
        null_p = {c.contrast: np.vstack([part[c.contrast][1] for part in parts]) for c in specs_d}
        for c in specs_d:
            y, p = observed[c.contrast]
            test = curve_test(y, p, null_y[c.contrast], null_p[c.contrast], alpha)
            out[c.contrast] = _Null(
                test, permutations, relabellings.distinct, relabellings.exhaustive
            )
    return out


# --- the tables ---------------------------------------------------------------------------------
def specification_curve(
    frames: AnalysisFrames,
    prereg: Preregistration,
    *,
    contrasts: Sequence[str] = DEFAULT_CONTRASTS,
    permutations: int = 0,
    alpha: float | None = None,
    seed: int = 0,
    pre_registered: Status | bool = False,
    workers: int = 1,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The SPECIFICATION_CURVE table (every specification x contrast of ``contrasts``, with
    its verdict) and the SPECIFICATION_SUMMARY table (per contrast: counts by verdict, the
    curve's statistics and their p-values over ``permutations`` relabellings, seeded by
    ``seed``, refitted in ``workers`` processes). ``alpha`` defaults to the pre-registration's.
    Everything is exploratory. The workers are spawned and import the calling script again: a
    script that asks for more than one keeps its body under ``if __name__ == "__main__":``."""
    alpha = prereg.alpha if alpha is None else alpha
    if not 0 < alpha < 1:
        raise InputError("specification curve", f"alpha {alpha} is not in (0, 1)", "alpha")
    specs_c = contrasts_of_interest(contrasts)
    specs = list(specifications(frames))
    log.info(
        "specification curve: %d specifications of %s; %d permutations per dimension",
        len(specs),
        ", ".join(c.contrast for c in specs_c),
        permutations,
    )
    records: list[dict[str, object]] = []
    points: dict[str, list[tuple[float, float]]] = {c.contrast: [] for c in specs_c}
    starts = []
    for spec, fit in _fits(specs, specs_c):
        starts.append(fit)
        for c in specs_c:
            records.append(_record(spec, fit, c, prereg, alpha, pre_registered))
            points[c.contrast].append(_curve_point(fit, c, alpha))
    order = {c.contrast: i for i, c in enumerate(specs_c)}
    curve = pl.DataFrame(records, schema=dict(CURVE_SCHEMA)).sort(
        pl.col("contrast").replace_strict(order, return_dtype=pl.Int64), maintain_order=True
    )
    observed = {
        c: (np.array([y for y, _ in v], dtype=np.float64), np.array([p for _, p in v]))
        for c, v in points.items()
    }
    nulls = _permutation_tests(
        specs,
        specs_c,
        observed,
        frames,
        starts,
        permutations=permutations,
        alpha=alpha,
        seed=seed,
        workers=workers,
    )
    summary = [
        _summary(c, curve.filter(pl.col("contrast") == c.contrast), nulls[c.contrast], alpha)
        | {"label": _label(PRIMARY, pre_registered) + _arms_note(specs)}
        for c in specs_c
    ]
    return curve, pl.DataFrame(summary, schema=dict(SUMMARY_SCHEMA))


def _arms_note(specs: Sequence[Specification]) -> str:
    others = sorted({s.arm for s in specs} - {PRIMARY})
    return f"; extension arms {others} are choices" if others else ""


def _summary(c: ContrastSpec, rows: pl.DataFrame, null: _Null, alpha: float) -> dict[str, object]:
    counts = {v: int((rows["verdict"] == v).sum()) for v in VERDICTS}
    stats = null.test.observed
    sign = {1: "favours", -1: "penalises"}.get(stats.dominant_sign)
    family = rows.filter(pl.col("family_spec"))
    return {
        "contrast": c.contrast,
        "dimension": c.dimension,
        "focal": c.focal,
        "reference": c.reference,
        "specifications": rows.height,
        "estimable": stats.specifications,
        **{v.replace(" ", "_"): n for v, n in counts.items()},
        "alpha": alpha,
        "median_estimate_sd": stats.median,
        "p_median": null.test.p_median,
        "significant": stats.significant,
        "share_significant": stats.share_significant,
        "p_share": null.test.p_share,
        "dominant_sign": sign,
        "significant_dominant": stats.dominant,
        "p_dominant": null.test.p_dominant,
        "permutations": null.test.permutations,
        "permutations_requested": null.requested,
        "permutations_distinct": float(null.distinct),
        "permutation_scheme": _scheme(c.dimension),
        "permutation_note": _permutation_note(null),
        "family_verdicts": "; ".join(
            f"{r['domain']} {r['format']}: {r['verdict']}" for r in family.iter_rows(named=True)
        )
        or None,
    }
