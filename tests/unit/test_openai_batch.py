"""Batch API flow against a local stand-in of /v1/files and /v1/batches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cueaudit.inference.core import AnswerSpec, Decoding, Request, Tool, canonical_json
from cueaudit.inference.openai_backend import OpenAIBackend
from cueaudit.inference.openai_batch import (
    BatchRunner,
    DryRun,
    custom_id,
    estimate_cost,
    split_lines,
)
from cueaudit.inference.openai_protocol import BatchSettings, OpenAISettings, Prices
from cueaudit.inference.runner import run_shard
from tests.helpers.fake_batch_api import FakeBatchAPI
from tests.helpers.inference import prompt_table

DECODING = Decoding(max_new_tokens=4)
DECISION = Tool.of(
    "submit_decision",
    "Submit the decision.",
    {
        "type": "object",
        "properties": {"decision": {"type": "string", "enum": ["yes", "no"]}},
        "required": ["decision"],
        "additionalProperties": False,
    },
)


def backend(url: str, **batch: Any) -> OpenAIBackend:
    settings = OpenAISettings(
        model="gpt-5.2-2025-12-11",
        base_url=url,
        api_key_env="CUEAUDIT_TEST_KEY",
        batch=BatchSettings(**{"enabled": True, "poll_seconds": 0.01, "max_lines": 10, **batch}),
    )
    return OpenAIBackend(settings)


def runner(url: str, state_dir: Path, **batch: Any) -> BatchRunner:
    endpoint = backend(url, **batch)
    return BatchRunner(endpoint, state_dir, endpoint.settings.batch, endpoint.settings.prices)


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
        dry = runner(api.url, tmp_path, dry_run=True)
        with pytest.raises(DryRun):
            list(dry.run(reqs(), DECODING))
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
        results = [
            pair for batch in runner(api.url, tmp_path).run(todo, DECODING) for pair in batch
        ]
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
        first = runner(api.url, tmp_path)
        stream = first.run(todo, DECODING)
        got = next(stream)  # first batch finished and collected ...
        stream.close()  # ... then the job is killed while polling the second
        assert api.calls["create"] == 2
        state = json.loads((tmp_path / "state.json").read_text())
        assert [bool(f.get("batch_id")) for f in state["files"]] == [True, True]
        # The answers of the first batch are in the cache: the rerun asks only for the rest.
        done = {r.uid for r, _ in got}
        second = runner(api.url, tmp_path)
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
        crashed = runner(api.url, tmp_path)
        client = crashed.endpoint.client(asynchronous=False)
        stream = crashed.run(todo, DECODING)
        # Crash between batches.create and writing its id: simulate by creating it by hand.
        crashed._write_round(0, todo, DECODING)
        entry = crashed.state["files"][0]
        entry["input_file_id"] = client.files.create(
            file=("x.jsonl", (tmp_path / entry["name"]).read_bytes()), purpose="batch"
        ).id
        client.batches.create(
            input_file_id=entry["input_file_id"],
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        crashed.save()
        del stream
        again = runner(api.url, tmp_path)
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
        manifest = {"model_id": "openai:gpt-5.2-2025-12-11@fake"}
        state_dir = tmp_path / "batches" / "gpt" / "seed0" / "healthcare" / "0of1"
        out = run_shard(**kwargs, backend=OpenAIBackend.from_spec(manifest, spec, state_dir))  # type: ignore[arg-type]
        assert out.height == 36 and not out["cache_hit"].any()
        assert (tmp_path / "cache" / "gpt" / "seed0" / "healthcare").is_dir()
        assert (state_dir / "state.json").is_file()
        again = run_shard(**kwargs, backend=OpenAIBackend.from_spec(manifest, spec, state_dir))  # type: ignore[arg-type]
        assert again["cache_hit"].all() and api.calls["create"] == 3


def test_lines_carry_the_online_bodies_and_tool_calls_come_back(tmp_path: Path) -> None:
    ranking = {"type": "object", "properties": {"ranks": {"type": "array"}}}
    answer = AnswerSpec(
        json_schema=canonical_json(ranking), tools=(DECISION,), tool_choice=DECISION.name
    )
    todo = [Request(r.uid, r.text, 0, r.cache_key, answer=answer) for r in reqs(4)]
    with FakeBatchAPI() as api:
        batches = runner(api.url, tmp_path)
        results = [pair for batch in batches.run(todo, DECODING) for pair in batch]
    lines = [json.loads(x) for x in (tmp_path / "round0-part0.jsonl").read_text().splitlines()]
    online = backend("http://unused")
    assert [line["body"] for line in lines] == [online.body(r, DECODING) for r in todo]
    assert lines[0]["body"]["tool_choice"] == {
        "type": "function",
        "function": {"name": "submit_decision"},
    }
    assert lines[0]["body"]["response_format"]["json_schema"]["schema"] == ranking
    # A forced call comes back with finish reason "stop" (as OpenAI says): read by presence.
    decisions = {r.uid: (g.tool_calls, g.constrained, g.finish_reason) for r, g in results}
    for request in todo:
        (call,), constrained, finish = decisions[request.uid]
        expected = "yes" if "doctor" in request.text else "no"
        assert call.name == "submit_decision" and call.arguments == {"decision": expected}
        assert constrained and finish == "stop"


def test_batch_runner_imports_no_backend() -> None:
    code = (
        "import sys, cueaudit.inference.openai_batch; "
        "assert 'cueaudit.inference.openai_backend' not in sys.modules; "
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
