"""DuckDB over the workflow's parquet tables, and the published database file.

Shared by every study: the base relations ``prompts``, ``responses`` and ``outcomes``, the
``parse_rates`` of the parsed answers (grouped by columns the caller names), the
``provenance`` of the answers and the ``determinism`` of each response shard (its answers
re-answered alone, cueaudit.inference.determinism). A study adds its own views through
functions it passes in (:data:`ViewBuilder`); nothing here knows which study calls it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import duckdb
import polars as pl

from cueaudit.inference.determinism import determinism_table
from cueaudit.io import atomic_path
from cueaudit.prompts import TEXT_PARTS

Paths = Sequence[str | Path]
#: Creates a study's views on a connection whose ``prompts`` and ``outcomes`` exist.
ViewBuilder = Callable[[duckdb.DuckDBPyConnection], None]

#: Tables :func:`build_database` writes itself; ``tables`` may not use these names.
SHARED_TABLES: Final = (
    "prompts",
    "responses",
    "outcomes",
    "parse_rates",
    "provenance",
    "determinism",
)
#: The table of normalised prompt rows (prefix and body, no text) behind the ``prompts`` view.
PROMPT_PARTS: Final = "prompt_parts"


def sql_literal(value: object) -> str:
    """``value`` as a quoted SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def sql_list(values: Iterable[object]) -> str:
    """``values`` as a comma-separated list of SQL string literals, ``NULL`` when empty (so
    ``x IN (...)`` matches nothing)."""
    return ", ".join(map(sql_literal, values)) or "NULL"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _files(paths: Paths) -> str:
    return f"read_parquet([{', '.join(map(sql_literal, paths))}], union_by_name = true)"


