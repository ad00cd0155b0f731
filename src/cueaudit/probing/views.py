"""The probing study's DuckDB views over the shared ``prompts`` and ``outcomes`` relations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Final, Literal

import duckdb

from cueaudit.probing.race_prediction import TASK as RACE_PREDICTION
from cueaudit.store import ParseRateGroups, ViewBuilder, relation_columns, sql_literal

BinaryOutcome = Literal["answer", "probability"]

#: Grouping of the study's parse-rate table (results/tables/parse_rates.csv and the
#: database's ``parse_rates``): per model, task and cue, seeds pooled.
PARSE_RATES: Final = ParseRateGroups(by=("cue",), per_seed=False)


def _task_kinds(task_outcomes: Mapping[str, str]) -> str:
    """The task → outcome-kind mapping as an inline relation (so views persist in a file)."""
    if not task_outcomes:
        return (
            "(SELECT CAST(NULL AS VARCHAR) AS task, CAST(NULL AS VARCHAR) AS outcome_kind"
            " WHERE FALSE)"
        )
    rows = ", ".join(f"({sql_literal(t)}, {sql_literal(k)})" for t, k in task_outcomes.items())
    return f"(SELECT * FROM (VALUES {rows}) AS kinds(task, outcome_kind))"


def register_views(
    con: duckdb.DuckDBPyConnection,
    task_outcomes: Mapping[str, str],
    binary_outcome: BinaryOutcome = "answer",
) -> None:
    """Create the view ``observations`` (the analysis input), and ``race_predictions`` when
    the race-prediction task's outcomes carry ``answer_label``.

    ``observations`` has one row per response of an advice task (outcome kind ``binary`` or
    ``usd``) with its cue, the prompt's ``fk_grade`` (null when the prompt tables have none)
    and the outcome analysed: the parsed answer, or for yes/no tasks with
    ``binary_outcome="probability"`` P(Yes | Yes or No). ``race_predictions`` has one row per
    race-prediction response: model, seed, source_prompt_uid, source_task, predicted.
    """
    use_probability = "TRUE" if binary_outcome == "probability" else "FALSE"
    prompt_columns = set(relation_columns(con, "prompts"))
    outcome_columns = set(relation_columns(con, "outcomes"))
    fk = "p.fk_grade" if "fk_grade" in prompt_columns else "CAST(NULL AS DOUBLE)"
    con.execute(
        f"""
        CREATE OR REPLACE VIEW observations AS
        SELECT o.model, o.seed, o.task, o.prompt_uid, p.base_id, p.cue, p.cue_type,
               p.cue_source, p.race, p.gender, p.cue_value,
               CAST({fk} AS DOUBLE) AS fk_grade,
               CASE WHEN k.outcome_kind = 'binary' AND {use_probability}
                    THEN o.p_affirmative ELSE o.answer END AS outcome
        FROM outcomes o
        JOIN prompts p USING (prompt_uid, task)
        JOIN {_task_kinds(task_outcomes)} k USING (task)
        WHERE k.outcome_kind IN ('binary', 'usd')
        """
    )
    if "source_prompt_uid" in prompt_columns and "answer_label" in outcome_columns:
        con.execute(
            f"""
            CREATE OR REPLACE VIEW race_predictions AS
            SELECT o.model, o.seed, p.source_prompt_uid, p.source_task,
                   CAST(o.answer_label AS VARCHAR) AS predicted
            FROM outcomes o JOIN prompts p USING (prompt_uid, task)
            WHERE o.task = {sql_literal(RACE_PREDICTION)}
            """
        )


def study_views(
    task_outcomes: Mapping[str, str],
    binary_outcome: BinaryOutcome = "answer",
) -> ViewBuilder:
    """:func:`register_views` with these settings, as the store's ``views`` take it."""
    return partial(
        register_views,
        task_outcomes=dict(task_outcomes),
        binary_outcome=binary_outcome,
    )


def database_views(
    task_outcomes: Mapping[str, str], settings: Mapping[str, Any]
) -> Sequence[ViewBuilder]:
    """The study's views for :func:`cueaudit.store.build_database`, with the analysis
    ``settings`` (``binary_outcome``) of its tables."""
    return [study_views(task_outcomes, settings.get("binary_outcome", "answer"))]
