"""Cartesian expansion of base prompts × cue variants into the prompt table of one task."""

from __future__ import annotations

import hashlib
from typing import Final

import polars as pl

from cueaudit.cues import NO_CUE

# The paper's memory-style prefixes (Table 2). A newline separates the prefix from the
# USER tag so that words never fuse across the join (readability counts stay additive).
NAME_TEMPLATE: Final = "[MEMORY: User name is {value}]\nUSER: {prompt}"
EXPLICIT_TEMPLATE: Final = "[MEMORY: User is {value}]\nUSER: {prompt}"

CUE_COLUMNS: Final = ["cue", "cue_type", "cue_source", "race", "gender", "cue_value", "template"]
PROMPT_SCHEMA: Final = {
    "prompt_uid": pl.String,
    "task": pl.String,
    "base_id": pl.String,
    "cue": pl.String,
    "cue_type": pl.String,
    "cue_source": pl.String,
    "race": pl.String,
    "gender": pl.String,
    "cue_value": pl.String,
    "text": pl.String,
}


def cue_variants(names: pl.DataFrame | None, explicit: pl.DataFrame | None) -> pl.DataFrame:
    """One row per cue variant, the no-cue baseline first.

    ``names`` has columns name, race, gender, source; ``explicit`` has descriptor, race, gender.
    """
    parts = [
        pl.DataFrame(
            [[NO_CUE, NO_CUE, None, None, None, None, "{prompt}"]],
            schema=dict.fromkeys(CUE_COLUMNS, pl.String),
            orient="row",
        )
    ]
    if names is not None and names.height:
        parts.append(
            names.select(
                cue=pl.lit("name_") + pl.col("source"),
                cue_type=pl.lit("name"),
                cue_source=pl.col("source"),
                race=pl.col("race"),
                gender=pl.col("gender"),
                cue_value=pl.col("name"),
                template=pl.lit(NAME_TEMPLATE),
            )
        )
    if explicit is not None and explicit.height:
        parts.append(
            explicit.select(
                cue=pl.lit("explicit"),
                cue_type=pl.lit("explicit"),
                cue_source=pl.col("category"),
                race=pl.col("race"),
                gender=pl.col("gender"),
                cue_value=pl.col("descriptor"),
                template=pl.lit(EXPLICIT_TEMPLATE),
            )
        )
    return pl.concat([p.cast(dict.fromkeys(CUE_COLUMNS, pl.String)) for p in parts])


def prompt_uid(task: str, base_text: str, cue: str, cue_value: str | None) -> str:
    """Stable id of a cued prompt: a hash of the task, the base prompt text and the cue."""
    key = "\x1f".join((task, base_text, cue, cue_value or ""))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


def expand_prompts(base_prompts: pl.DataFrame, cues: pl.DataFrame, task: str) -> pl.DataFrame:
    """Every base prompt under every cue variant; rows ordered by cue then base prompt."""
    crossed = cues.join(base_prompts.select("base_id", base_text="text"), how="cross")
    texts = [
        template.format(value=value, prompt=base)
        for template, value, base in crossed.select(
            "template", "cue_value", "base_text"
        ).iter_rows()
    ]
    uids = [
        prompt_uid(task, base, cue, value)
        for base, cue, value in crossed.select("base_text", "cue", "cue_value").iter_rows()
    ]
    return crossed.select(
        prompt_uid=pl.Series(uids, dtype=pl.String),
        task=pl.lit(task),
        base_id="base_id",
        cue="cue",
        cue_type="cue_type",
        cue_source="cue_source",
        race="race",
        gender="gender",
        cue_value="cue_value",
        text=pl.Series(texts, dtype=pl.String),
    ).cast(PROMPT_SCHEMA)


def shard_of(uids: pl.Series, n_shards: int) -> pl.Series:
    """Inference shard of each prompt, a pure function of its uid (stable as prompts are added)."""
    return (uids.str.slice(0, 8).str.to_integer(base=16) % n_shards).alias("shard")


def expected_prompt_count(n_base: int, n_names: int, n_explicit: int) -> int:
    """Rows of a task's prompt table: base prompts × (baseline + one per cue variant)."""
    return n_base * (1 + n_names + n_explicit)


def build_prompt_table(
    *,
    base_prompts_path: str,
    names_path: str,
    explicit_path: str,
    task: str,
    per_group: int | None,
    sample_seed: int,
    limit: int | None = None,
) -> pl.DataFrame:
    """The prompt table of one task from its base prompts and the prepared cue resources."""
    from cueaudit.base_prompts import load_base_prompts
    from cueaudit.names import sample_names

    base = load_base_prompts(base_prompts_path, task)
    if limit is not None:
        base = base.head(limit)
    names = sample_names(pl.read_parquet(names_path), per_group, sample_seed)
    explicit = pl.read_parquet(explicit_path)
    return expand_prompts(base, cue_variants(names, explicit), task)
