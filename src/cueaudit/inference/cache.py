"""Content-addressed response cache: an answer is computed (and paid for) once.

Layout (plain parquet, documented in the README)::

    results/cache/responses/{model}/seed{seed}/{task}/{shard}of{n_shards}.{stamp}.parquet

Each file holds finished responses keyed by ``cache_key``, the SHA-256 of everything that
determines an answer: the backend's identity (model weights hash or resolved revision, dtype,
quantization, sampler version), the decoding parameters, the rendered prompt, the prompt uid
and the run seed (cueaudit.inference.cache.cache_key). Batch size, shard count, code changes
outside the key, or the model's name in the config do not enter the key.

Concurrency: one writer per inference job. A job only ever creates files whose name starts
with its own ``{shard}of{n_shards}.`` prefix (Snakemake runs one job per shard), each written
atomically, so concurrent jobs on a cluster's shared filesystem never write the same file.
Completed batches are flushed as new part files while the job runs: a job killed at any point
loses at most the unflushed batches, and its rerun reads the parts back as cache hits. At the
end a job compacts its own parts into one file. Readers tolerate files that vanish during a
compaction and drop duplicate keys.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import polars as pl

from cueaudit.inference.core import GENERATION_SCHEMA
from cueaudit.io import write_parquet

log = logging.getLogger(__name__)

DEFAULT_CACHE_DIR: Final = "results/cache/responses"

CACHE_SCHEMA: Final = {
    "cache_key": pl.String,
    "prompt_uid": pl.String,
    **GENERATION_SCHEMA,
    "backend": pl.String,
    "created": pl.Float64,
}


def cache_key(
    identity: Mapping[str, Any],
    decoding: Mapping[str, Any],
    rendered_prompt: str,
    prompt_uid: str,
    seed: int,
) -> str:
    """SHA-256 over the canonical JSON of everything that determines one answer."""
    payload = json.dumps(
        {
            "identity": dict(identity),
            "decoding": dict(decoding),
            "prompt": rendered_prompt,
            "uid": prompt_uid,
            "seed": seed,
        },
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ResponseCache:
    """The cache folder of one model, seed and task; writes belong to one shard job."""

    def __init__(
        self, root: str | Path, model: str, seed: int, task: str, shard: int, n_shards: int
    ) -> None:
        self.folder = Path(root) / model / f"seed{seed}" / task
        self.prefix = f"{shard}of{n_shards}."
        self.parts_written = 0

    def _files(self) -> list[Path]:
        return sorted(self.folder.glob("*.parquet")) if self.folder.is_dir() else []

    def lookup(self, keys: Iterable[str]) -> pl.DataFrame:
        """Cached rows of these keys (one row per key)."""
        wanted = pl.Series("cache_key", list(dict.fromkeys(keys)), dtype=pl.String)
        frames = []
        for path in self._files():
            try:
                frame = pl.read_parquet(path)
            except FileNotFoundError:  # compacted away by its writer meanwhile
                continue
            frames.append(frame.filter(pl.col("cache_key").is_in(wanted)))
        if not frames:
            return pl.DataFrame(schema=CACHE_SCHEMA)
        found = pl.concat([f.select(list(CACHE_SCHEMA)).cast(CACHE_SCHEMA) for f in frames])
        return found.unique("cache_key", keep="first", maintain_order=True)

    def write(self, rows: list[dict[str, Any]]) -> Path | None:
        """Append finished responses as one new part file (atomic)."""
        if not rows:
            return None
        frame = pl.DataFrame(rows, schema=CACHE_SCHEMA, orient="row")
        path = self.folder / f"{self.prefix}{time.time_ns()}-{uuid.uuid4().hex[:8]}.parquet"
        write_parquet(frame, path)
        self.parts_written += 1
        return path

    def compact(self) -> None:
        """Merge this shard's part files into one; other shards' files are never touched."""
        own = [p for p in self._files() if p.name.startswith(self.prefix)]
        if len(own) < 2:
            return
        merged = pl.concat([pl.read_parquet(p).cast(CACHE_SCHEMA) for p in own]).unique(
            "cache_key", keep="first", maintain_order=True
        )
        target = self.folder / f"{self.prefix}{time.time_ns()}-{uuid.uuid4().hex[:8]}.parquet"
        write_parquet(merged, target)
        for path in own:
            with _ignore_missing():
                os.remove(path)
        log.info("cache: compacted %d part files into %s", len(own), target.name)


class _ignore_missing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        return kind is FileNotFoundError
