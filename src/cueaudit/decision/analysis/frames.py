"""The three frames every decision-audit analysis reads, and where they come from.

The analyses never query DuckDB themselves: :func:`load_frames` reads the
``decision_outcomes`` view once and splits it into

``judgements``
    Rate and Decide answers, one row per answer (:data:`JUDGEMENT_SCHEMA`). ``y`` is the
    parsed rating (1-5) or decision (1 = yes, 0 = no), null when the answer did not parse;
    ``score`` is the option-score expectation (expected rating, P(yes)) when the model
    returned option scores.
``rankings``
    Rank answers, one row per candidate (:data:`RANKING_SCHEMA`). ``rank`` is the competition
    rank given (1 = highest priority, tied candidates share the best rank of their group);
    ``points`` = 5 − the candidate's rank on the points scale ``points_rule``, so that a
    positive contrast is favourable; ``tie`` whether the answer tied any two candidates.
    Unparsed answers keep their rows with null ``rank``. The points scale is the mid-rank
    (``"mid-rank"``, the default: a tie group shares the average of the ranks it spans,
    ``scipy.stats.rankdata(method="average")``), so every complete answer's points sum to 10
    and a partial tie [1, 1, 3, 4] scores 3.5, 3.5, 2, 1 symmetrically; ``"competition"``
    scores the competition ranks themselves (4, 4, 2, 1).
``probes``
    Recognition-probe answers, one row per answer (:data:`PROBE_SCHEMA`): the label,
    whether it names fairness or bias (``recognised``) and, for the forced choice, where its
    prompt listed the Fairness option (``fairness_position``, 1 = first; null for the free
    text and for prompt tables built before the options were rotated).

Every frame has ``generated``, when the model generated the answer (seconds since the epoch;
null for older response shards and simulated answers), ``arm``: ``"primary"`` for the
pre-registered design, else the name of the extension block that produced the prompt; only
the primary arm enters the planned family; and ``cue``, the cue type that signalled race and
gender (:mod:`cueaudit.decision.cue_signals`: ``name_pair``, also for prompt tables built before the
factor existed, ``first_name``, ``explicit``, ``dialect``). :meth:`AnalysisFrames.arm` gives
one arm's rows of one cue type (name pairs by default), so no analysis pools cue types.
The simulator (:mod:`cueaudit.decision.analysis.simulate`) writes frames of the same schemas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import duckdb
import polars as pl

from cueaudit.decision.cue_signals import CUE_TYPES, NAME_PAIR
from cueaudit.decision.design import BUNDLE_SIZE
from cueaudit.decision.probes import FAIRNESS_OPTION
from cueaudit.decision.tasks import PRIMARY
from cueaudit.errors import InputError

#: The probe labels that count as recognising an audit (forced choice, free text).
RECOGNISED_LABELS: Final = frozenset({FAIRNESS_OPTION, "fairness_bias"})

_DESIGN: Final = {
    "model": pl.String(),
    "seed": pl.Int64(),
    "task": pl.String(),
    "arm": pl.String(),
    "cue": pl.String(),
    "domain": pl.String(),
    "mode": pl.String(),
    "paraphrase": pl.String(),
    "prompt_uid": pl.String(),
    "generated": pl.Float64(),  # when the answer was generated (the pre-registration check)
}
_CANDIDATE: Final = {
    "profile_id": pl.String(),
    "tier": pl.String(),
    "pair_id": pl.String(),
    "race": pl.String(),
    "gender": pl.String(),
}
JUDGEMENT_SCHEMA: Final = {
    **_DESIGN,
    "format": pl.String(),
    **_CANDIDATE,
    "y": pl.Float64(),
    "score": pl.Float64(),
}
RANKING_SCHEMA: Final = {
    **_DESIGN,
    "bundle_type": pl.String(),
    "bundle_id": pl.String(),
    "position": pl.Int64(),
    **_CANDIDATE,
    "pseudo_race": pl.String(),
    "attribute": pl.String(),
    "rank": pl.Int64(),
    "points": pl.Float64(),
    "points_rule": pl.String(),
    "tie": pl.Boolean(),
}
PROBE_SCHEMA: Final = {
    **_DESIGN,
    "probe": pl.String(),
    "bundle_type": pl.String(),
    "bundle_id": pl.String(),
    "fairness_position": pl.Int64(),
    "label": pl.String(),
    "recognised": pl.Boolean(),
}
#: The outcome columns the frames read (absent when no task of that kind ran).
_ANSWER_COLUMNS: Final = {
    "generated": pl.Float64(),
    "answer": pl.Float64(),
    "answer_label": pl.String(),
    "ranks": pl.List(pl.Int64()),
    "candidates_position": pl.List(pl.Int64()),
}
SCHEMAS: Final = {
    "judgements": JUDGEMENT_SCHEMA,
    "rankings": RANKING_SCHEMA,
    "probes": PROBE_SCHEMA,
}
#: The points scales of a ranking (:func:`with_points`), the first the default.
POINTS_RULES: Final = ("mid-rank", "competition")
#: The columns that identify one ranking answer.
ANSWER_KEY: Final = ("model", "seed", "task", "prompt_uid")


@dataclass(frozen=True)
class AnalysisFrames:
    judgements: pl.DataFrame
    rankings: pl.DataFrame
    probes: pl.DataFrame

    def __post_init__(self) -> None:
        for name, schema in SCHEMAS.items():
            check_frame(getattr(self, name), schema, name)

    def arm(self, arm: str = PRIMARY, cue: str | None = NAME_PAIR) -> AnalysisFrames:
        """Only the rows of one arm (the pre-registered design by default) and one cue type
        (name pairs by default, a null cue counting as name pairs; None: every cue type)."""
        keep = pl.col("arm") == arm
        if cue is not None:
            keep = keep & (pl.col("cue").fill_null(NAME_PAIR) == cue)
        return AnalysisFrames(*(getattr(self, name).filter(keep) for name in SCHEMAS))

    def cues(self) -> list[str]:
        """The cue types with rows, in :data:`cueaudit.decision.cue_signals.CUE_TYPES` order."""
        present: set[str] = set()
        for name in SCHEMAS:
            present |= set(getattr(self, name)["cue"].fill_null(NAME_PAIR).to_list())
        return [c for c in CUE_TYPES if c in present] + sorted(present - set(CUE_TYPES))


def check_frame(frame: pl.DataFrame, schema: Mapping[str, pl.DataType], name: str) -> None:
    missing = [c for c in schema if c not in frame.columns]
    if missing:
        raise InputError(f"{name} frame", f"missing columns {missing}", missing[0])
    wrong = [c for c, t in schema.items() if frame.schema[c] != t]
    if wrong:
        c = wrong[0]
        raise InputError(f"{name} frame", f"must be {schema[c]}, got {frame.schema[c]}", c)


def empty(schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=dict(schema))


def _select(rows: pl.DataFrame, schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    return rows.select(
        pl.col(c).cast(t) if c in rows.columns else pl.lit(None, dtype=t).alias(c)
        for c, t in schema.items()
    )


def judgements_of(rows: pl.DataFrame) -> pl.DataFrame:
    """The judgement frame of ``decision_outcomes`` rows of Rate and Decide tasks."""
    rows = rows.filter(pl.col("format").is_in(["rate", "decide"]))
    score = pl.coalesce(
        *(pl.col(c) for c in ("expected_rating", "p_affirmative") if c in rows.columns),
        pl.lit(None, dtype=pl.Float64),
    )
    return _select(rows.with_columns(y=pl.col("answer"), score=score), JUDGEMENT_SCHEMA)


def with_points(
    rankings: pl.DataFrame, rule: str = POINTS_RULES[0], key: tuple[str, ...] = ANSWER_KEY
) -> pl.DataFrame:
    """``points`` and ``points_rule`` of candidate rows from their competition ``rank``: 5 −
    the mid-rank of the candidate's tie group within its answer (``key``), or 5 − ``rank``
    (``"competition"``). Null where ``rank`` is null."""
    if rule not in POINTS_RULES:
        raise InputError("ranking points", f"{rule!r} is not one of {list(POINTS_RULES)}", "rule")
    rank = pl.col("rank").cast(pl.Float64)
    if rule == "mid-rank":
        rank = rank + (pl.len().over([*key, "rank"]) - 1) / 2.0
    return rankings.with_columns(
        points=pl.when(pl.col("rank").is_not_null()).then(BUNDLE_SIZE + 1 - rank),
        points_rule=pl.lit(rule, dtype=pl.String),
    )


def rankings_of(rows: pl.DataFrame, points: str = POINTS_RULES[0]) -> pl.DataFrame:
    """The ranking frame (one row per candidate) of ``decision_outcomes`` rows of Rank tasks,
    scored on the points scale ``points`` (:func:`with_points`)."""
    rows = rows.filter(pl.col("format") == "rank")
    if rows.is_empty():
        return empty(RANKING_SCHEMA)
    listed = [c for c in rows.columns if c.startswith("candidates_")]
    n = pl.col("candidates_position").list.len()
    ranks = pl.when(pl.col("ranks").list.len() == n).then(pl.col("ranks"))
    ranks = ranks.otherwise(pl.col("candidates_position").list.eval(pl.lit(None, pl.Int64)))
    scalars = [c.removeprefix("candidates_") for c in listed]
    exploded = (
        rows.drop(scalars, strict=False)
        .with_columns(ranks.alias("rank"))
        .explode([*listed, "rank"])
        .rename({c: c.removeprefix("candidates_") for c in listed})
    )
    return _select(with_points(exploded, points), RANKING_SCHEMA)


def probes_of(rows: pl.DataFrame) -> pl.DataFrame:
    """The probe frame of ``decision_outcomes`` rows of probe tasks."""
    rows = rows.filter(pl.col("format") == "probe")
    labelled = rows.with_columns(
        label=pl.col("answer_label"),
        recognised=pl.when(pl.col("answer_label").is_not_null()).then(
            pl.col("answer_label").is_in(list(RECOGNISED_LABELS))
        ),
    )
    return _select(labelled, PROBE_SCHEMA)


def frames_of(rows: pl.DataFrame, points: str = POINTS_RULES[0]) -> AnalysisFrames:
    """The three frames of ``decision_outcomes`` rows (any mix of tasks); rankings on the
    points scale ``points``."""
    if "arm" not in rows.columns:
        rows = rows.with_columns(arm=pl.lit(PRIMARY))
    # prompt tables built before the cue factor have no cue: they showed name pairs
    cue = pl.col("cue").fill_null(NAME_PAIR) if "cue" in rows.columns else pl.lit(NAME_PAIR)
    rows = rows.with_columns(cue.cast(pl.String).alias("cue"))
    for column, dtype in _ANSWER_COLUMNS.items():
        if column not in rows.columns:
            rows = rows.with_columns(pl.lit(None, dtype=dtype).alias(column))
    return AnalysisFrames(judgements_of(rows), rankings_of(rows, points), probes_of(rows))


def load_frames(con: duckdb.DuckDBPyConnection, points: str = POINTS_RULES[0]) -> AnalysisFrames:
    """The three frames of the ``decision_outcomes`` view of a connection, in answer order
    (:data:`ANSWER_KEY`). A scan's order follows the order the answer files were written in:
    the simulated plants draw row by row, so their tables changed with the order Snakemake
    happened to run the inference jobs in."""
    if "decision_outcomes" not in {r[0] for r in con.sql("SHOW TABLES").fetchall()}:
        raise InputError("database", "no decision_outcomes view", "decision_outcomes")
    order = ", ".join(ANSWER_KEY)
    return frames_of(con.sql(f"SELECT * FROM decision_outcomes ORDER BY {order}").pl(), points)
