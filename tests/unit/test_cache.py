"""Response cache and resumable shards: reruns never call the model twice for one answer."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from cueaudit.inference.cache import ResponseCache, cache_key
from cueaudit.inference.core import AnswerSpec, Option, Tool, canonical_json
from cueaudit.inference.runner import run_shard
from tests.helpers.inference import (
    ROOT,
    TEST_DECODING,
    CountingBackend,
    prompt_table,
    run_test_shard,
)

DECODING = TEST_DECODING


def _run(
    tmp: Path,
    backend: CountingBackend,
    model: str = "m",
    shard: int = 0,
    n_shards: int = 1,
    **kw: object,
) -> pl.DataFrame:
    prompts = tmp / "prompts.parquet"
    if not prompts.exists():
        prompt_table().write_parquet(prompts)
    return run_test_shard(tmp, backend, model=model, shard=shard, n_shards=n_shards, **kw)


def test_cache_key_changes_with_every_input() -> None:
    base = ({"model": "a"}, {"t": 1}, "text", "uid", 0)
    key = cache_key(*base)
    assert key == cache_key(*base)
    variants = [
        ({"model": "b"}, {"t": 1}, "text", "uid", 0),
        ({"model": "a"}, {"t": 2}, "text", "uid", 0),
        ({"model": "a"}, {"t": 1}, "text!", "uid", 0),
        ({"model": "a"}, {"t": 1}, "text", "uid2", 0),
        ({"model": "a"}, {"t": 1}, "text", "uid", 1),
    ]
    assert len({cache_key(*v) for v in variants} | {key}) == 6


def test_rerun_is_served_from_cache_with_zero_model_calls(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first_backend = CountingBackend()
    first = _run(tmp_path, first_backend)
    assert first_backend.calls == first.height == 36
    assert not first["cache_hit"].any()
    # A "code change": a new backend object, other flush settings; same model and params.
    again = CountingBackend()
    with caplog.at_level(logging.INFO):
        second = _run(tmp_path, again, flush_rows=3)
    assert again.calls == 0
    assert second["cache_hit"].all()
    assert "model calls: 0, cache hits: 36" in caplog.text
    cols = ["prompt_uid", "completion", "option_logprobs"]
    assert second.select(cols).equals(first.select(cols))
    # every answer keeps the time it was generated, served from the cache or not
    assert first["generated"].is_not_null().all()
    assert second["generated"].to_list() == first["generated"].to_list()


def test_changed_decoding_is_not_served_from_cache(tmp_path: Path) -> None:
    _run(tmp_path, CountingBackend())
    again = CountingBackend()
    run_shard(
        prompts_path=tmp_path / "prompts.parquet",
        shard=0,
        n_shards=1,
        model_dir=tmp_path,
        model_name="m",
        model_spec={"backend": "hf"},
        task="healthcare",
        seed=0,
        decoding={**DECODING, "temperature": 0.7},
        max_new_tokens=8,
        out_path=tmp_path / "o.parquet",
        cache_dir=tmp_path / "cache",
        backend=again,
    )
    assert again.calls == 36


def test_one_models_answers_are_never_served_for_another(tmp_path: Path) -> None:
    a = _run(tmp_path, CountingBackend("fake:model-a"))
    # Same name in the config, same folder, but other weights: nothing may be served.
    other = CountingBackend("fake:model-b")
    b = _run(tmp_path, other)
    assert other.calls == 36
    assert not b["cache_hit"].any()
    assert b["completion"].str.starts_with("fake:model-b").all()
    assert a["completion"].str.starts_with("fake:model-a").all()


def test_shard_count_change_reuses_answers(tmp_path: Path) -> None:
    _run(tmp_path, CountingBackend())
    total = 0
    for shard in range(3):
        backend = CountingBackend()
        out = run_test_shard(
            tmp_path, backend, shard=shard, n_shards=3, out_path=tmp_path / f"s{shard}.parquet"
        )
        assert backend.calls == 0
        total += out.height
    assert total == 36


def test_compaction_leaves_one_file_per_shard(tmp_path: Path) -> None:
    _run(tmp_path, CountingBackend(batch=2), flush_rows=2)
    files = list((tmp_path / "cache" / "m" / "seed0" / "healthcare").glob("*.parquet"))
    assert len(files) == 1
    assert pl.read_parquet(files[0]).height == 36
    cache = ResponseCache(tmp_path / "cache", "m", 0, "healthcare", 0, 1)
    assert cache.lookup(pl.read_parquet(files[0])["cache_key"]).height == 36


KILL_SCRIPT = """
import sys
sys.path[:0] = [{src!r}, {root!r}]
from cueaudit.inference.runner import run_shard
from tests.helpers.inference import CountingBackend
run_shard(prompts_path={prompts!r}, shard=0, n_shards=1, model_dir={tmp!r}, model_name="m",
          model_spec={{"backend": "hf"}}, task="healthcare", seed=0,
          decoding={decoding!r}, max_new_tokens=8, out_path={out!r},
          cache_dir={cache!r}, backend=CountingBackend(delay={delay}, batch=2), flush_rows=2)
