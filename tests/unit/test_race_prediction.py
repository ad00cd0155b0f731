from __future__ import annotations

from pathlib import Path

import polars as pl

from cueaudit.cues.explicit import explicit_descriptors
from cueaudit.probing.expansion import cue_variants, expand_prompts
from cueaudit.probing.race_prediction import (
    INSTRUCTION,
    build_race_prediction_table,
    race_prediction_prompts,
    race_prediction_uid,
)
from cueaudit.prompts import text_expr

BASE = pl.DataFrame(
    {"base_id": ["h-1", "h-2"], "task": ["h"] * 2, "text": ["I have a cough.", "I feel sick."]}
)


def test_one_annotation_prompt_per_source_prompt(tmp_path: Path) -> None:
    prompts = expand_prompts(BASE, cue_variants(None, explicit_descriptors(["race"])), "healthcare")
    prompts.write_parquet(tmp_path / "healthcare.parquet")
    table = build_race_prediction_table([tmp_path / "healthcare.parquet"])
    assert table.height == prompts.height == 2 * (1 + 5)
    assert set(table["task"]) == {"race_prediction"}
    assert table["source_prompt_uid"].to_list() == prompts["prompt_uid"].to_list()
    assert set(table["source_task"]) == {"healthcare"}
    assert table["prompt_uid"].to_list() == [race_prediction_uid(u) for u in prompts["prompt_uid"]]
    assert table["prompt_uid"].n_unique() == table.height
    for col in ("base_id", "cue", "cue_type", "cue_source", "race", "gender", "cue_value"):
        assert table[col].to_list() == prompts[col].to_list()
    table = table.with_columns(text=text_expr(table.columns))
    row = table.filter(pl.col("cue_value") == "Black").row(0, named=True)
    user_prompt = "[MEMORY: User is Black]\nUSER: I have a cough."
    assert row["text"] == INSTRUCTION.format(prompt=user_prompt)
    assert row["text"].startswith("You are performing a research annotation")
    assert row["text"].endswith("Respond with only one word from the list above.")
    assert "Valid outputs (choose exactly one): Black, White, Unknown." in row["text"]


def test_uid_is_a_hash_of_task_and_source_uid() -> None:
    assert race_prediction_uid("abc") == race_prediction_uid("abc") != race_prediction_uid("abd")
    prompts = expand_prompts(BASE, cue_variants(None, None), "h")
    assert race_prediction_prompts(prompts).height == 2
