"""Run one inference shard: the prompts of one task and shard, for one model and seed."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import polars as pl

from cueaudit.expansion import shard_of
from cueaudit.io import write_parquet

log = logging.getLogger(__name__)

RESPONSE_SCHEMA: Final = {
    "prompt_uid": pl.String,
    "model": pl.String,
    "seed": pl.Int64,
    "task": pl.String,
    "completion": pl.String,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "finish_reason": pl.String,
    "p_yes": pl.Float64,
    "p_no": pl.Float64,
    "seconds": pl.Float64,
}


def shard_prompts(prompts_path: str | Path, shard: int, n_shards: int) -> pl.DataFrame:
    prompts = pl.read_parquet(prompts_path, columns=["prompt_uid", "text"])
    return prompts.filter(shard_of(prompts["prompt_uid"], n_shards) == shard)


def run_shard(
    *,
    prompts_path: str | Path,
    shard: int,
    n_shards: int,
    model_dir: str | Path,
    model_name: str,
    model_spec: Mapping[str, Any],
    task: str,
    seed: int,
    decoding: Mapping[str, Any],
    max_new_tokens: int,
    out_path: str | Path,
) -> pl.DataFrame:
    """Generate one answer per prompt of the shard and write the response table."""
    from cueaudit.inference.hf import Decoding, HFGenerator, batch_seed
    from cueaudit.models import load_manifest

    prompts = shard_prompts(prompts_path, shard, n_shards)
    manifest = load_manifest(model_dir)
    generator = HFGenerator(
        manifest["resolved_path"],
        dtype=model_spec.get("dtype", "float32"),
        device=model_spec.get("device", "auto"),
    )
    params = Decoding(max_new_tokens=max_new_tokens, **decoding)
    batch_size = int(model_spec.get("batch_size", 16))

    # Length-sorted batches waste little compute on padding.
    lengths = generator.token_lengths(prompts["text"].to_list())
    ordered = prompts.with_columns(n_tokens=pl.Series(lengths)).sort("n_tokens", "prompt_uid")
    uids, texts = ordered["prompt_uid"].to_list(), ordered["text"].to_list()
    log.info(
        "%s seed %d task %s shard %d/%d: %d prompts, batch size %d, device %s",
        model_name,
        seed,
        task,
        shard,
        n_shards,
        len(uids),
        batch_size,
        generator.device,
    )
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    for first in range(0, len(uids), batch_size):
        batch_uids = uids[first : first + batch_size]
        tick = time.perf_counter()
        results = generator.generate(
            texts[first : first + batch_size], params, batch_seed(seed, batch_uids)
        )
        per_prompt = (time.perf_counter() - tick) / len(batch_uids)
        rows.extend(
            {"prompt_uid": uid, **vars(result), "seconds": per_prompt}
            for uid, result in zip(batch_uids, results, strict=True)
        )
        done, elapsed = len(rows), time.perf_counter() - start
        rate = done / elapsed
        log.info(
            "%d/%d prompts, %.2f prompts/s, ETA %.0f s",
            done,
            len(uids),
            rate,
            (len(uids) - done) / rate,
        )
    generated = {k: v for k, v in RESPONSE_SCHEMA.items() if k not in ("model", "seed", "task")}
    responses = (
        pl.DataFrame(rows, schema=generated)
        .with_columns(model=pl.lit(model_name), seed=pl.lit(seed, pl.Int64), task=pl.lit(task))
        .select(list(RESPONSE_SCHEMA))
    )
    write_parquet(responses, out_path)
    total = time.perf_counter() - start
    log.info(
        "wrote %d responses in %.1f s (%.2f prompts/s)",
        responses.height,
        total,
        responses.height / total if total else 0.0,
    )
    return responses