"""


def test_killed_job_resumes_without_loss_or_duplicates(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.parquet"
    prompt_table().write_parquet(prompts)
    folder = tmp_path / "cache" / "m" / "seed0" / "healthcare"
    script = KILL_SCRIPT.format(
        src=str(ROOT / "src"),
        root=str(ROOT),
        prompts=str(prompts),
        tmp=str(tmp_path),
        out=str(tmp_path / "out.parquet"),
        cache=str(tmp_path / "cache"),
        delay=0.3,
        decoding=DECODING,  # the resumed run's: the same key
    )
    process = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.time() + 60
    while time.time() < deadline and len(list(folder.glob("*.parquet"))) < 3:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (tmp_path / "out.parquet").exists()
    done = pl.concat([pl.read_parquet(p) for p in folder.glob("*.parquet")]).height
    assert 0 < done < 36
    backend = CountingBackend()
    out = _run(tmp_path, backend)
    assert backend.calls == 36 - done  # only the unfinished prompts are generated
    assert out.height == 36
    assert out["prompt_uid"].n_unique() == 36
    assert out["cache_hit"].sum() == done
    assert set(out["prompt_uid"]) == set(prompt_table()["prompt_uid"])


YES_NO = AnswerSpec(
    options=(Option("Yes", ("Yes", "yes", "YES")), Option("No", ("No", "no", "NO")))
)
RATING = AnswerSpec(options=tuple(Option(str(k), (str(k),)) for k in range(1, 6)))


def test_answer_spec_enters_the_key_only_when_it_changes_the_generation() -> None:
    base = ({"model": "a"}, {"t": 1}, "text", "uid", 0)
    plain = cache_key(*base)
    # options are scored beside the generation: same key as a plain-text answer
    assert cache_key(*base, YES_NO.cache_fields()) == plain
    assert cache_key(*base, RATING.cache_fields()) == plain
    schema = AnswerSpec(json_schema=canonical_json({"type": "object"}))
    tool = Tool.of("submit", "Submit.", {"type": "object"})
    forced = AnswerSpec(tools=(tool,), tool_choice="submit")
    keys = {cache_key(*base, spec.cache_fields()) for spec in (schema, forced)}
    assert len(keys | {plain}) == 3


def test_legacy_cache_files_are_read_as_option_scores(tmp_path: Path) -> None:
    """Cache parts written before option scores existed (p_yes/p_no columns) still serve."""
    legacy = pl.DataFrame(
        {
            "cache_key": ["k1", "k2", "k3"],
            "prompt_uid": ["u1", "u2", "u3"],
            "completion": ["Yes.", "No", "$50,000"],
            "prompt_tokens": [10, 10, 10],
            "completion_tokens": [2, 1, 3],
            "finish_reason": ["stop"] * 3,
            "p_yes": [0.25, 0.0, None],
            "p_no": [0.5, 0.125, None],
            "seconds": [0.1] * 3,
            "backend": ["hf"] * 3,
            "created": [1.0] * 3,
        }
    )
    folder = tmp_path / "m" / "seed0" / "healthcare"
    folder.mkdir(parents=True)
    legacy.write_parquet(folder / "0of1.1-abc.parquet")
    found = ResponseCache(tmp_path, "m", 0, "healthcare", 0, 1).lookup(["k1", "k2", "k3"])
    scores = dict(zip(found["cache_key"], found["option_logprobs"], strict=True))
    first = json.loads(scores["k1"])
    assert math.exp(first["Yes|yes|YES"]) == pytest.approx(0.25, rel=1e-15)
    assert math.exp(first["No|no|NO"]) == pytest.approx(0.5, rel=1e-15)
    assert json.loads(scores["k2"])["Yes|yes|YES"] == -math.inf
    assert scores["k3"] is None
    assert {option.key() for option in YES_NO.options} == set(first)
    assert not found["constrained"].any()


def test_missing_option_scores_are_added_without_regenerating(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = CountingBackend()
    plain = _run(tmp_path, first)
    assert plain["option_logprobs"].is_null().all()
    # The task now asks for a 1-5 option set: the sampled answers are kept, scores added.
    again = CountingBackend()
    with caplog.at_level(logging.INFO):
        scored = _run(tmp_path, again, answer=RATING)
    assert again.calls == 0 and again.scored == plain.height
    assert "model calls: 0, cache hits: 36, options scored for cached answers: 36" in caplog.text
    assert scored["completion"].to_list() == plain["completion"].to_list()
    # the answers were generated by the first run: adding scores is no new answer
    assert scored["generated"].to_list() == plain["generated"].to_list()
    expected = {str(k): -float(k) for k in range(1, 6)}
    assert all(json.loads(s) == expected for s in scored["option_logprobs"])
    # A third run finds every score in the cache.
    third = CountingBackend()
    again_scored = _run(tmp_path, third, answer=RATING)
    assert third.calls == 0 and third.scored == 0
    assert again_scored["option_logprobs"].to_list() == scored["option_logprobs"].to_list()


def test_constrained_answers_are_cached_apart_from_plain_ones(tmp_path: Path) -> None:
    _run(tmp_path, CountingBackend())
    schema = AnswerSpec(json_schema=canonical_json({"type": "object"}))
    again = CountingBackend()
    _run(tmp_path, again, answer=schema)
    assert again.calls == 36


def test_a_shard_without_prompts_writes_an_empty_table(tmp_path: Path) -> None:
    prompts = prompt_table().head(1)
    prompts.write_parquet(tmp_path / "prompts.parquet")
    backend = CountingBackend()
    empty_shard = 1 - int(prompts["prompt_uid"][0][:8], 16) % 2
    out = _run(tmp_path, backend, shard=empty_shard, n_shards=2, answer=YES_NO)
    assert out.height == 0 and backend.calls == 0
    assert pl.read_parquet(tmp_path / "out/m.parquet").columns == out.columns


def test_one_job_per_seed_starts_one_backend_for_every_task_and_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """inference_jobs: per_seed: every task and shard of a model x seed on one backend (its
    engine starts once), each shard the table a per-task job writes, a rerun from the cache."""
    import cueaudit.inference.runner as runner

    prompt_table().write_parquet(tmp_path / "prompts.parquet")
    built: list[CountingBackend] = []

    def build_backend(*args: object, **kwargs: object) -> CountingBackend:
        built.append(CountingBackend())
        return built[-1]

    monkeypatch.setattr(runner, "build_backend", build_backend)
    tasks = {
        "healthcare": runner.SeedTask(tmp_path / "prompts.parquet", 2, 8),
        "salary": runner.SeedTask(tmp_path / "prompts.parquet", 1, 8),
    }

    def run(out: str) -> None:
        runner.run_seed(
            tasks=tasks,
            model_dir=tmp_path,
            model_name="m",
            model_spec={"backend": "hf"},
            seed=0,
            decoding=DECODING,
            out_dir=tmp_path / out,
            cache_dir=tmp_path / "cache",
        )

    run("seed0")
    assert len(built) == 1
    # two tasks' prompts, each answered once: 36 prompts per task
    assert built[0].calls == 72
    shards = sorted(
        p.relative_to(tmp_path / "seed0").as_posix()
        for p in (tmp_path / "seed0").rglob("*.parquet")
    )
    assert shards == ["healthcare/0.parquet", "healthcare/1.parquet", "salary/0.parquet"]
    per_task = run_test_shard(tmp_path, CountingBackend(), shard=1, n_shards=2)
    seed_shard = pl.read_parquet(tmp_path / "seed0/healthcare/1.parquet")
    cols = ["prompt_uid", "completion", "option_logprobs", "task"]
    assert seed_shard.select(cols).equals(per_task.select(cols))
    assert pl.read_parquet(tmp_path / "seed0/salary/0.parquet")["task"].unique().to_list() == [
        "salary"
    ]

    run("again")
    assert len(built) == 2 and built[1].calls == 0
