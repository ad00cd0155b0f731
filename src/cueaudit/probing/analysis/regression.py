"""Tables 5-7: advice outcome on the model's inferred race of the same prompt, plus the cued
race, plus the prompt's Flesch-Kincaid grade, with base-prompt fixed effects.

One response per prompt, as the paper (its N, 4,551,000 for healthcare, is the prompt count;
the authors' build_master_and_regress.py reads seed 0 only): each model's responses and race
predictions of one seed, never all seeds pooled (which would count every prompt once per
seed and shrink the standard errors by about the square root of the seed count).
"""

from __future__ import annotations

from collections.abc import Mapping

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
    "seed": pl.Int64(),
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


def _row(
    model: str | None, seed: int | None, task: str | None, spec: int | None, note: str
) -> dict[str, object]:
    rec: dict[str, object] = dict.fromkeys(REGRESSION_SCHEMA)
    label = SPECS[spec][0] if spec else None
    rec.update(model=model, seed=seed, task=task, spec=spec, spec_label=label, note=note)
    return rec


def regression_data(
    con: duckdb.DuckDBPyConnection, model: str, task: str, seed: int
) -> pl.DataFrame:
    """Rows of one model, task and seed, one per prompt: y, base prompt, dummies and FK grade
    (parsed rows whose race prediction, same model and seed, is parsed)."""
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
        WHERE ob.model = $model AND ob.task = $task AND ob.seed = $seed
          AND ob.outcome IS NOT NULL AND isfinite(CAST(ob.outcome AS DOUBLE))
        """,
        params={"model": model, "task": task, "seed": seed},
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


def regression_seeds(
    con: duckdb.DuckDBPyConnection, seeds: Mapping[str, int] | None = None
) -> dict[str, int]:
    """Model -> the seed of its Tables 5-7: ``seeds[model]`` when given, else the model's
    lowest seed with race predictions (the workflow passes each model's first configured
    race-prediction seed, cueaudit.config.regression_seeds). Models without race
    predictions get their lowest seed (their rows carry a note)."""
    chosen = dict(seeds or {})
    found = con.sql(
        """SELECT CAST(model AS VARCHAR), min(seed) FROM race_predictions GROUP BY 1"""
    ).fetchall()
    first = con.sql(
        """SELECT CAST(model AS VARCHAR), min(seed) FROM observations GROUP BY 1"""
    ).fetchall()
    return {**dict(first), **dict(found), **chosen}


def fe_regressions(
    con: duckdb.DuckDBPyConnection, seeds: Mapping[str, int] | None = None
) -> pl.DataFrame:
    """The three specifications per model and advice task, in long format (one row per term),
    on one seed per model (``seeds``, see regression_seeds), with a note on every row of a
    specification that cannot be estimated."""
    if not has_relation(con, "observations"):
        raise InputError("observations", "no such table or view in the DuckDB connection")
    if not has_relation(con, "race_predictions"):
        return pl.DataFrame(
            [_row(None, None, None, None, MISSING_PREDICTIONS)], schema=REGRESSION_SCHEMA
        )
    pairs = con.sql(
        """SELECT DISTINCT CAST(model AS VARCHAR), CAST(task AS VARCHAR) FROM observations
           ORDER BY 1, 2"""
    ).fetchall()
    chosen = regression_seeds(con, seeds)
    records: list[dict[str, object]] = []
    for model, task in pairs:
        seed = chosen[model]
        data = regression_data(con, model, task, seed)
        if data.is_empty():
            note = (
                f"no advice outcome of seed {seed} has a parsed race prediction of the same "
                "model and seed"
            )
            records.extend(_row(model, seed, task, s, note) for s in SPECS)
            continue
        for spec, (label, terms) in SPECS.items():
            frame = data
            if "fk_grade" in terms:
                frame = data.filter(
                    pl.col("fk_grade").is_not_null() & pl.col("fk_grade").is_finite()
                )
                if frame.is_empty():
                    records.append(_row(model, seed, task, spec, MISSING_FK))
                    continue
            try:
                res = fe_ols(
                    frame["y"].to_numpy(),
                    frame.select(terms).to_numpy(),
                    frame["base_id"].rank("dense").to_numpy(),
                    terms,
                )
            except (InputError, np.linalg.LinAlgError) as exc:
                records.append(_row(model, seed, task, spec, f"not estimable: {exc}"))
                continue
            note = f"absorbed or constant: {', '.join(res.dropped)}" if res.dropped else None
            for i, term in enumerate(res.names):
                records.append(
                    {
                        "model": model,
                        "seed": seed,
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
        records.append(_row(None, None, None, None, "no advice outcomes"))
    return pl.DataFrame(records, schema=REGRESSION_SCHEMA)
