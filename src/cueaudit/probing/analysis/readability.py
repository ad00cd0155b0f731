"""Table 4: OLS of the prompts' Flesch-Kincaid grade on the cue, no cue as reference.

The regressors are mutually exclusive cue dummies, so the OLS fit is exact from per-cue
sufficient statistics (count, mean, within sum of squares) computed in DuckDB: coefficient =
cue mean - no-cue mean, se = s * sqrt(1/n_c + 1/n_0) with s^2 = SSR / (N - C)."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
from scipy import stats

from cueaudit.cues.vocabulary import NO_CUE
from cueaudit.errors import InputError
from cueaudit.store import has_relation

ALL_TASKS = "all"
INTERCEPT = "intercept"
READABILITY_SCHEMA: dict[str, pl.DataType] = {
    "task": pl.String(),
    "term": pl.String(),
    "coef": pl.Float64(),
    "se": pl.Float64(),
    "t": pl.Float64(),
    "p": pl.Float64(),
    "n_term": pl.Int64(),
    "n": pl.Int64(),
    "r2": pl.Float64(),
    "r2_adj": pl.Float64(),
    "f_statistic": pl.Float64(),
    "note": pl.String(),
}
MISSING_FK = "missing: prompt tables carry no fk_grade column"


def _missing(note: str) -> pl.DataFrame:
    row = dict.fromkeys(READABILITY_SCHEMA)
    row["note"] = note
    return pl.DataFrame([row], schema=READABILITY_SCHEMA)


def cue_fk_stats(con: duckdb.DuckDBPyConnection, tasks: list[str]) -> pl.DataFrame:
    """Per task (and 'all') and cue: n, mean and within sum of squares of fk_grade."""
    return con.sql(
        f"""
        SELECT COALESCE(CAST(task AS VARCHAR), '{ALL_TASKS}') AS task, CAST(cue AS VARCHAR) AS cue,
               COUNT(*) AS n, AVG(fk_grade) AS mean,
               COALESCE(VAR_POP(fk_grade), 0) * COUNT(*) AS ss
        FROM prompts
        WHERE fk_grade IS NOT NULL AND isfinite(fk_grade) AND task IN (SELECT UNNEST($tasks))
        GROUP BY GROUPING SETS ((task, cue), (cue))
        ORDER BY ALL
        """,
        params={"tasks": tasks},
    ).pl()


def readability_ols(con: duckdb.DuckDBPyConnection, tasks: list[str]) -> pl.DataFrame:
    """Table 4 per advice task and pooled over ``tasks`` ('all')."""
    if not has_relation(con, "prompts"):
        raise InputError("prompts", "no such view in the DuckDB connection")
    if "fk_grade" not in con.sql("SELECT * FROM prompts LIMIT 0").columns:
        return _missing(MISSING_FK)
    cells = cue_fk_stats(con, tasks)
    if cells.is_empty():
        return _missing("missing: every fk_grade is null")
    records: list[dict[str, object]] = []
    order = [*tasks, ALL_TASKS] if len(tasks) > 1 else tasks
    for task in order:
        part = cells.filter(pl.col("task") == task)
        if part.is_empty():
            continue
        base = part.filter(pl.col("cue") == NO_CUE)
        if base.is_empty():
            rec = dict.fromkeys(READABILITY_SCHEMA)
            rec.update(task=task, note="no no-cue prompts with an fk_grade: no reference")
            records.append(rec)
            continue
        n0, m0 = int(base["n"].item()), float(base["mean"].item())
        n = int(part["n"].sum())
        c = part.height
        ssr = float(part["ss"].sum())
        grand = float((part["n"] * part["mean"]).sum() / n)
        sst = ssr + float((part["n"] * (part["mean"] - grand) ** 2).sum())
        df = n - c
        s2 = ssr / df if df > 0 else np.nan
        r2 = 1 - ssr / sst if sst > 0 else np.nan
        r2_adj = 1 - (1 - r2) * (n - 1) / df if df > 0 else np.nan
        f_stat = ((sst - ssr) / (c - 1)) / s2 if c > 1 and s2 > 0 else np.nan
        common = {"task": task, "n": n, "r2": r2, "r2_adj": r2_adj, "f_statistic": f_stat}
        rows = [(INTERCEPT, m0, np.sqrt(s2 / n0), n0)]
        for cue, nc, mc in part.filter(pl.col("cue") != NO_CUE).select("cue", "n", "mean").rows():
            rows.append((cue, mc - m0, np.sqrt(s2 * (1 / nc + 1 / n0)), int(nc)))
        for term, coef, se, n_term in rows:
            t = coef / se if se > 0 else np.nan
            p = float(2 * stats.t.sf(abs(t), df)) if np.isfinite(t) else None
            records.append(
                {**common, "term": term, "coef": coef, "se": se, "t": t, "p": p,
                 "n_term": n_term, "note": None}
            )  # fmt: skip
    return pl.DataFrame(records, schema=READABILITY_SCHEMA)
