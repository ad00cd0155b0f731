"""DuckDB views over the workflow's parquet tables, and the published database file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import duckdb
import polars as pl

from cueaudit.io import atomic_path

BinaryOutcome = Literal["answer", "probability"]


def _files(paths: Sequence[str | Path]) -> str:
    quoted = ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths)
    return f"read_parquet([{quoted}], union_by_name = true)"


def register_views(
    con: duckdb.DuckDBPyConnection,
    *,
    prompts: Sequence[str | Path],
    outcomes: Sequence[str | Path],
    task_outcomes: Mapping[str, str],
    binary_outcome: BinaryOutcome = "answer",
    race_prediction_task: str = "race_prediction",
) -> None:
    """Create views ``prompts``, ``outcomes`` and ``observations`` (the analysis input), and
    ``race_predictions`` when the race-prediction task's outcomes carry ``answer_label``.

    ``observations`` has one row per response of an advice task (outcome kind ``binary`` or
    ``usd``) with its cue, the prompt's ``fk_grade`` (null when the prompt tables have none)
    and the outcome analysed: the parsed answer, or for yes/no tasks with
    ``binary_outcome="probability"`` P(Yes | Yes or No). ``race_predictions`` has one row per
    race-prediction response: model, seed, source_prompt_uid, source_task, predicted.
    """
    con.execute(f"CREATE OR REPLACE VIEW prompts AS SELECT * FROM {_files(prompts)}")
    con.execute(f"CREATE OR REPLACE VIEW outcomes AS SELECT * FROM {_files(outcomes)}")
    kinds = pl.DataFrame(
        {"task": list(task_outcomes), "outcome_kind": list(task_outcomes.values())},
        schema={"task": pl.String, "outcome_kind": pl.String},
    )
    con.register("task_outcome_kinds", kinds)
    use_probability = "TRUE" if binary_outcome == "probability" else "FALSE"
    prompt_columns = set(con.sql("SELECT * FROM prompts LIMIT 0").columns)
    outcome_columns = set(con.sql("SELECT * FROM outcomes LIMIT 0").columns)
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
        JOIN task_outcome_kinds k USING (task)
        WHERE k.outcome_kind IN ('binary', 'usd')
        """
    )
    if {"source_prompt_uid"} <= prompt_columns and "answer_label" in outcome_columns:
        con.execute(
            f"""
            CREATE OR REPLACE VIEW race_predictions AS
            SELECT o.model, o.seed, p.source_prompt_uid, p.source_task,
                   CAST(o.answer_label AS VARCHAR) AS predicted
            FROM outcomes o JOIN prompts p USING (prompt_uid, task)
            WHERE o.task = '{race_prediction_task.replace("'", "''")}'
            """
        )


def has_relation(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """True if a table or view ``name`` exists in the connection."""
    try:
        con.sql(f"SELECT * FROM {name} LIMIT 0")
    except duckdb.CatalogException:
        return False
    return True


def parse_rates(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Parse rate of the generated answers per model × task × cue, with the main failure.
    A race-prediction answer counts as parsed when it carries an ``answer_label``."""
    columns = set(con.sql("SELECT * FROM outcomes LIMIT 0").columns)
    label = "o.answer_label" if "answer_label" in columns else "NULL"
    return con.sql(
        f"""
        WITH joined AS (
            SELECT o.model, o.task, p.cue,
                   CASE WHEN o.answer IS NOT NULL OR {label} IS NOT NULL THEN 1 END AS answer,
                   o.parse_error, o.p_affirmative
            FROM outcomes o JOIN prompts p USING (prompt_uid, task)
        ),
        error_counts AS (
            SELECT model, task, cue, parse_error, count(*) AS n_error
            FROM joined WHERE parse_error IS NOT NULL
            GROUP BY model, task, cue, parse_error
        ),
        reasons AS (
            SELECT *, row_number() OVER (PARTITION BY model, task, cue
                                         ORDER BY n_error DESC, parse_error) AS rank
            FROM error_counts
        )
        SELECT j.model, j.task, j.cue,
               count(*) AS n_responses,
               count(j.answer) AS n_parsed,
               count(j.answer) / count(*) AS parse_rate,
               count(j.p_affirmative) AS n_probability,
               any_value(r.parse_error) AS main_parse_error,
               coalesce(any_value(r.n_error), 0) AS n_main_parse_error
        FROM joined j
        LEFT JOIN reasons r ON r.model = j.model AND r.task = j.task AND r.cue = j.cue
                           AND r.rank = 1
        GROUP BY j.model, j.task, j.cue
        ORDER BY j.model, j.task, j.cue
        """
    ).pl()


def build_database(
    db_path: str | Path,
    *,
    prompts: Sequence[str | Path],
    responses: Sequence[str | Path],
    outcomes: Sequence[str | Path],
    tables: Mapping[str, str | Path] | None = None,
) -> None:
    """Write the DuckDB file with the base tables and the analysis tables (parquet or CSV).

    The file is built under a temporary name and renamed, so a failure leaves no partial
    database behind.
    """
    with atomic_path(db_path) as tmp:
        tmp.unlink()
        con = duckdb.connect(str(tmp))
        try:
            for name, paths in (
                ("prompts", prompts),
                ("responses", responses),
                ("outcomes", outcomes),
            ):
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM {_files(paths)}")
            for name, path in (tables or {}).items():
                reader = "read_parquet" if str(path).endswith(".parquet") else "read_csv_auto"
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM {reader}('{path}')")
        finally:
            con.close()
