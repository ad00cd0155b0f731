"""The composition check of every subsample the analysis fits (paper §4: the robustness arm
whose race tracked application quality).

The design is balanced by construction
(:func:`cueaudit.decision.composition_checks.check_design`), but the analysis only sees parsed
answers: a parse failure that tracks race (a model that refuses
Black-named applicants more often, a tool call that breaks on long profiles shown more often
under one name) makes the analysed subsample confounded even though the design was not. Each
check is Pearson's chi-square test of independence
(:func:`~cueaudit.decision.composition_checks.check_composition` with ``exact=False``):

- judgements, per domain × format: race and gender against profile and tier;
- rankings, per domain × bundle type: the contrasts the bundle type is built to balance
  (:data:`cueaudit.decision.composition_checks.COMPOSITION_CHECKS`: race against profile,
  tier and position; placebo: pseudo-race as well; irrelevant-attribute: attribute and race
  against position), and in disguised demographic bundles, whose rankings carry the gender
  contrast, gender against tier and position (:data:`RANKING_CHECKS`; the squares balance
  gender against tier and position, not against profile).

Two subsamples are tested (column ``subsample``):

``design``
    every answer row, parsed or not, pooled over models and modes: what the models were asked.
    A failure is a design that is not balanced and raises
    :class:`~cueaudit.decision.composition_checks.CompositionError` naming the cells, which
    stops the job.
``analysed``
    the rows that enter a fit (parsed ``y``; complete rankings) within each stratum, pooled
    (as the design) and per model × mode, so that one model's or one interface's failures
    are not diluted by the others'.
    With a balanced design a failure can only come from non-response, a finding: the row has
    ``passed`` false and ``note`` naming the cells (BH ``q_value`` over the arm's analysed
    tests below ``alpha``), and the analysis goes on, unless ``stop`` (the config's
    ``decision.analysis.stop_on_differential_nonresponse``) makes it raise.

Each cue type of an arm (:mod:`cueaudit.decision.cue_signals`) is its own subsample (``cue``; its
tests' names start ``cue <type>:``), since every cue type's contrasts are estimated apart.

An arm whose design is confounded by construction (``name_assignment: fixed_per_profile``,
the paper's wording arm) is checked the same way but never stops the analysis: its failed
design tests are reported (``passed`` false, the note naming the cells), and
:func:`check_with_flags` lists the offending profile × race cells of every failed test.

A group or factor with a single level in a stratum has nothing to test and is skipped. The
default ``alpha`` is 0.001: every subsample is tested, the counts repeat the same prompts over
models and seeds (so the test is anti-conservative), and a real confound of the
robustness-arm kind gives p-values far below it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import polars as pl

from cueaudit.decision.analysis.frames import PRIMARY, AnalysisFrames
from cueaudit.decision.analysis.instrument import complete_rankings
from cueaudit.decision.composition_checks import (
    COMPOSITION_CHECKS,
    CompositionError,
    CompositionTest,
    check_composition,
    composition_cells,
    with_half,
)
from cueaudit.decision.cue_signals import NAME_PAIR
from cueaudit.stats.multiplicity import bh_qvalues

log = logging.getLogger(__name__)

ALPHA: Final = 0.001
JUDGEMENT_CHECKS: Final = (("race", ("profile_id", "tier")), ("gender", ("profile_id", "tier")))
RANKING_CHECKS: Final[Mapping[str, tuple[tuple[str, tuple[str, ...]], ...]]] = {
    **COMPOSITION_CHECKS,
    "disguised_demographic": (
        *COMPOSITION_CHECKS["disguised_demographic"],
        ("gender", ("tier", "position")),
    ),
}
#: Where each analysed subsample is tested, before the design's strata.
ANALYSED_BY: Final = ("model", "mode")
SUBSAMPLES: Final = ("design", "analysed")
#: A failed analysed test's flagged cells: those with a Pearson residual at least this large.
FLAG_RESIDUAL: Final = 2.0
CONFOUNDED_NOTE: Final = "confounded by construction (name_assignment: fixed_per_profile)"
#: One row per offending cell of a failed test (``cell``: the format or bundle type;
#: ``model``, ``mode``: the analysed subsample's, null when pooled).
FLAGS_SCHEMA: Final = {
    "arm": pl.String(),
    "subsample": pl.String(),
    "name": pl.String(),
    "stratum": pl.String(),
    "domain": pl.String(),
    "cell": pl.String(),
    "model": pl.String(),
    "mode": pl.String(),
    "group": pl.String(),
    "factor": pl.String(),
    "group_level": pl.String(),
    "factor_level": pl.String(),
    "observed": pl.Int64(),
    "expected": pl.Float64(),
    "residual": pl.Float64(),
}
COMPOSITION_SCHEMA: Final = {
    "arm": pl.String(),
    "subsample": pl.String(),
    "name": pl.String(),
    "stratum": pl.String(),
    "group": pl.String(),
    "factor": pl.String(),
    "exact": pl.Boolean(),
    "statistic": pl.Float64(),
    "p_value": pl.Float64(),
    "q_value": pl.Float64(),
    "n": pl.Int64(),
    "passed": pl.Boolean(),
    "note": pl.String(),
}


def _levels(frame: pl.DataFrame, group: str, factor: str) -> tuple[int, int]:
    rows = frame.select(group, factor).drop_nulls()
    return rows[group].n_unique(), rows[factor].n_unique()


def _check(
    frame: pl.DataFrame,
    name: str,
    by: Sequence[str],
    contrasts: Sequence[tuple[str, Sequence[str]]],
    alpha: float,
) -> list[tuple[CompositionTest, pl.DataFrame]]:
    """Each test with its stratum's rows; a test below ``alpha`` raises (``alpha=0``: none)."""
    results: list[tuple[CompositionTest, pl.DataFrame]] = []
    for _, stratum in sorted(
        frame.partition_by(list(by), as_dict=True).items(), key=lambda kv: tuple(map(str, kv[0]))
    ):
        for group, factors in contrasts:
            for factor in factors:
                if min(_levels(stratum, group, factor)) < 2:
                    continue
                (test,) = check_composition(
                    stratum,
                    group=group,
                    against=(factor,),
                    name=name,
                    by=by,
                    exact=False,
                    alpha=alpha,
                )
                results.append((test, stratum))
    return results


