"""Table 3: precision, recall and F1 of the model's forced-choice race prediction
(Black / White / Unknown) against the cued race, per class and cue."""

from __future__ import annotations

import duckdb
import polars as pl

from cueaudit.errors import InputError
from cueaudit.store import has_relation

ALL_TASKS = "all"
CLASSES = ("Black", "White")
METRICS_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "task": pl.String(),
    "cue": pl.String(),
    "class": pl.String(),
    "precision": pl.Float64(),
    "recall": pl.Float64(),
    "f1": pl.Float64(),
    "support": pl.Int64(),
    "predicted": pl.Int64(),
    "true_positive": pl.Int64(),
    "n_parsed": pl.Int64(),
    "n_unparsed": pl.Int64(),
    "note": pl.String(),
}
MISSING = "missing: no race-prediction outcomes with answer_label (task 'race_prediction' not run)"


def race_prediction_counts(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Per model, source task (and 'all'), cue, true race and predicted label: response counts
    (seeds pooled; unparsed answers have predicted null). Prompts without a cued race skipped."""
    return con.sql(
        f"""
        WITH j AS (
            SELECT CAST(rp.model AS VARCHAR) AS model, CAST(rp.source_task AS VARCHAR) AS task,
                   CAST(p.cue AS VARCHAR) AS cue, CAST(p.race AS VARCHAR) AS race,
                   rp.predicted
            FROM race_predictions rp
            JOIN prompts p ON p.prompt_uid = rp.source_prompt_uid AND p.task = rp.source_task
            WHERE p.race IS NOT NULL
        )
        SELECT model, COALESCE(task, '{ALL_TASKS}') AS task, cue, race, predicted,
               COUNT(*) AS n
        FROM j
        GROUP BY GROUPING SETS ((model, task, cue, race, predicted), (model, cue, race, predicted))
        ORDER BY ALL
        """
    ).pl()


def race_prediction_metrics(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Precision, recall and F1 per model, task ('all' pools the tasks), cue and class.

    Recall = P(predicted c | cued c); precision = P(cued c | predicted c) among parsed answers
    to prompts that cue a race; 'Unknown' answers count as misses.

    Undefined metrics are null (empty), never 0.0, with the reason in ``note``:

    - precision of a class the model never predicted under the cue (``predicted`` 0);
    - recall of a class with no parsed answers to prompts cueing it (``support`` 0), e.g.
      White under dialect, which cues Black only (the paper's Table 3 shows "–");
    - F1 when either is undefined. When both are defined F1 = 2PR / (P + R), and 0.0 when
      P = R = 0 (scikit-learn's convention). scikit-learn's ``f1_score`` also gives 0.0 when
      only one of them is undefined (it computes 2TP / (2TP + FP + FN)); here that F1 is null,
      as the paper's table leaves a cell empty whose precision or recall is."""
    if not has_relation(con, "race_predictions"):
        row = dict.fromkeys(METRICS_SCHEMA)
        row["note"] = MISSING
        return pl.DataFrame([row], schema=METRICS_SCHEMA)
    if not has_relation(con, "prompts"):
        raise InputError("prompts", "no such view in the DuckDB connection")
    counts = race_prediction_counts(con)
    records: list[dict[str, object]] = []
    keys = counts.select("model", "task", "cue").unique(maintain_order=True)
    for model, task, cue in keys.iter_rows():
        cell = counts.filter(
            (pl.col("model") == model) & (pl.col("task") == task) & (pl.col("cue") == cue)
        )
        parsed = cell.filter(pl.col("predicted").is_not_null())
        n_parsed = int(parsed["n"].sum())
        n_unparsed = int(cell.filter(pl.col("predicted").is_null())["n"].sum())
        for cls in CLASSES:
            support = int(parsed.filter(pl.col("race") == cls)["n"].sum())
            predicted = int(parsed.filter(pl.col("predicted") == cls)["n"].sum())
            tp = int(
                parsed.filter((pl.col("race") == cls) & (pl.col("predicted") == cls))["n"].sum()
            )
            notes = []
            precision = tp / predicted if predicted else None
            recall = tp / support if support else None
            if not support:
                notes.append(f"no parsed predictions for {cls} prompts under this cue")
            if not predicted:
                notes.append(f"the model never predicted {cls}")
            f1 = None
            if precision is not None and recall is not None:
                f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
            records.append(
                {
                    "model": model,
                    "task": task,
                    "cue": cue,
                    "class": cls,
                    "precision": precision,
                    "recall": recall,
                    "f1": f1,
                    "support": support,
                    "predicted": predicted,
                    "true_positive": tp,
                    "n_parsed": n_parsed,
                    "n_unparsed": n_unparsed,
                    "note": "; ".join(notes) or None,
                }
            )
    if not records:
        row = dict.fromkeys(METRICS_SCHEMA)
        row["note"] = "race-prediction outcomes exist but none refers to a race-cued prompt"
        records.append(row)
    return pl.DataFrame(records, schema=METRICS_SCHEMA)
