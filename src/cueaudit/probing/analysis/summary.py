"""Sample sizes and parse rates behind every estimate."""

from __future__ import annotations

import duckdb
import polars as pl

SAMPLE_SIZE_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "task": pl.String(),
    "cue": pl.String(),
    "race": pl.String(),
    "gender": pl.String(),
    "n_responses": pl.Int64(),
    "n_parsed": pl.Int64(),
    "parse_rate": pl.Float64(),
    "n_prompts": pl.Int64(),
    "n_base_prompts": pl.Int64(),
    "n_seeds": pl.Int64(),
    "seeds": pl.String(),
    "note": pl.String(),
}


def sample_sizes(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Per model, advice task, cue, race and gender: responses, parsed outcomes, distinct
    prompts, base prompts and seeds (a note flags no parsed outcome and single-seed models)."""
    out = con.sql(
        """
        SELECT CAST(model AS VARCHAR) AS model, CAST(task AS VARCHAR) AS task,
               CAST(cue AS VARCHAR) AS cue, CAST(race AS VARCHAR) AS race,
               CAST(gender AS VARCHAR) AS gender,
               COUNT(*) AS n_responses,
               COUNT(CASE WHEN isfinite(CAST(outcome AS DOUBLE)) THEN 1 END) AS n_parsed,
               COUNT(DISTINCT prompt_uid) AS n_prompts,
               COUNT(DISTINCT base_id) AS n_base_prompts,
               COUNT(DISTINCT seed) AS n_seeds,
               string_agg(DISTINCT CAST(seed AS VARCHAR), ',' ORDER BY CAST(seed AS VARCHAR))
                   AS seeds
        FROM observations
        GROUP BY ALL
        ORDER BY ALL
        """
    ).pl()
    note = (
        pl.when(pl.col("n_parsed") == 0)
        .then(pl.lit("no parsed outcomes: every estimate for this cell is missing"))
        .when(pl.col("n_seeds") == 1)
        .then(pl.lit("single seed: estimates pool one run"))
        .otherwise(None)
    )
    return out.with_columns(
        parse_rate=pl.col("n_parsed") / pl.col("n_responses"), note=note
    ).select(pl.col(c).cast(t) for c, t in SAMPLE_SIZE_SCHEMA.items())
