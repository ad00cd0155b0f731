"""What every study's prompt table shares: stable prompt ids and their inference shards.

A study writes one prompt table per task with at least ``prompt_uid``, ``task`` and ``text``
(or its parts, :data:`TEXT_PARTS`), and optionally ``group``, the prefix-sharing key inference
batches by (:func:`group_expr`). Inference and parsing read nothing else, so they never need
to know which study wrote the table.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

import polars as pl

from cueaudit.errors import InputError

#: A prompt table holds each prompt's ``text`` or, normalised for tables of millions of rows,
#: its two parts: ``prefix`` (the cue with its trailing separator, "" when none) and ``body``,
#: both Categorical so each distinct part is stored once. The text is ``prefix + body``.
TEXT_PARTS: Final = ("prefix", "body")


def stable_uid(*parts: str | None) -> str:
    """A 20-hex-digit id hashed from ``parts`` (None counts as the empty string)."""
    joined = "\x1f".join(part or "" for part in parts)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:20]


def text_expr(columns: Iterable[str]) -> pl.Expr:
    """The expression of each prompt's text in a prompt table with ``columns``."""
    columns = set(columns)
    if "text" in columns:
        return pl.col("text")
    if set(TEXT_PARTS) <= columns:
        parts = [pl.col(c).cast(pl.String) for c in TEXT_PARTS]
        return pl.concat_str(parts).alias("text")
    raise InputError(
        "prompt table", f"no text column and no {' + '.join(TEXT_PARTS)} parts", "text"
    )


def group_expr(columns: Iterable[str]) -> pl.Expr:
    """The expression of each prompt's prefix-sharing group in a prompt table with ``columns``:
    its ``group`` where the study writes one, else a normalised table's ``prefix`` (each
    distinct cue prefix, e.g. one dialog history, is its own group), else one group ("")."""
    columns = set(columns)
    if "group" in columns:
        return pl.col("group").cast(pl.String).fill_null("").alias("group")
    if "prefix" in columns:
        return pl.col("prefix").cast(pl.String).fill_null("").alias("group")
    return pl.lit("").alias("group")


def scan_prompts(path: str | Path) -> pl.LazyFrame:
    """A prompt table with its ``text`` column, assembled lazily from the parts when the table
    is normalised (select and filter before collecting so only those rows are assembled)."""
    frame = pl.scan_parquet(path)
    return frame.with_columns(text=text_expr(frame.collect_schema().names()))


def shard_of(uids: pl.Series, n_shards: int) -> pl.Series:
    """Inference shard of each prompt, a pure function of its uid (stable as prompts are added)."""
    return (uids.str.slice(0, 8).str.to_integer(base=16) % n_shards).alias("shard")


def check_unique_uids(
    table: pl.DataFrame, source: str, shown: Sequence[str] = ("task",)
) -> pl.DataFrame:
    """``table`` if its ``prompt_uid`` values are distinct, else InputError naming ``source``,
    the first repeated uid and the rows that share it (their columns ``shown``, those the
    table has): every join on the uid (responses, outcomes, group means) would otherwise count
    those rows twice without a word."""
    repeated = table.filter(pl.col("prompt_uid").is_duplicated())
    if repeated.height:
        uid = repeated["prompt_uid"][0]
        rows = repeated.filter(pl.col("prompt_uid") == uid)
        shown = [c for c in shown if c in rows.columns]
        described = "; ".join(
            ", ".join(f"{c}={v!r}" for c, v in zip(shown, row, strict=True))
            for row in rows.select(shown).head(3).iter_rows()
        )
        raise InputError(
            source,
            f"{repeated['prompt_uid'].n_unique()} prompt uids are shared by several rows; "
            f"{uid} by {rows.height} rows ({described})",
            "prompt_uid",
        )
    return table
