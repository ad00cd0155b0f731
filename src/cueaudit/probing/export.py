"""Export prompts and parsed responses in the layout of the authors' replication package
(manueltonneau/llm-demographic-cues), so their analysis scripts can read our outputs::

    prompts/<task>/<task>_<cue>_constrained.parquet
    decoder_model_responses_cleaned/<task>_<cue>_constrained_<model>_seed_<n>.csv
    decoder_model_responses_race_pred/<task>_<cue>_constrained_<model>_seed_<n>.csv

Columns follow the package's merge keys: ``prompt_id`` (integer id of the base prompt),
``name`` (name cues), ``convo_concat_id`` (dialog cues), ``race``, ``gender``,
``response_text`` (the raw completion, or the race label for race prediction) and
``response_final`` (the parsed outcome; ``salary_final`` too for salary). Our own ids
(``prompt_uid``, ``base_id``, ``cue``) are kept as extra columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import duckdb
import polars as pl

from cueaudit.cues.registry import REGISTRY
from cueaudit.io import write_csv, write_parquet

TASK_NAMES: dict[str, str] = {
    "healthcare": "medical_advice",
    "legal": "legal_advice",
    "salary": "salary_rec",
}
CUE_NAMES: Final[dict[str, str]] = REGISTRY.export_names()
# The package's columns that carry a cue value (name, convo_concat_id), set on the rows of
# the cue types that name them and null elsewhere.
VALUE_KINDS: Final = REGISTRY.export_columns()
VALUE_COLUMNS: Final = tuple(VALUE_KINDS)
RACE_PREDICTION_TASK = "race_prediction"


def _files(paths: Sequence[str | Path]) -> str:
    quoted = ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths)
    return f"read_parquet([{quoted}], union_by_name = true)"


def _prompt_frame(prompts: pl.DataFrame) -> pl.DataFrame:
    values = {
        column: pl.when(pl.col("cue_type").is_in(kinds)).then(pl.col("cue_value"))
        for column, kinds in VALUE_KINDS.items()
    }
    return prompts.with_columns(
        prompt_id=pl.col("base_id").rank("dense").over("task").cast(pl.Int64) - 1,
        **values,
        prompt=pl.col("text"),
    )


def export_replication(
    out_dir: str | Path,
    *,
    prompts: Sequence[str | Path],
    outcomes: Sequence[str | Path],
    responses: Sequence[str | Path] = (),
    task_outcomes: Mapping[str, str],
) -> pl.DataFrame:
    """Write the replication-package layout under ``out_dir``; returns a manifest (one row
    per file: path, rows). Tasks or cues without a package name keep their own id."""
    out = Path(out_dir)
    con = duckdb.connect()
    all_prompts = con.sql(f"SELECT * FROM {_files(prompts)}").pl()
    advice = _prompt_frame(all_prompts.filter(pl.col("task") != RACE_PREDICTION_TASK))
    manifest: list[tuple[str, int]] = []
    for (task, cue), part in advice.partition_by(["task", "cue"], as_dict=True).items():
        t, c = TASK_NAMES.get(str(task), str(task)), CUE_NAMES.get(str(cue), str(cue))
        path = out / "prompts" / t / f"{t}_{c}_constrained.parquet"
        write_parquet(
            part.select(
                "prompt_id",
                *VALUE_COLUMNS,
                "race",
                "gender",
                "prompt",
                "prompt_uid",
                "base_id",
                "cue",
                "cue_value",
                "task",
            ),
            path,
            root=out,
        )
        manifest.append((str(path.relative_to(out)), part.height))
    outs = con.sql(f"SELECT * FROM {_files(outcomes)}").pl()
    if responses:
        raw = con.sql(
            f"SELECT prompt_uid, model, seed, task, completion FROM {_files(responses)}"
        ).pl()
        outs = outs.join(raw, on=["prompt_uid", "model", "seed", "task"], how="left")
    else:
        outs = outs.with_columns(completion=pl.lit(None, dtype=pl.String))
    keys = advice.select("prompt_uid", "task", "cue", "prompt_id", *VALUE_COLUMNS, "race", "gender")
    advice_out = outs.filter(pl.col("task") != RACE_PREDICTION_TASK).join(
        keys, on=["prompt_uid", "task"], how="inner"
    )
    advice_out = advice_out.with_columns(
        response_text=pl.col("completion"),
        response_final=pl.col("answer"),
        salary_final=pl.when(
            pl.col("task").replace_strict(task_outcomes, default=None) == "usd"
        ).then(pl.col("answer")),
    )
    _write_responses(out, "decoder_model_responses_cleaned", advice_out, manifest)
    if "answer_label" in outs.columns and "source_prompt_uid" in all_prompts.columns:
        rp = outs.filter(pl.col("task") == RACE_PREDICTION_TASK).join(
            all_prompts.select("prompt_uid", "source_prompt_uid", "source_task"),
            on="prompt_uid",
        )
        rp = rp.drop("task", "prompt_uid").join(
            keys.rename({"prompt_uid": "source_prompt_uid", "task": "source_task"}),
            on=["source_prompt_uid", "source_task"],
        )
        rp = rp.with_columns(
            task=pl.col("source_task"),
            prompt_uid=pl.col("source_prompt_uid"),
            response_text=pl.col("answer_label"),
            response_final=pl.col("answer_label"),
        )
        _write_responses(out, "decoder_model_responses_race_pred", rp, manifest)
    frame = pl.DataFrame(manifest, schema={"path": pl.String, "rows": pl.Int64}, orient="row")
    frame = frame.sort("path")
    write_csv(frame, out / "MANIFEST.csv")
    return frame


def _write_responses(
    out: Path, folder: str, frame: pl.DataFrame, manifest: list[tuple[str, int]]
) -> None:
    columns = ["prompt_id", *VALUE_COLUMNS, "race", "gender", "response_text",
               "response_final", "salary_final", "prompt_uid", "cue", "model", "seed"]  # fmt: skip
    for col in columns:
        if col not in frame.columns:
            frame = frame.with_columns(pl.lit(None).alias(col))
    groups = frame.partition_by(["task", "cue", "model", "seed"], as_dict=True)
    for (task, cue, model, seed), part in groups.items():
        t, c = TASK_NAMES.get(str(task), str(task)), CUE_NAMES.get(str(cue), str(cue))
        path = out / folder / f"{t}_{c}_constrained_{model}_seed_{seed}.csv"
        write_csv(part.select(columns).sort("prompt_id", "prompt_uid"), path, root=out)
        manifest.append((str(path.relative_to(out)), part.height))
