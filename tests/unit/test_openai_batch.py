"""Batch API flow against a local stand-in of /v1/files and /v1/batches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cueaudit.inference.core import Decoding, Request
from cueaudit.inference.openai_backend import BatchSettings, OpenAIBackend, OpenAISettings, Prices
from cueaudit.inference.openai_batch import (
    BatchRunner,
    DryRun,
    custom_id,
    estimate_cost,
    split_lines,
)
from cueaudit.inference.runner import run_shard
from tests.helpers.fake_batch_api import FakeBatchAPI
from tests.helpers.inference import prompt_table

DECODING = Decoding(max_new_tokens=4)


def backend(url: str, **batch: object) -> OpenAIBackend:
    settings = OpenAISettings(
        model="gpt-5.2-2025-12-11",
        base_url=url,
        api_key_env="CUEAUDIT_TEST_KEY",
        batch=BatchSettings(**{"enabled": True, "poll_seconds": 0.01, "max_lines": 10, **batch}),
    )
    return OpenAIBackend(settings)


def reqs(n: int = 36) -> list[Request]:
    rows = prompt_table().head(n).select("prompt_uid", "text").rows()
    return [Request(u, t, 0, cache_key=f"{u}{'0' * 44}") for u, t in rows]


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUEAUDIT_TEST_KEY", "sk-test")


def test_request_files_respect_line_and_byte_limits() -> None:
    lines = [b"x" * 10 + b"\n"] * 25
    assert [len(f) for f in split_lines(lines, 10, 10**6)] == [10, 10, 5]
    assert [len(f) for f in split_lines(lines, 100, 55)] == [5] * 5
    r = reqs(2)
    assert custom_id(r[0]) == custom_id(Request(r[0].uid, "other", 1, cache_key=r[0].cache_key))
    assert len(custom_id(r[0])) <= 64 and custom_id(r[0]) != custom_id(r[1])


def test_cost_estimate_uses_the_price_table() -> None:
    prices = Prices(input_per_million=2.0, output_per_million=10.0, batch_discount=0.5)
    estimate = estimate_cost(1_000_000, 100_000, 10, prices, batch=True)
    assert estimate.input_usd == pytest.approx(1.0)
    assert estimate.output_usd_max == pytest.approx(0.5)
    assert "$1.50" in estimate.line()


def test_dry_run_writes_files_and_submits_nothing(tmp_path: Path) -> None:
    with FakeBatchAPI() as api:
        runner = BatchRunner(backend(api.url, dry_run=True), tmp_path)
        with pytest.raises(DryRun):
            list(runner.run(reqs(), DECODING))
        assert api.calls["upload"] == api.calls["create"] == 0
    files = sorted(tmp_path.glob("round0-part*.jsonl"))
    assert len(files) == 4  # 36 requests, 10 lines a file
    line = json.loads(files[0].read_text().splitlines()[0])
    assert line["url"] == "/v1/chat/completions" and line["body"]["reasoning_effort"] == "none"
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["estimates"][0]["requests"] == 36


def test_expired_batch_resubmits_only_failed_and_missing(tmp_path: Path) -> None:
    todo = reqs()
    with FakeBatchAPI(expire_first=1, answered=4, errored=3) as api:
        runner = BatchRunner(backend(api.url), tmp_path)
        results = [pair for batch in runner.run(todo, DECODING) for pair in batch]
    assert sorted(r.uid for r, _ in results) == sorted(r.uid for r in todo)
    # Round 0: four files (10, 10, 10, 6 lines); the first expired after 4 answers with 3
    # errors and 3 requests missing: round 1 holds exactly those 6.
    assert api.lines_submitted == [10, 10, 10, 6, 6]
    assert api.calls["create"] == 5
    downloaded = sorted(p.name for p in tmp_path.glob("*.error.jsonl"))
    assert downloaded == ["round0-part0.jsonl.error.jsonl"]
    yes = [g.completion for r, g in results if "doctor" in r.text]
    assert yes and set(yes) == {"Yes"}


def test_killed_job_resumes_polling_without_resubmitting(tmp_path: Path) -> None:
    todo = reqs(20)
    with FakeBatchAPI() as api:
        first = BatchRunner(backend(api.url), tmp_path)
        stream = first.run(todo, DECODING)
        got = next(stream)  # first batch finished and collected ...
        stream.close()  # ... then the job is killed while polling the second
        assert api.calls["create"] == 2
        state = json.loads((tmp_path / "state.json").read_text())
        assert [bool(f.get("batch_id")) for f in state["files"]] == [True, True]
        # The answers of the first batch are in the cache: the rerun asks only for the rest.
        done = {r.uid for r, _ in got}
        second = BatchRunner(backend(api.url), tmp_path)
        rest = [
            pair for b in second.run([r for r in todo if r.uid not in done], DECODING) for pair in b
        ]
        assert api.calls["create"] == 2 and api.calls["upload"] == 2
        # Both batches are polled again, none recreated; the first one's answers (already
        # cached by the runner) are not yielded twice.
        assert second.stats["resumed_batches"] == 2
        assert not done & {r.uid for r, _ in rest}
    assert sorted([r.uid for r, _ in got] + [r.uid for r, _ in rest]) == sorted(r.uid for r in todo)


def test_uploaded_but_unrecorded_batch_is_adopted(tmp_path: Path) -> None:
    todo = reqs(5)
    with FakeBatchAPI() as api:
        runner = BatchRunner(backend(api.url), tmp_path)
        client = runner.backend.client(asynchronous=False)
        stream = runner.run(todo, DECODING)
        # Crash between batches.create and writing its id: simulate by creating it by hand.
        runner._write_round(0, todo, DECODING)
        entry = runner.state["files"][0]
        entry["input_file_id"] = client.files.create(
            file=("x.jsonl", (tmp_path / entry["name"]).read_bytes()), purpose="batch"
        ).id
        client.batches.create(
            input_file_id=entry["input_file_id"],
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        runner.save()
        del stream
        again = BatchRunner(backend(api.url), tmp_path)
        results = [pair for b in again.run(todo, DECODING) for pair in b]
        assert api.calls["create"] == 1
    assert len(results) == 5


def test_batch_mode_through_the_shard_runner(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.parquet"
    prompt_table().write_parquet(prompts)
    with FakeBatchAPI() as api:
        spec = {
            "backend": "openai",
            "openai": {
                "model": "gpt-5.2-2025-12-11",
                "base_url": api.url,
                "api_key_env": "CUEAUDIT_TEST_KEY",
                "batch": {"enabled": True, "poll_seconds": 0.01, "max_lines": 16},
            },
        }
        kwargs = dict(
            prompts_path=prompts,
            shard=0,
            n_shards=1,
            model_dir=tmp_path,
            model_name="gpt",
            model_spec=spec,
            task="healthcare",
            seed=0,
            decoding={"temperature": 1.0},
            max_new_tokens=4,
            out_path=tmp_path / "out.parquet",
            cache_dir=tmp_path / "cache",
        )
        out = run_shard(**kwargs, backend=OpenAIBackend.from_spec(spec))  # type: ignore[arg-type]
        assert out.height == 36 and not out["cache_hit"].any()
        assert (tmp_path / "cache" / "gpt" / "seed0" / "healthcare").is_dir()
        assert list((tmp_path / "batches" / "gpt").rglob("state.json"))
        again = run_shard(**kwargs, backend=OpenAIBackend.from_spec(spec))  # type: ignore[arg-type]
        assert again["cache_hit"].all() and api.calls["create"] == 3
