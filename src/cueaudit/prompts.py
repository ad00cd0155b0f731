"""What every study's prompt table shares: stable prompt ids and their inference shards.

A study writes one prompt table per task with at least ``prompt_uid``, ``task`` and ``text``
(and optionally ``group``, the prefix-sharing key inference batches by). Inference and
parsing read nothing else, so they never need to know which study wrote the table.
"""

from __future__ import annotations

import hashlib
from typing import Final

import polars as pl

#: Columns inference reads from any prompt table.
INFERENCE_COLUMNS: Final = ("prompt_uid", "text")


def stable_uid(*parts: str | None) -> str:
    """A 20-hex-digit id hashed from ``parts`` (None counts as the empty string)."""
    joined = "\x1f".join(part or "" for part in parts)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:20]


def shard_of(uids: pl.Series, n_shards: int) -> pl.Series:
    """Inference shard of each prompt, a pure function of its uid (stable as prompts are added)."""
    return (uids.str.slice(0, 8).str.to_integer(base=16) % n_shards).alias("shard")