def _cells(test: CompositionTest, stratum: pl.DataFrame, by: Sequence[str], alpha: float) -> str:
    """The failure message of a failed test (p <= q < alpha), naming its cells."""
    try:
        check_composition(
            stratum, group=test.group, against=(test.against,), name=test.name, by=by, alpha=alpha
        )
    except CompositionError as error:
        return str(error)
    return f"{test.name} ({test.stratum}): {test.group} depends on {test.against}"


def _subsamples(
    part: AnalysisFrames, prefix: str
) -> list[tuple[str, pl.DataFrame, pl.DataFrame, str, Any]]:
    """(name, every row, analysed rows, stratum column, checks) of each checked subsample."""
    found: list[tuple[str, pl.DataFrame, pl.DataFrame, str, Any]] = []
    if not part.judgements.is_empty():
        judged = part.judgements.filter(pl.col("y").is_not_null())
        found.append((f"{prefix}judgements", part.judgements, judged, "format", JUDGEMENT_CHECKS))
    ranked = with_half(complete_rankings(part.rankings))
    for kind, checks in RANKING_CHECKS.items():
        rows = with_half(part.rankings.filter(pl.col("bundle_type") == kind))
        if not rows.is_empty():
            analysed = ranked.filter(pl.col("bundle_type") == kind)
            found.append((f"{prefix}rankings {kind}", rows, analysed, "bundle_type", checks))
    return found


def _row(
    arm: str, subsample: str, t: CompositionTest, q: float | None, note: str | None
) -> tuple[Any, ...]:
    fields = (t.name, t.stratum, t.group, t.against, t.exact, t.statistic, t.p_value)
    return (arm, subsample, *fields, q, t.n, note is None, note)


def check_analysis_subsamples(
    frames: AnalysisFrames, *, arm: str = PRIMARY, alpha: float = ALPHA, stop: bool = False
) -> pl.DataFrame:
    """COMPOSITION table: one row per test of the design and of every analysed subsample of
    ``arm`` (see the module docstring).

    Raises :class:`~cueaudit.decision.composition_checks.CompositionError` at the first failed
    design test, and with ``stop`` at the most significant failed analysed test, its message naming
    the arm, model, mode and cells. An arm confounded by construction is checked by
    :func:`check_with_flags`."""
    return check_with_flags(frames, arm=arm, alpha=alpha, stop=stop)[0]


