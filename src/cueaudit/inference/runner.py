"""Run one inference shard: the prompts of one task and shard, for one model and seed.

Every answer goes through the response cache (cueaudit.inference.cache): cached answers are
served without a model call, finished batches are flushed to the cache while the job runs
(so a killed job resumes where it stopped), and the shard table is assembled from both.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from cueaudit.expansion import shard_of
from cueaudit.inference.cache import CACHE_SCHEMA, DEFAULT_CACHE_DIR, ResponseCache, cache_key
from cueaudit.inference.core import RESPONSE_SCHEMA, Backend, Decoding, Request
from cueaudit.inference.sampling import prompt_seed
from cueaudit.io import write_parquet

log = logging.getLogger(__name__)

__all__ = ["RESPONSE_SCHEMA", "make_backend", "run_shard", "shard_prompts"]


def shard_prompts(prompts_path: str | Path, shard: int, n_shards: int) -> pl.DataFrame:
    """The shard's prompts, each with its prefix-sharing group (one cue value)."""
    prompts = pl.read_parquet(prompts_path)
    group = (
        pl.concat_str([pl.col("cue"), pl.col("cue_value").fill_null("")], separator="\x1f")
        if {"cue", "cue_value"} <= set(prompts.columns)
        else pl.lit("")
    )
    prompts = prompts.select("prompt_uid", "text", group=group)
    return prompts.filter(shard_of(prompts["prompt_uid"], n_shards) == shard)


def make_backend(model_dir: str | Path, model_spec: Mapping[str, Any]) -> Backend:
    """The configured backend of a prepared model folder."""
    from cueaudit.models import load_manifest

    manifest = load_manifest(model_dir)
    kind = model_spec["backend"]
    if kind == "openai":
        from cueaudit.inference.openai_backend import OpenAIBackend

        return OpenAIBackend.from_spec(model_spec, manifest["model_id"])
    if kind == "vllm":
        from cueaudit.inference.vllm_backend import VLLMBackend

        return VLLMBackend.from_spec(manifest["resolved_path"], model_spec, manifest["model_id"])
    from cueaudit.inference.hf import HFEngine

    return HFEngine(
        manifest["resolved_path"],
        model_id=manifest["model_id"],
        dtype=model_spec.get("dtype", "float32"),
        device=model_spec.get("device", "auto"),
        quantization=model_spec.get("quantization", "none"),
        compile=model_spec.get("compile", False),
        attn_implementation=model_spec.get("attn_implementation"),
        token_budget=model_spec.get("token_budget", "auto"),
        max_batch_size=model_spec.get("batch_size", 64),
        prefix_min_tokens=model_spec.get("prefix_min_tokens", 32),
    )


class _Progress:
    """Progress lines (prompts/s and ETA) into the rule's log, at most every ``every`` s."""

    def __init__(self, total: int, every: float = 10.0) -> None:
        self.total, self.every, self.done = total, every, 0
        self.start = self.last = time.perf_counter()

    def update(self, n: int) -> None:
        self.done += n
        now = time.perf_counter()
        if now - self.last < self.every and self.done < self.total:
            return
        self.last = now
        rate = self.done / max(now - self.start, 1e-9)
        eta = (self.total - self.done) / rate if rate else float("inf")
        bar = "#" * int(30 * self.done / max(self.total, 1))
        log.info(
            "[%-30s] %d/%d prompts, %.2f prompts/s, ETA %.0f s",
            bar,
            self.done,
            self.total,
            rate,
            eta,
        )


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
    cache_dir: str | Path = DEFAULT_CACHE_DIR,
    backend: Backend | None = None,
    flush_rows: int = 256,
    flush_seconds: float = 60.0,
) -> pl.DataFrame:
    """Answer every prompt of the shard (from the cache where possible) and write the table."""
    prompts = shard_prompts(prompts_path, shard, n_shards)
    backend = backend or make_backend(model_dir, model_spec)
    params = Decoding.from_config(decoding, max_new_tokens)
    identity = backend.identity()
    decoding_key = dataclasses.asdict(params)
    uids, texts, groups = (prompts[c].to_list() for c in ("prompt_uid", "text", "group"))
    keys = [
        cache_key(identity, decoding_key, backend.render(text), uid, seed)
        for uid, text in zip(uids, texts, strict=True)
    ]
    cache = ResponseCache(cache_dir, model_name, seed, task, shard, n_shards)
    if hasattr(backend, "state_dir"):  # Batch API state beside the cache: results/cache/batches
        job = f"{model_name}/seed{seed}/{task}/{shard}of{n_shards}"
        backend.state_dir = Path(cache_dir).parent / "batches" / job
    # Paid answers (API backends) are written to the cache as soon as they arrive.
    flush_each = bool(getattr(backend, "flush_every_batch", False))
    cached = cache.lookup(keys)
    hit_keys = set(cached["cache_key"].to_list())
    misses = [
        Request(uid, text, seed=seed, cache_key=key, group=group)
        for uid, text, group, key in zip(uids, texts, groups, keys, strict=True)
        if key not in hit_keys
    ]
    log.info(
        "%s seed %d task %s shard %d/%d: %d prompts, %d cached, %d to generate (%s, %s)",
        model_name,
        seed,
        task,
        shard,
        n_shards,
        len(uids),
        len(hit_keys),
        len(misses),
        backend.name,
        identity.get("model"),
    )
    fresh: list[dict[str, Any]] = []
    buffer: list[dict[str, Any]] = []
    last_flush = time.perf_counter()
    progress = _Progress(len(misses))
    if misses:
        for batch in backend.generate(misses, params):
            now = time.time()
            rows = [
                {
                    "cache_key": request.cache_key,
                    "prompt_uid": request.uid,
                    **generation.row(),
                    "backend": backend.name,
                    "created": now,
                }
                for request, generation in batch
            ]
            buffer.extend(rows)
            fresh.extend(rows)
            progress.update(len(rows))
            if (
                flush_each
                or len(buffer) >= flush_rows
                or time.perf_counter() - last_flush >= flush_seconds
            ):
                cache.write(buffer)
                buffer, last_flush = [], time.perf_counter()
        cache.write(buffer)
        cache.compact()
    model_calls = len(fresh)
    answered = pl.concat(
        [
            cached.with_columns(cache_hit=pl.lit(True)),
            pl.DataFrame(fresh, schema=CACHE_SCHEMA).with_columns(cache_hit=pl.lit(False)),
        ]
    ).unique("cache_key", keep="first")
    responses = (
        pl.DataFrame({"prompt_uid": uids, "cache_key": keys})
        .join(answered.drop("prompt_uid", "created"), on="cache_key", how="left")
        .with_columns(model=pl.lit(model_name), seed=pl.lit(seed, pl.Int64), task=pl.lit(task))
        .select(list(RESPONSE_SCHEMA))
        .cast(RESPONSE_SCHEMA)
    )
    missing = responses.filter(pl.col("completion").is_null()).height
    if missing:
        raise RuntimeError(f"{missing} prompts of the shard got no answer from {backend.name}")
    write_parquet(responses, out_path)
    log.info("model calls: %d, cache hits: %d", model_calls, len(hit_keys))
    stats = getattr(backend, "stats", None)
    if stats is not None:
        log.info("engine: %s", stats)
    return responses


def set_threads(threads: int) -> None:
    """CPU threads of torch (when installed) for a job given ``threads`` cores."""
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(max(1, int(threads)))


def seed_of(seed: int, uid: str) -> int:
    """Per-prompt seed a backend with a native seed parameter receives (OpenAI, vLLM)."""
    return prompt_seed(seed, uid) % (2**31 - 1)
