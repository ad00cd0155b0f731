"""The composition check of every subsample the analysis fits (paper §4: the robustness arm
whose race tracked application quality).

The design is balanced by construction (:func:`cueaudit.decision.design.check_design`), but
the analysis only sees parsed answers: a parse failure that tracks race (a model that refuses
Black-named applicants more often, a tool call that breaks on long profiles shown more often
under one name) makes the analysed subsample confounded even though the design was not. So each
subsample is tested again, on the rows that enter a fit, by Pearson's chi-square test of
independence (:func:`~cueaudit.decision.design.check_composition` with ``exact=False``):

- judgements, per domain × format (parsed ``y``): race and gender against profile and tier;
- rankings, per domain × bundle type (complete answers): the contrasts the bundle type is
  built to balance (:data:`cueaudit.decision.design.CONTRASTS`: race against profile, tier
  and position; placebo: pseudo-race as well; irrelevant-attribute: attribute and race against
  position).

A group or factor with a single level in a stratum has nothing to test and is skipped. A
failure raises :class:`~cueaudit.decision.design.CompositionError` naming the cells, which
stops the job. The default ``alpha`` is 0.001: every subsample is tested, the counts repeat
the same prompts over models and seeds (so the test is anti-conservative), and a real
confound of the robustness-arm kind gives p-values far below it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import polars as pl

from cueaudit.decision.analysis.frames import PRIMARY, AnalysisFrames
from cueaudit.decision.analysis.instrument import complete_rankings
from cueaudit.decision.design import CONTRASTS, CompositionTest, check_composition

ALPHA: Final = 0.001
JUDGEMENT_CONTRASTS: Final = (("race", ("profile_id", "tier")), ("gender", ("profile_id", "tier")))
COMPOSITION_SCHEMA: Final = {
    "arm": pl.String(),
    "name": pl.String(),
    "stratum": pl.String(),
    "group": pl.String(),
    "factor": pl.String(),
    "exact": pl.Boolean(),
    "statistic": pl.Float64(),
    "p_value": pl.Float64(),
    "n": pl.Int64(),
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
) -> list[CompositionTest]:
    results: list[CompositionTest] = []
    for _, stratum in sorted(
        frame.partition_by(list(by), as_dict=True).items(), key=lambda kv: tuple(map(str, kv[0]))
    ):
        for group, factors in contrasts:
            for factor in factors:
                if min(_levels(stratum, group, factor)) < 2:
                    continue
                results += check_composition(
                    stratum,
                    group=group,
                    against=(factor,),
                    name=name,
                    by=by,
                    exact=False,
                    alpha=alpha,
                )
    return results


def check_analysis_subsamples(
    frames: AnalysisFrames, *, arm: str = PRIMARY, alpha: float = ALPHA
) -> pl.DataFrame:
    """COMPOSITION table: one row per passed test of every analysed subsample of ``arm``.

    Raises :class:`~cueaudit.decision.design.CompositionError` at the first failed test, its
    message naming the arm."""
    part = frames.arm(arm)
    prefix = "" if arm == PRIMARY else f"arm {arm}: "
    results: list[CompositionTest] = []
    judged = part.judgements.filter(pl.col("y").is_not_null())
    if not judged.is_empty():
        results += _check(
            judged, f"{prefix}judgements", ("domain", "format"), JUDGEMENT_CONTRASTS, alpha
        )
    ranked = complete_rankings(part.rankings)
    for kind, contrasts in CONTRASTS.items():
        rows = ranked.filter(pl.col("bundle_type") == kind)
        if not rows.is_empty():
            name = f"{prefix}rankings {kind}"
            results += _check(rows, name, ("domain", "bundle_type"), contrasts, alpha)
    return pl.DataFrame(
        [
            (arm, t.name, t.stratum, t.group, t.against, t.exact, t.statistic, t.p_value, t.n)
            for t in results
        ],
        schema=COMPOSITION_SCHEMA,
        orient="row",
    )
