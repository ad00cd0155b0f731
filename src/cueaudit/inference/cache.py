"""Content-addressed response cache: an answer is computed (and paid for) once.

Layout (plain parquet, documented in docs/models.md, "The response cache")::

    results/cache/responses/{model}/seed{seed}/{task}/{shard}of{n_shards}.{stamp}.parquet

Each file holds finished responses keyed by ``cache_key``, the SHA-256 of everything that
determines an answer: the backend's identity (model weights hash or resolved revision, dtype,
quantization, sampler version), the decoding parameters, the rendered prompt, the prompt uid,
the run seed and what of the answer spec changes the generation (a JSON schema, tools:
``AnswerSpec.cache_fields``). Batch size, shard count, code changes outside the key, the
model's name in the config, or which options are scored do not enter the key.

Option scores are stored per option (``option_logprobs``); a request asking for options a
cached answer lacks gets them added by a scoring pass (``ResponseCache.write`` of the merged
row: readers keep each key's newest row). Files written before option scores existed carry
``p_yes``/``p_no``; they are read as the scores of the options ``Yes|yes|YES`` and
``No|no|NO``, which is what those columns measured.

Concurrency: one writer per inference job. A job only ever creates files whose name starts
with its own ``{shard}of{n_shards}.`` prefix (Snakemake runs one job per shard), each written
atomically, so concurrent jobs on a cluster's shared filesystem never write the same file.
Completed batches are flushed as new part files while the job runs: a job killed at any point
loses at most the unflushed batches, and its rerun reads the parts back as cache hits. At the
end a job compacts its own parts into one file. Readers tolerate files that vanish during a
compaction and drop duplicate keys.

A part file that cannot be read (truncated by a full disk, damaged on a shared filesystem)
is renamed to ``<name>.corrupt`` with a warning naming it, and its rows become cache misses:
they are computed again and written to a new part, while every other part is still served.
Delete the ``.corrupt`` files once the rerun succeeded (or inspect them first).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import polars as pl

from cueaudit.inference.core import GENERATION_SCHEMA, canonical_json
from cueaudit.io import safe_component, write_parquet

log = logging.getLogger(__name__)

DEFAULT_CACHE_DIR: Final = "results/cache/responses"

CACHE_SCHEMA: Final = {
    "cache_key": pl.String,
    "prompt_uid": pl.String,
    **GENERATION_SCHEMA,
    "backend": pl.String,
    "created": pl.Float64,  # when the row was written (the newest row of a key wins)
    "generated": pl.Float64,  # when the answer was generated (kept when scores are added)
}


def cache_key(
    identity: Mapping[str, Any],
    decoding: Mapping[str, Any],
    rendered_prompt: str,
    prompt_uid: str,
    seed: int,
    answer: Mapping[str, Any] | None = None,
) -> str:
    """SHA-256 over the canonical JSON of everything that determines one answer.

    ``answer`` (``AnswerSpec.cache_fields``) enters only when not empty, so the key of a
    plain-text answer is the one it had before answer specs existed.
    """
    fields: dict[str, Any] = {
        "identity": dict(identity),
        "decoding": dict(decoding),
        "prompt": rendered_prompt,
        "uid": prompt_uid,
        "seed": seed,
    }
    if answer:
        fields["answer"] = dict(answer)
    return hashlib.sha256(canonical_json(fields).encode("utf-8")).hexdigest()


#: Option keys the first-token P(Yes)/P(No) of cache files without option scores measured.
LEGACY_OPTIONS: Final = ("Yes|yes|YES", "No|no|NO")


def _legacy_scores(p_yes: float | None, p_no: float | None) -> str | None:
    if p_yes is None or p_no is None:
        return None
    scores = {
        key: math.log(p) if p > 0 else -math.inf
        for key, p in zip(LEGACY_OPTIONS, (p_yes, p_no), strict=True)
    }
    return canonical_json(scores)


def read_part(path: str | Path) -> pl.DataFrame:
    """One cache file in the current schema (files with ``p_yes``/``p_no`` are migrated)."""
    frame = pl.read_parquet(path)
    if "option_logprobs" not in frame.columns and "p_yes" in frame.columns:
        scores = [
            _legacy_scores(y, n)
            for y, n in zip(frame["p_yes"].to_list(), frame["p_no"].to_list(), strict=True)
        ]
        frame = frame.with_columns(
            option_logprobs=pl.Series(scores, dtype=pl.String),
            tool_calls=pl.lit(None, pl.String),
            constrained=pl.lit(False),
        )
    if "generated" not in frame.columns:  # parts written before answers kept their time
        frame = frame.with_columns(generated=pl.col("created"))
    if "system_fingerprint" not in frame.columns:  # parts written before it was kept
        frame = frame.with_columns(system_fingerprint=pl.lit(None, pl.String))
    return frame.select(list(CACHE_SCHEMA)).cast(CACHE_SCHEMA)


def _newest_per_key(frames: list[pl.DataFrame]) -> pl.DataFrame:
    if not frames:
        return pl.DataFrame(schema=CACHE_SCHEMA)
    return (
        pl.concat(frames)
        .sort("created", descending=True, maintain_order=True)
        .unique("cache_key", keep="first", maintain_order=True)
    )


class ResponseCache:
    """The cache folder of one model, seed and task; writes belong to one shard job."""

    def __init__(
        self, root: str | Path, model: str, seed: int, task: str, shard: int, n_shards: int
    ) -> None:
        parts = (safe_component(model, "model", "config"), safe_component(task, "task", "config"))
        self.root = Path(root)
        self.folder = self.root / parts[0] / f"seed{seed}" / parts[1]
        self.prefix = f"{shard}of{n_shards}."
        self.parts_written = 0
        self.quarantined: list[Path] = []

    def _files(self) -> list[Path]:
        return sorted(self.folder.glob("*.parquet")) if self.folder.is_dir() else []

    def lookup(self, keys: Iterable[str]) -> pl.DataFrame:
        """Cached rows of these keys (one row per key, the newest)."""
        wanted = pl.Series("cache_key", list(dict.fromkeys(keys)), dtype=pl.String)
        frames = []
        for path in self._files():
            frame = self._read(path)
            if frame is not None:
                frames.append(frame.filter(pl.col("cache_key").is_in(wanted)))
        return _newest_per_key(frames)

    def _read(self, path: Path) -> pl.DataFrame | None:
        """One part, or None if it vanished (compacted away meanwhile) or is corrupt."""
        try:
            return read_part(path)
        except FileNotFoundError:
            return None
        # A damaged file can also make the parquet reader panic (a BaseException).
        except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError) as error:
            if not path.exists():  # removed by a compaction while being read
                return None
            self._quarantine(path, error)
            return None

    def _quarantine(self, path: Path, error: Exception) -> None:
        target = path.with_name(path.name + ".corrupt")
        try:
            os.replace(path, target)
        except FileNotFoundError:
            return
        self.quarantined.append(target)
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        log.warning(
            "cache: unreadable part %s moved to %s (%s: %s); its answers are computed again",
            path,
            target,
            type(error).__name__,
            reason,
        )

    def write(self, rows: list[dict[str, Any]]) -> Path | None:
        """Append finished responses as one new part file (atomic)."""
        if not rows:
            return None
        frame = pl.DataFrame(rows, schema=CACHE_SCHEMA, orient="row")
        path = self.folder / f"{self.prefix}{time.time_ns()}-{uuid.uuid4().hex[:8]}.parquet"
        write_parquet(frame, path, root=self.root)
        self.parts_written += 1
        return path

    def compact(self) -> None:
        """Merge this shard's part files into one; other shards' files are never touched."""
        own = [p for p in self._files() if p.name.startswith(self.prefix)]
        if len(own) < 2:
            return
        frames = [frame for p in own if (frame := self._read(p)) is not None]
        own = [p for p in own if p.exists()]
        merged = _newest_per_key(frames)
        target = self.folder / f"{self.prefix}{time.time_ns()}-{uuid.uuid4().hex[:8]}.parquet"
        write_parquet(merged, target, root=self.root)
        for path in own:
            with _ignore_missing():
                os.remove(path)
        log.info("cache: compacted %d part files into %s", len(own), target.name)


class _ignore_missing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        return kind is FileNotFoundError