def check_with_flags(
    frames: AnalysisFrames,
    *,
    arm: str = PRIMARY,
    alpha: float = ALPHA,
    stop: bool = False,
    confounded: bool = False,
    cue: str = NAME_PAIR,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The COMPOSITION table (:func:`check_analysis_subsamples`) and the offending cells of
    its failed tests (:data:`FLAGS_SCHEMA`): in a failed design test every cell whose count
    differs from its count under independence (the design is balanced exactly, or not at
    all), in a failed analysed test the cells with a Pearson residual of at least
    :data:`FLAG_RESIDUAL` in size (the ones that drive the test). An arm ``confounded`` by
    construction (its design's ``name_assignment: fixed_per_profile``) never stops: its
    failures are the finding, reported in both tables. ``cue``: the cue type whose rows are
    checked (name pairs by default)."""
    part = frames.arm(arm, cue)
    prefix = "" if arm == PRIMARY else f"arm {arm}: "
    prefix += "" if cue == NAME_PAIR else f"cue {cue}: "
    design: list[tuple[CompositionTest, pl.DataFrame, tuple[str, ...]]] = []
    analysed: list[tuple[CompositionTest, pl.DataFrame, tuple[str, ...]]] = []
    for name, rows, parsed, column, contrasts in _subsamples(part, prefix):
        by = ("domain", column)
        design += [
            (t, s, by) for t, s in _check(rows, name, by, contrasts, 0.0 if confounded else alpha)
        ]
        if parsed.is_empty():
            continue
        for by in (("domain", column), (*ANALYSED_BY, "domain", column)):
            analysed += [(t, s, by) for t, s in _check(parsed, name, by, contrasts, 0.0)]
    q = bh_qvalues(np.array([t.p_value for t, _, _ in analysed], dtype=np.float64))
    failed = sorted((i for i in range(len(analysed)) if q[i] < alpha), key=lambda i: q[i])
    notes = {i: f"{_cells(*analysed[i], alpha)} (q = {q[i]:.2g})" for i in failed}
    for i in failed:
        log.warning("composition of an analysed subsample: %s", notes[i])
    if stop and failed and not confounded:
        raise CompositionError(
            f"{notes[failed[0]]}; decision.analysis.stop_on_differential_nonresponse is true"
        )
    design_notes = {
        i: f"{_cells(*test, alpha)}; {CONFOUNDED_NOTE}"
        for i, test in enumerate(design)
        if test[0].p_value < alpha
    }
    for note in design_notes.values():
        log.warning("composition of a design confounded by construction: %s", note)
    rows = [
        _row(arm, "design", t, None, design_notes.get(i)) for i, (t, _, _) in enumerate(design)
    ] + [
        _row(arm, "analysed", t, float(q[i]), notes.get(i)) for i, (t, _, _) in enumerate(analysed)
    ]
    flags = [_flags(arm, "design", *design[i], exact=True) for i in design_notes]
    flags += [_flags(arm, "analysed", *analysed[i], exact=False) for i in failed]
    table = pl.DataFrame(rows, schema=COMPOSITION_SCHEMA, orient="row")
    return table, pl.concat([pl.DataFrame(schema=FLAGS_SCHEMA), *flags])


def _flags(
    arm: str,
    subsample: str,
    test: CompositionTest,
    stratum: pl.DataFrame,
    by: Sequence[str],
    *,
    exact: bool,
) -> pl.DataFrame:
    cells = composition_cells(stratum, test.group, test.against)
    deviant = (pl.col("observed") - pl.col("expected")).abs() > 1e-9
    if not exact:
        deviant = pl.col("residual").abs() >= FLAG_RESIDUAL
    strata = {c: str(stratum[c][0]) if c in by else None for c in ("model", "mode")}
    return (
        cells.filter(deviant)
        .sort(pl.col("residual").abs(), descending=True)
        .select(
            pl.lit(arm).alias("arm"),
            pl.lit(subsample).alias("subsample"),
            pl.lit(test.name).alias("name"),
            pl.lit(test.stratum).alias("stratum"),
            pl.lit(str(stratum["domain"][0])).alias("domain"),
            pl.lit(str(stratum[by[-1]][0])).alias("cell"),
            *(pl.lit(v, pl.String).alias(c) for c, v in strata.items()),
            pl.lit(test.group).alias("group"),
            pl.lit(test.against).alias("factor"),
            pl.all(),
        )
        .cast(FLAGS_SCHEMA)  # type: ignore[arg-type]
    )
