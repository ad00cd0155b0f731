"""The decision audit's DuckDB views and its parse-rate grouping."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

import duckdb
import polars as pl

from cueaudit.report import write_table
from cueaudit.store import ParseRateGroups, ViewBuilder, connect, relation_columns, sql_list

log = logging.getLogger(__name__)

#: Parse rates per model, seed, task, format, mode and bundle type.
PARSE_RATES: Final = ParseRateGroups(by=("format", "mode", "bundle_type"))


def register_views(con: duckdb.DuckDBPyConnection, tasks: Sequence[str]) -> None:
    """``decision_outcomes``: every decision-audit outcome beside its prompt's design columns."""
    names = sql_list(tasks)
    design = [
        c
        for c in relation_columns(con, "prompts")
        if c not in ("prompt_uid", "task", "text") and c != "group"
    ]
    columns = ", ".join(f'p."{c}"' for c in design)
    con.execute(
        f"""
        CREATE OR REPLACE VIEW decision_outcomes AS
        SELECT o.*, {columns}
        FROM outcomes o JOIN prompts p USING (prompt_uid, task)
        WHERE o.task IN ({names})
        """
    )


def database_views(
    task_outcomes: Mapping[str, str], settings: Mapping[str, Any]
) -> Sequence[ViewBuilder]:
    tasks = list(task_outcomes)
    return [lambda con: register_views(con, tasks)]


def outcome_summary(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Per model, task, format and mode: answers, the prompts of the task that got no answer
    from the model under one of its seeds (``n_missing``: a deleted or lost row is a counted
    gap, not a silent one), parse rate, constrained answers, answers with option scores, and
    where the answers were read from (text, JSON, tool call)."""
    columns = set(relation_columns(con, "decision_outcomes"))
    ranks = "ranks" if "ranks" in columns else "CAST(NULL AS BIGINT[])"
    label = "answer_label" if "answer_label" in columns else "CAST(NULL AS VARCHAR)"
    answer = "answer" if "answer" in columns else "CAST(NULL AS DOUBLE)"
    scored = [c for c in columns if c.startswith(("p_rating_", "p_affirmative", "p_label_"))]
    has_scores = " OR ".join(f"{c} IS NOT NULL" for c in sorted(scored)) or "FALSE"
    summary: pl.DataFrame = con.sql(
        f"""
        SELECT model, task, format, mode,
               count(*) AS n_responses,
               count_if({answer} IS NOT NULL OR {label} IS NOT NULL OR {ranks} IS NOT NULL)
                   AS n_parsed,
               n_parsed / count(*) AS parse_rate,
               count_if(constrained) AS n_constrained,
               count_if({has_scores}) AS n_option_scored,
               count_if(answer_source = 'tool_call') AS n_tool_calls,
               mode(parse_error) AS main_parse_error
        FROM decision_outcomes
        GROUP BY ALL ORDER BY ALL
        """
    ).pl()
    names = sql_list(summary["task"].unique())
    expected = con.sql(
        f"""
        WITH runs AS (SELECT DISTINCT model, seed, task FROM outcomes WHERE task IN ({names})),
             sizes AS (SELECT task, count(*) AS n FROM prompts WHERE task IN ({names})
                       GROUP BY task)
        SELECT model, task, sum(n) AS n_expected FROM runs JOIN sizes USING (task)
        GROUP BY ALL
        """
    ).pl()
    summary = summary.join(expected, on=["model", "task"], how="left").with_columns(
        n_missing=(pl.col("n_expected") - pl.col("n_responses")).clip(lower_bound=0)
    )
    missing = summary.filter(pl.col("n_missing") > 0)
    for row in missing.iter_rows(named=True):
        log.warning(
            "%s, %s: %d of %d answers missing", row["model"], row["task"], row["n_missing"],
            row["n_expected"],
        )  # fmt: skip
    order = ["model", "task", "format", "mode", "n_responses", "n_expected", "n_missing"]
    return summary.select(*order, *[c for c in summary.columns if c not in order])


def write_outcome_summary(
    prompts: Sequence[str], outcomes: Sequence[str], tasks: Sequence[str], out: str
) -> pl.DataFrame:
    """The outcome summary of the decision tasks as CSV + Markdown at ``out``."""
    con = connect(prompts=prompts, outcomes=outcomes, views=[lambda c: register_views(c, tasks)])
    summary = outcome_summary(con)
    write_table(summary, out, "Decision audit: answers parsed per task, format and mode")
    return summary
