"""Run one inference shard: the prompts of one task and shard, for one model and seed.

Every answer goes through the response cache (cueaudit.inference.cache): cached answers are
served without a model call, finished batches are flushed to the cache while the job runs
(so a killed job resumes where it stopped), and the shard table is assembled from both. A few
fresh answers are then answered again alone, and the shard's parquet metadata records how
many came back the same (cueaudit.inference.determinism).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from cueaudit.errors import InputError
from cueaudit.inference.backends import build_backend
from cueaudit.inference.cache import CACHE_SCHEMA, DEFAULT_CACHE_DIR, ResponseCache, cache_key
from cueaudit.inference.core import (
    PLAIN_TEXT,
    RESPONSE_SCHEMA,
    AnswerSpec,
    Backend,
    Decoding,
    Request,
    backend_decoding,
    canonical_json,
)
from cueaudit.inference.determinism import (
    ShardRecord,
    check_shard,
    checks_of,
    fingerprint_counts,
)
from cueaudit.io import write_parquet
from cueaudit.prompts import group_expr, scan_prompts, shard_of

log = logging.getLogger(__name__)

__all__ = ["RESPONSE_SCHEMA", "SeedTask", "run_seed", "run_shard", "shard_prompts"]


def shard_prompts(prompts_path: str | Path, shard: int, n_shards: int) -> pl.DataFrame:
    """The shard's prompts as inference reads them: ``prompt_uid``, ``text`` and the
    prefix-sharing ``group`` (cueaudit.prompts.group_expr).

    Only the uids of the whole table are read to find the shard; the texts are assembled
    (from ``text`` or the normalised ``prefix`` + ``body``) for the shard's rows only.
    """
    frame = scan_prompts(prompts_path)
    return (
        frame.filter(shard_of(pl.col("prompt_uid"), n_shards) == shard)
        .select(
            "prompt_uid", pl.col("text").cast(pl.String), group_expr(frame.collect_schema().names())
        )
        .collect()
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
    answer: AnswerSpec = PLAIN_TEXT,
    cache_dir: str | Path = DEFAULT_CACHE_DIR,
    backend: Backend | None = None,
    flush_rows: int = 256,
    flush_seconds: float = 60.0,
) -> pl.DataFrame:
    """Answer every prompt of the shard (from the cache where possible) and write the table."""
    prompts = shard_prompts(prompts_path, shard, n_shards)
    job = f"{model_name}/seed{seed}/{task}/{shard}of{n_shards}"
    # Batch API state lives beside the response cache: results/cache/batches/<job>.
    backend = backend or build_backend(
        model_dir, model_spec, state_dir=Path(cache_dir).parent / "batches" / job
    )
    params = backend_decoding(backend, decoding, max_new_tokens)
    log.info("decoding (config over the model's defaults): %s", params)
    identity = backend.identity()
    decoding_key = params.cache_fields()  # the resolved values, as applied
    answer_key = answer.cache_fields()
    uids, texts, groups = (prompts[c].to_list() for c in ("prompt_uid", "text", "group"))
    rendered = [backend.render(text, answer) for text in texts]
    keys = [
        cache_key(identity, decoding_key, prompt, uid, seed, answer_key)
        for uid, prompt in zip(uids, rendered, strict=True)
    ]
    requests = {
        key: Request(uid, text, seed=seed, cache_key=key, group=group, answer=answer)
        for uid, text, group, key in zip(uids, texts, groups, keys, strict=True)
    }
    cache = ResponseCache(cache_dir, model_name, seed, task, shard, n_shards)
    cached = cache.lookup(keys)
    cached, rescored = _add_missing_scores(cached, requests, answer, backend, cache)
    hit_keys = set(cached["cache_key"].to_list())
    misses = [request for key, request in requests.items() if key not in hit_keys]
    check_context(
        backend,
        [(u, p) for u, p, k in zip(uids, rendered, keys, strict=True) if k not in hit_keys],
        max_new_tokens,
        str(prompts_path),
    )
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
    fresh = _generate(backend, misses, params, cache, flush_rows, flush_seconds)
    # A few fresh answers again, each alone; compared, then dropped (cached nowhere).
    check = check_shard(backend, fresh, requests, params, checks_of(decoding))
    answered = pl.concat(
        [
            cached.with_columns(cache_hit=pl.lit(True)),
            pl.DataFrame(fresh, schema=CACHE_SCHEMA).with_columns(cache_hit=pl.lit(False)),
        ]
    ).unique("cache_key", keep="first")
    responses = (
        pl.DataFrame(
            {"prompt_uid": uids, "cache_key": keys},
            schema={"prompt_uid": pl.String, "cache_key": pl.String},
        )
        .join(answered.drop("prompt_uid", "created"), on="cache_key", how="left")
        .with_columns(model=pl.lit(model_name), seed=pl.lit(seed, pl.Int64), task=pl.lit(task))
        .select(list(RESPONSE_SCHEMA))
        .cast(RESPONSE_SCHEMA)
    )
    missing = responses.filter(pl.col("completion").is_null()).height
    if missing:
        raise RuntimeError(f"{missing} prompts of the shard got no answer from {backend.name}")
    record = ShardRecord(
        model=model_name,
        seed=seed,
        task=task,
        shard=shard,
        n_shards=n_shards,
        backend=backend.name,
        fresh=len(fresh),
        checked=check.checked,
        identical=check.identical,
        max_option_logprob_diff=check.max_option_logprob_diff,
        system_fingerprints=fingerprint_counts(responses["system_fingerprint"]),
        note=check.note,
    )
    write_parquet(responses, out_path, metadata=record.metadata())
    log.info(
        "model calls: %d, cache hits: %d, options scored for cached answers: %d",
        len(fresh),
        len(hit_keys),
        rescored,
    )
    stats = getattr(backend, "stats", None)
    if stats is not None:
        log.info("engine: %s", stats)
    return responses


@dataclass(frozen=True)
class SeedTask:
    """One task of a model x seed answered in one job (run_seed): what run_shard reads."""

    prompts_path: str | Path
    n_shards: int
    max_new_tokens: int
    answer: AnswerSpec = PLAIN_TEXT


def run_seed(
    *,
    tasks: Mapping[str, SeedTask],
    model_dir: str | Path,
    model_name: str,
    model_spec: Mapping[str, Any],
    seed: int,
    decoding: Mapping[str, Any],
    out_dir: str | Path,
    cache_dir: str | Path = DEFAULT_CACHE_DIR,
    backend: Backend | None = None,
) -> None:
    """Every task and shard of one model x seed on one backend, so that its engine starts
    once: each shard as run_shard writes it, to ``out_dir/<task>/<shard>.parquet``."""
    backend = backend or build_backend(
        model_dir,
        model_spec,
        state_dir=Path(cache_dir).parent / "batches" / model_name / f"seed{seed}",
    )
    out = Path(out_dir)
    run: dict[str, Any] = {
        "model_dir": model_dir,
        "model_name": model_name,
        "model_spec": model_spec,
        "seed": seed,
        "decoding": decoding,
        "cache_dir": cache_dir,
        "backend": backend,
    }
    for number, (task, settings) in enumerate(tasks.items(), start=1):
        log.info("task %d of %d: %s", number, len(tasks), task)
        for shard in range(settings.n_shards):
            run_shard(
                prompts_path=settings.prompts_path,
                shard=shard,
                n_shards=settings.n_shards,
                task=task,
                max_new_tokens=settings.max_new_tokens,
                out_path=out / task / f"{shard}.parquet",
                answer=settings.answer,
                **run,
            )


#: Config keys of a transformers model whose value is its context length.
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
#: Tokenizers without a known limit report this huge sentinel as ``model_max_length``.
_NO_LIMIT = 10**9


def context_limit(backend: Backend) -> tuple[int, str] | None:
    """The backend's context length in tokens and where it comes from, if it can be known.

    A backend may say so itself (``context_length``); the local backends (HF, vLLM) are
    read from their model folder's ``config.json`` and their tokenizer's ``model_max_length``
    (the smaller one wins). API backends do not know it: their server refuses a prompt that
    is too long with an error naming the request.
    """
    own = getattr(backend, "context_length", None)
    if own:
        return int(own), f"{backend.name} backend"
    limits: list[tuple[int, str]] = []
    model_path = getattr(backend, "model_path", None)
    config = Path(str(model_path)) / "config.json" if model_path else None
    if config is not None and config.is_file():
        values = json.loads(config.read_text(encoding="utf-8"))
        values = {**values, **(values.get("text_config") or {})}
        limits += [(int(values[k]), f"{config}: {k}") for k in CONTEXT_KEYS if values.get(k)]
    tokenizer = getattr(backend, "tokenizer", None)
    max_length = getattr(tokenizer, "model_max_length", None)
    if isinstance(max_length, int) and 0 < max_length < _NO_LIMIT:
        limits.append((max_length, "tokenizer model_max_length"))
    return min(limits) if limits else None


def _count_tokens(backend: Backend, prompts: list[str]) -> list[int] | None:
    count = getattr(backend, "count_tokens", None)
    if count is not None:
        return [int(n) for n in count(prompts)]
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None:
        return None
    return [len(ids) for ids in tokenizer(prompts, add_special_tokens=False)["input_ids"]]


def check_context(
    backend: Backend, prompts: list[tuple[str, str]], max_new_tokens: int, source: str
) -> None:
    """Refuse, before any generation, a rendered prompt whose tokens plus ``max_new_tokens``
    exceed the model's context: the model would otherwise truncate it or read past its
    positions and return an answer to a prompt it never saw whole.

    ``prompts`` are (prompt_uid, rendered prompt) pairs; ``source`` names the prompt table.
    """
    if not prompts:
        return
    known = context_limit(backend)
    if known is None:
        return
    limit, origin = known
    counts = _count_tokens(backend, [text for _, text in prompts])
    if counts is None:
        return
    too_long = [(uid, n) for (uid, _), n in zip(prompts, counts, strict=True)
                if n + max_new_tokens > limit]  # fmt: skip
    if too_long:
        uid, n = max(too_long, key=lambda item: item[1])
        raise InputError(
            source,
            f"{len(too_long)} of {len(prompts)} prompts to generate do not fit the model's "
            f"context of {limit} tokens "
            f"({origin}); the longest, prompt_uid {uid}, has {n} prompt tokens + "
            f"max_new_tokens {max_new_tokens} = {n + max_new_tokens}",
            "text",
        )


def _add_missing_scores(
    cached: pl.DataFrame,
    requests: Mapping[str, Request],
    answer: AnswerSpec,
    backend: Backend,
    cache: ResponseCache,
) -> tuple[pl.DataFrame, int]:
    """Cached answers lacking some asked-for option scores get them from a scoring pass.

    The cached text is kept (it was sampled once); only the scores, a deterministic function
    of the prompt, are added and written back. Backends that cannot score (API models) serve
    the cached answer with the scores it has.
    """
    wanted = [option.key() for option in answer.options]
    if not wanted or cached.height == 0:
        return cached, 0
    stored = [json.loads(s) if s else {} for s in cached["option_logprobs"].to_list()]
    lacking = [
        key
        for key, scores in zip(cached["cache_key"].to_list(), stored, strict=True)
        if not all(option in scores for option in wanted)
    ]
    if not lacking:
        return cached, 0
    if not backend.scores_options:
        log.warning(
            "%d cached answers lack option scores and %s cannot add them; served as cached",
            len(lacking),
            backend.name,
        )
        return cached, 0
    added: dict[str, dict[str, float]] = {}
    for batch in backend.score([requests[key] for key in lacking]):
        added.update((request.cache_key, scores) for request, scores in batch)
    merged = [
        canonical_json({**scores, **added.get(key, {})})
        for key, scores in zip(cached["cache_key"].to_list(), stored, strict=True)
    ]
    cached = cached.with_columns(
        option_logprobs=pl.Series(merged, dtype=pl.String),
        created=pl.when(pl.col("cache_key").is_in(list(added)))
        .then(pl.lit(time.time()))
        .otherwise(pl.col("created")),
    )
    cache.write(cached.filter(pl.col("cache_key").is_in(list(added))).to_dicts())
    return cached, len(added)


def _generate(
    backend: Backend,
    misses: list[Request],
    params: Decoding,
    cache: ResponseCache,
    flush_rows: int,
    flush_seconds: float,
) -> list[dict[str, Any]]:
    """Generate the misses, flushing finished batches to the cache as they come."""
    fresh: list[dict[str, Any]] = []
    if not misses:
        return fresh
    buffer: list[dict[str, Any]] = []
    last_flush = time.perf_counter()
    progress = _Progress(len(misses))
    for batch in backend.generate(misses, params):
        now = time.time()
        rows = [
            {
                "cache_key": request.cache_key,
                "prompt_uid": request.uid,
                **generation.row(),
                "backend": backend.name,
                "created": now,
                "generated": now,
            }
            for request, generation in batch
        ]
        buffer.extend(rows)
        fresh.extend(rows)
        progress.update(len(rows))
        # Paid answers (API backends) are written to the cache as soon as they arrive.
        if (
            backend.flush_every_batch
            or len(buffer) >= flush_rows
            or time.perf_counter() - last_flush >= flush_seconds
        ):
            cache.write(buffer)
            buffer, last_flush = [], time.perf_counter()
    cache.write(buffer)
    cache.compact()
    return fresh


def set_threads(threads: int) -> None:
    """CPU threads of torch (when installed) for a job given ``threads`` cores."""
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(max(1, int(threads)))
