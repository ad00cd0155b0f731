"""Tables 5-7: advice outcome on the model's inferred race of the same prompt, plus the cued
race, plus the prompt's Flesch-Kincaid grade, with base-prompt fixed effects."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl

from cueaudit.errors import InputError
from cueaudit.stats.fe import fe_ols
from cueaudit.store import has_relation

SPECS: dict[int, tuple[str, list[str]]] = {
    1: ("inferred race", ["inferred_Black", "inferred_Unknown"]),
    2: ("+ cued race", ["inferred_Black", "inferred_Unknown", "cued_Black", "cued_None"]),
    3: (
        "+ cued race + FK grade",
        ["inferred_Black", "inferred_Unknown", "cued_Black", "cued_None", "fk_grade"],
    ),
}
TERM_LABELS = {
    "inferred_Black": "Inferred Black (vs. White)",
    "inferred_Unknown": "Inferred Unknown (vs. White)",
    "cued_Black": "Cued race Black (vs. White)",
    "cued_None": "Cued race none (vs. White)",
    "fk_grade": "Readability (Flesch-Kincaid grade)",
}
REGRESSION_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "task": pl.String(),
    "spec": pl.Int64(),
    "spec_label": pl.String(),
    "term": pl.String(),
    "coef": pl.Float64(),
    "se_conventional": pl.Float64(),
    "se_paper": pl.Float64(),
    "se_cluster": pl.Float64(),
    "p_conventional": pl.Float64(),
    "p_cluster": pl.Float64(),
    "n": pl.Int64(),
    "n_prompts": pl.Int64(),
    "r2_within": pl.Float64(),
    "aic": pl.Float64(),
    "bic": pl.Float64(),
    "note": pl.String(),
}
MISSING_PREDICTIONS = (
    "missing: no race-prediction outcomes with answer_label (task 'race_prediction' not run)"
)
MISSING_FK = "missing: prompts carry no fk_grade"


def _row(model: str | None, task: str | None, spec: int | None, note: str) -> dict[str, object]:
    rec: dict[str, object] = dict.fromkeys(REGRESSION_SCHEMA)
    label = SPECS[spec][0] if spec else None
    rec.update(model=model, task=task, spec=spec, spec_label=label, note=note)
    return rec


def regression_data(con: duckdb.DuckDBPyConnection, model: str, task: str) -> pl.DataFrame:
    """Rows of one model and task: y, base prompt, dummies and FK grade (parsed rows whose
    race prediction, same model and seed, is parsed)."""
    # The label filter is applied after the fetch: pushed into the join (duckdb 2.0) it turns
    # the plan into a near-quadratic one (10k rows: 0.04 s without, 40 s with).
    frame = con.sql(
        """
        SELECT CAST(ob.outcome AS DOUBLE) AS y, CAST(ob.base_id AS VARCHAR) AS base_id,
               CAST(rp.predicted AS VARCHAR) AS predicted,
               CAST(ob.race IS NOT DISTINCT FROM 'Black' AS DOUBLE) AS cued_Black,
               CAST(ob.race IS NULL AS DOUBLE) AS cued_None,
               CAST(ob.fk_grade AS DOUBLE) AS fk_grade
        FROM observations ob
        JOIN race_predictions rp
          ON rp.model = ob.model AND rp.seed = ob.seed AND rp.source_prompt_uid = ob.prompt_uid
        WHERE ob.model = $model AND ob.task = $task
          AND ob.outcome IS NOT NULL AND isfinite(CAST(ob.outcome AS DOUBLE))
        """,
        params={"model": model, "task": task},
    ).pl()
    return frame.filter(pl.col("predicted").is_in(["Black", "White", "Unknown"])).select(
        "y",
        "base_id",
        inferred_Black=(pl.col("predicted") == "Black").cast(pl.Float64),
        inferred_Unknown=(pl.col("predicted") == "Unknown").cast(pl.Float64),
        cued_Black="cued_Black",
        cued_None="cued_None",
        fk_grade="fk_grade",
    )


def fe_regressions(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The three specifications per model and advice task, in long format (one row per term),
    with a note on every row of a specification that cannot be estimated."""
    if not has_relation(con, "observations"):
        raise InputError("observations", "no such table or view in the DuckDB connection")
    if not has_relation(con, "race_predictions"):
        return pl.DataFrame([_row(None, None, None, MISSING_PREDICTIONS)], schema=REGRESSION_SCHEMA)
    pairs = con.sql(
        """SELECT DISTINCT CAST(model AS VARCHAR), CAST(task AS VARCHAR) FROM observations
           ORDER BY 1, 2"""
    ).fetchall()
    records: list[dict[str, object]] = []
    for model, task in pairs:
        data = regression_data(con, model, task)
        if data.is_empty():
            note = "no advice outcome has a parsed race prediction of the same model and seed"
            records.extend(_row(model, task, s, note) for s in SPECS)
            continue
        for spec, (label, terms) in SPECS.items():
            frame = data
            if "fk_grade" in terms:
                frame = data.filter(
                    pl.col("fk_grade").is_not_null() & pl.col("fk_grade").is_finite()
                )
                if frame.is_empty():
                    records.append(_row(model, task, spec, MISSING_FK))
                    continue
            try:
                res = fe_ols(
                    frame["y"].to_numpy(),
                    frame.select(terms).to_numpy(),
                    frame["base_id"].rank("dense").to_numpy(),
                    terms,
                )
            except (InputError, np.linalg.LinAlgError) as exc:
                records.append(_row(model, task, spec, f"not estimable: {exc}"))
                continue
            note = f"absorbed or constant: {', '.join(res.dropped)}" if res.dropped else None
            for i, term in enumerate(res.names):
                records.append(
                    {
                        "model": model,
                        "task": task,
                        "spec": spec,
                        "spec_label": label,
                        "term": term,
                        "coef": float(res.coef[i]),
                        "se_conventional": float(res.se_conventional[i]),
                        "se_paper": float(res.se_paper[i]),
                        "se_cluster": float(res.se_cluster[i]),
                        "p_conventional": float(res.p_conventional[i]),
                        "p_cluster": float(res.p_cluster[i]),
                        "n": res.n,
                        "n_prompts": res.n_groups,
                        "r2_within": res.r2_within,
                        "aic": res.aic,
                        "bic": res.bic,
                        "note": note,
                    }
                )
    if not records:
        records.append(_row(None, None, None, "no advice outcomes"))
    return pl.DataFrame(records, schema=REGRESSION_SCHEMA)