def has_relation(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """True if a table or view ``name`` exists in the connection."""
    try:
        con.sql(f"SELECT * FROM {name} LIMIT 0")
    except duckdb.CatalogException:
        return False
    return True


def relation_columns(con: duckdb.DuckDBPyConnection, name: str) -> list[str]:
    """Column names of the table or view ``name``."""
    return list(con.sql(f"SELECT * FROM {name} LIMIT 0").columns)


def _with_text(con: duckdb.DuckDBPyConnection, relation: str) -> str:
    """``SELECT`` of ``relation`` with a ``text`` column: assembled from the normalised parts
    (``prefix || body``, :data:`cueaudit.prompts.TEXT_PARTS`) where the rows have them, so
    the texts are computed only when a query reads them."""
    columns = set(con.sql(f"SELECT * FROM {relation} LIMIT 0").columns)
    if not set(TEXT_PARTS) <= columns:
        return f"SELECT * FROM {relation}"
    parts = " || ".join(map(_ident, TEXT_PARTS))
    if "text" in columns:  # normalised and text tables stacked
        return f"SELECT * REPLACE (coalesce(text, {parts}) AS text) FROM {relation}"
    return f"SELECT *, {parts} AS text FROM {relation}"


def register_inputs(
    con: duckdb.DuckDBPyConnection,
    *,
    prompts: Paths,
    outcomes: Paths,
    responses: Paths = (),
) -> None:
    """Views ``prompts`` and ``outcomes`` (and ``responses`` when given) over parquet files,
    read by column name so that files with extra columns stack; ``prompts`` has a ``text``
    column also over normalised prompt tables."""
    for name, paths in (("prompts", prompts), ("outcomes", outcomes), ("responses", responses)):
        if paths:
            select = _with_text(con, _files(paths)) if name == "prompts" else None
            con.execute(
                f"CREATE OR REPLACE VIEW {name} AS {select or f'SELECT * FROM {_files(paths)}'}"
            )


def connect(
    *,
    prompts: Paths,
    outcomes: Paths,
    responses: Paths = (),
    views: Sequence[ViewBuilder] = (),
) -> duckdb.DuckDBPyConnection:
    """An in-memory connection with :func:`register_inputs` and then each study view."""
    con = duckdb.connect()
    register_inputs(con, prompts=prompts, outcomes=outcomes, responses=responses)
    for build in views:
        build(con)
    return con


@dataclass(frozen=True)
class ParseRateGroups:
    """How a study groups its parse rates: per model, seed (unless ``per_seed`` is false:
    seeds pooled), task and the columns ``by`` (prompt columns, else outcome columns), over
    ``tasks`` (every task when None)."""

    by: tuple[str, ...] = ()
    per_seed: bool = True
    tasks: tuple[str, ...] | None = None


def _parse_rates_sql(con: duckdb.DuckDBPyConnection, groups: ParseRateGroups) -> str:
    by, per_seed = groups.by, groups.per_seed
    prompt_columns = set(relation_columns(con, "prompts"))
    outcome_columns = set(relation_columns(con, "outcomes"))
    extra = []
    for column in by:
        if column in prompt_columns:
            extra.append(f"p.{_ident(column)}")
        elif column in outcome_columns:
            extra.append(f"o.{_ident(column)}")
        else:
            raise ValueError(f"parse rates: no prompt or outcome column {column!r}")
    keys = ["model", *(["seed"] if per_seed else []), "task", *by]
    selected = ["o.model", *(["o.seed"] if per_seed else []), "o.task", *extra]
    key_list = ", ".join(map(_ident, keys))
    j_keys = ", ".join(f"j.{_ident(k)}" for k in keys)
    on_keys = " AND ".join(f"r.{_ident(k)} IS NOT DISTINCT FROM j.{_ident(k)}" for k in keys)

    def optional(column: str, cast: str) -> str:
        return f"o.{column}" if column in outcome_columns else f"CAST(NULL AS {cast})"

    answer, label = optional("answer", "DOUBLE"), optional("answer_label", "VARCHAR")
    ranks = optional("ranks", "BIGINT[]")
    names = ", ".join(map(sql_literal, groups.tasks or ()))
    tasks = (
        "TRUE" if groups.tasks is None else f"list_contains(CAST([{names}] AS VARCHAR[]), o.task)"
    )
    return f"""
        WITH joined AS (
            SELECT {", ".join(f"{s} AS {_ident(k)}" for s, k in zip(selected, keys, strict=True))},
                   CASE WHEN {answer} IS NOT NULL OR {label} IS NOT NULL OR {ranks} IS NOT NULL
                        THEN 1 END AS answer,
                   {optional("parse_error", "VARCHAR")} AS parse_error,
                   {optional("p_affirmative", "DOUBLE")} AS p_affirmative
            FROM outcomes o JOIN prompts p USING (prompt_uid, task)
            WHERE {tasks}
        ),
        error_counts AS (
            SELECT {key_list}, parse_error, count(*) AS n_error
            FROM joined WHERE parse_error IS NOT NULL
            GROUP BY {key_list}, parse_error
        ),
        reasons AS (
            SELECT *, row_number() OVER (PARTITION BY {key_list}
                                         ORDER BY n_error DESC, parse_error) AS rank
            FROM error_counts
        )
        SELECT {j_keys},
               count(*) AS n_responses,
               count(j.answer) AS n_parsed,
               count(j.answer) / count(*) AS parse_rate,
               count(j.p_affirmative) AS n_probability,
               any_value(r.parse_error) AS main_parse_error,
               coalesce(any_value(r.n_error), 0) AS n_main_parse_error
        FROM joined j
        LEFT JOIN reasons r ON {on_keys} AND r.rank = 1
        GROUP BY {j_keys}
        ORDER BY {j_keys}
        """


def parse_rates(
    con: duckdb.DuckDBPyConnection, groups: ParseRateGroups = ParseRateGroups()
) -> pl.DataFrame:
    """Parse rate of the answers per group of ``groups``, with the most frequent
    ``parse_error``. An answer counts as parsed when it has an ``answer``, an
    ``answer_label`` or ``ranks``; ``n_probability`` counts the answers with a ``p_affirmative``."""
    rates: pl.DataFrame = con.sql(_parse_rates_sql(con, groups)).pl()
    return rates


def _all_parse_rates_sql(con: duckdb.DuckDBPyConnection, groups: Sequence[ParseRateGroups]) -> str:
    """One study's parse rates, or several studies' stacked by column name (a column that
    one study does not group by is null in its rows); without any, per model, seed, task."""
    groups = groups or (ParseRateGroups(),)
    return " UNION ALL BY NAME ".join(f"({_parse_rates_sql(con, g)})" for g in groups)


# (output column, aggregate, type, the input column it needs)
_RESPONSE_SUMMARY: Final = (
    ("backend", "string_agg(DISTINCT backend, ',' ORDER BY backend)", "VARCHAR", "backend"),
    ("n_responses", "count(*)", "BIGINT", "prompt_uid"),
    ("n_cache_hits", "count_if(cache_hit)", "BIGINT", "cache_hit"),
    ("n_model_calls", "count_if(NOT cache_hit)", "BIGINT", "cache_hit"),
    ("n_constrained", "count_if(constrained)", "BIGINT", "constrained"),
    ("n_option_scored", "count(option_logprobs)", "BIGINT", "option_logprobs"),
    ("n_tool_calls", "count(tool_calls)", "BIGINT", "tool_calls"),
    ("prompt_tokens", "sum(prompt_tokens)", "BIGINT", "prompt_tokens"),
    ("completion_tokens", "sum(completion_tokens)", "BIGINT", "completion_tokens"),
    ("seconds", "sum(seconds)", "DOUBLE", "seconds"),
)


def _value_counts(con: duckdb.DuckDBPyConnection, relation: str, column: str) -> str:
    """SQL of model, seed, task and a JSON object {value: count} of ``column`` (null when
    the relation has no such column or only nulls in it)."""
    if column not in relation_columns(con, relation):
        return (
            f"SELECT DISTINCT model, seed, task, CAST(NULL AS VARCHAR) AS {column} FROM {relation}"
        )
    return f"""
        SELECT model, seed, task, CAST(json_group_object({column}, n) AS VARCHAR) AS {column}
        FROM (SELECT model, seed, task, {column}, count(*) AS n FROM {relation}
              WHERE {column} IS NOT NULL GROUP BY ALL ORDER BY ALL)
        GROUP BY ALL
        """


def _provenance_sql(con: duckdb.DuckDBPyConnection, settings: str) -> str:
    present = set(relation_columns(con, "responses"))
    summary = ",\n".join(
        f"CAST({agg if needs in present else 'NULL'} AS {cast}) AS {name}"
        for name, agg, cast, needs in _RESPONSE_SUMMARY
    )
    return f"""
        WITH summary AS (SELECT model, seed, task, {summary} FROM responses GROUP BY ALL),
        finish AS ({_value_counts(con, "responses", "finish_reason")}),
        sources AS ({_value_counts(con, "outcomes", "answer_source")})
        SELECT s.model, s.seed, s.task, s.backend, m.model_id, s.* EXCLUDE (model, seed, task,
               backend), f.finish_reason AS finish_reasons, a.answer_source AS answer_sources,
               m.provenance
        FROM summary s
        LEFT JOIN finish f USING (model, seed, task)
        LEFT JOIN sources a USING (model, seed, task)
        LEFT JOIN {settings} m USING (model)
        ORDER BY s.model, s.seed, s.task
        """


@contextmanager
def _settings(
    con: duckdb.DuckDBPyConnection, provenance: Mapping[str, Mapping[str, Any]] | None
) -> Iterator[str]:
    """Register the per-model provenance as a relation while the block runs; yields its name."""
    provenance = provenance or {}
    models = list(provenance)
    frame = pl.DataFrame(
        {
            "model": models,
            "model_id": [
                None if (model_id := provenance[m].get("model_id")) is None else str(model_id)
                for m in models
            ],
            "provenance": [json.dumps(provenance[m], sort_keys=True, default=str) for m in models],
        },
        schema={"model": pl.String, "model_id": pl.String, "provenance": pl.String},
    )
    con.register("provenance_settings", frame)
    try:
        yield "provenance_settings"
    finally:
        con.unregister("provenance_settings")


def provenance_table(
    con: duckdb.DuckDBPyConnection, provenance: Mapping[str, Mapping[str, Any]] | None = None
) -> pl.DataFrame:
    """One row per model × seed × task of ``responses``: backend, response, cache-hit and
    model-call counts, constrained / option-scored / tool-call answers, token and time
    totals, JSON counts of the finish reasons and of the outcomes' ``answer_source`` (null
    without that column), and ``model_id`` plus the JSON of ``provenance[model]`` (a mapping
    per model name, e.g. its manifest and decoding; its ``model_id`` key fills ``model_id``).
    Columns the shards lack come out null."""
    with _settings(con, provenance) as settings:
        table: pl.DataFrame = con.sql(_provenance_sql(con, settings)).pl()
    return table


def build_database(
    db_path: str | Path,
    *,
    prompts: Paths,
    responses: Paths,
    outcomes: Paths,
    tables: Mapping[str, str | Path] | None = None,
    views: Sequence[ViewBuilder] = (),
    parse_rate_groups: Sequence[ParseRateGroups] = (ParseRateGroups(),),
    provenance: Mapping[str, Mapping[str, Any]] | None = None,
    determinism: pl.DataFrame | None = None,
) -> None:
    """Write the DuckDB file: the tables of :data:`SHARED_TABLES` (``parse_rates`` as
    :func:`parse_rates` for each of ``parse_rate_groups``, one per study, stacked by column
    name; ``provenance`` as :func:`provenance_table`; ``determinism`` the given table, else
    :func:`cueaudit.inference.determinism.determinism_table` of the response shards), the
    analysis ``tables`` (parquet or CSV, by table name) and then the study ``views``.
    Normalised prompt tables are stored as the table :data:`PROMPT_PARTS`, and ``prompts`` is
    a view over it with the ``text``.

    The file is built under a temporary name and renamed, so a failure leaves no partial
    database behind.
    """
    clash = sorted(set(tables or {}) & {*SHARED_TABLES, PROMPT_PARTS})
    if clash:
        raise ValueError(f"analysis tables may not replace the shared tables: {clash}")
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
            if set(TEXT_PARTS) <= set(relation_columns(con, "prompts")):
                # Normalised prompts are stored as their parts (millions of texts would be
                # gigabytes); the ``prompts`` view assembles each text when it is read.
                con.execute(f"ALTER TABLE prompts RENAME TO {PROMPT_PARTS}")
                con.execute(f"CREATE VIEW prompts AS {_with_text(con, PROMPT_PARTS)}")
            rates = _all_parse_rates_sql(con, parse_rate_groups)
            con.execute(f"CREATE TABLE parse_rates AS {rates}")
            with _settings(con, provenance) as settings:
                con.execute(f"CREATE TABLE provenance AS {_provenance_sql(con, settings)}")
            checks = determinism_table(responses) if determinism is None else determinism
            con.register("determinism_rows", checks)
            con.execute("CREATE TABLE determinism AS SELECT * FROM determinism_rows")
            con.unregister("determinism_rows")
            for name, path in (tables or {}).items():
                reader = "read_parquet" if str(path).endswith(".parquet") else "read_csv_auto"
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM {reader}({sql_literal(path)})")
            for build in views:
                build(con)
        finally:
            con.close()
    record_build(db_path)


def build_record(db_path: str | Path) -> Path:
    """Where :func:`record_build` notes the database as it was built."""
    path = Path(db_path)
    return path.with_name(path.name + ".built.json")


def record_build(db_path: str | Path) -> None:
    """Note the database's size and modification time as built, for :func:`database_changed`."""
    stat = Path(db_path).stat()
    record = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    build_record(db_path).write_text(json.dumps(record) + "\n", encoding="utf-8")


def database_changed(db_path: str | Path) -> str | None:
    """Why the database is not the file the last build wrote (damaged, or written to since),
    else None. Snakemake reruns nothing for an output changed after its job, so the workflow
    says so when it starts; a stat, not a read, so a large database costs nothing to check."""
    path, record = Path(db_path), build_record(db_path)
    if not (path.is_file() and record.is_file()):
        return None
    try:
        built = json.loads(record.read_text(encoding="utf-8"))
        then = (int(built["size"]), int(built["mtime_ns"]))
    except (ValueError, KeyError, TypeError):
        return f"{record} is damaged: `snakemake --forcerun build_database` rebuilds {path}"
    stat = path.stat()
    if (stat.st_size, stat.st_mtime_ns) == then:
        return None
    return (
        f"{path} changed after build_database wrote it ({then[0]} bytes then, {stat.st_size} "
        "now): it may be damaged, or hold writes of your own that a rebuild would drop. "
        "`snakemake --forcerun build_database` rebuilds it"
    )
