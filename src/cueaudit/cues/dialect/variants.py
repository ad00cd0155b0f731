"""The dialect cue type's pieces (its row is in :mod:`cueaudit.cues.registry`): one variant
per base prompt, whose body is the prompt's AAVE translation, read from the translations the
``translate_dialect`` rule prepares (``TRANSLATION_SCHEMA`` of
:mod:`cueaudit.cues.dialect.translate`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from cueaudit.cues.cue_type import CUE_COLUMNS, CueType, VariantCount, concat_parquet


def task_translations(files: Sequence[str], task: str) -> pl.DataFrame:
    """The translations of ``task``'s base prompts (base_id, text, translator, model, ...)."""
    return concat_parquet(files).filter(pl.col("task") == task)


def translator_id(files: Sequence[str], settings: Mapping[str, Any], task: str) -> str:
    """``translator:model`` of the task's translations ("unknown" when it has none): the
    dialect variant's cue value."""
    first = task_translations(files, task).head(1)
    return f"{first['translator'][0]}:{first['model'][0]}" if first.height else "unknown"


def dialect_variants(cue_type: CueType[str], translator: str) -> pl.DataFrame:
    """The one variant of a dialect: its value is the translator id (the body carries the cue)."""
    (condition,) = cue_type.conditions
    (race,) = cue_type.races
    row = {
        "cue": cue_type.cue_id(condition.source),
        "cue_type": cue_type.kind,
        "cue_source": condition.source,
        "race": race,
        "gender": None,
        "cue_value": translator,
        "cue_text": None,
        "body": cue_type.body,
        "uid_variant": None,
    }
    return pl.DataFrame([row], schema=dict.fromkeys(CUE_COLUMNS, pl.String))


def dialect_variant_count(
    cue_type: CueType[str], block: Mapping[str, Any], base: Path
) -> VariantCount:
    return len(cue_type.conditions), None
