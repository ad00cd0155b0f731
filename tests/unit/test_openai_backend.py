"""OpenAI backend against a real OpenAI-compatible server (llama-cpp-python + SmolLM2 GGUF)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from cueaudit.errors import InputError
from cueaudit.inference.core import Decoding, Request
from cueaudit.inference.openai_backend import (
    OpenAIBackend,
    OpenAISettings,
    answer_probabilities,
    backoff_delay,
    retry_after,
)
from cueaudit.inference.runner import run_shard
from cueaudit.io import setup_logging
from tests.helpers.fault_proxy import FaultProxy
from tests.helpers.inference import llama_server_available, prompt_table, start_llama_server

SECRET = "sk-cueaudit-test-DO-NOT-LEAK-8f3a9c"
needs_server = pytest.mark.skipif(
    not llama_server_available(), reason="llama-cpp-python[server] not installed"
)


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not llama_server_available():
        pytest.skip("llama-cpp-python[server] not installed (bash scripts/install.sh --test)")
    log = tmp_path_factory.mktemp("llama") / "server.log"
    process, url = start_llama_server(log)
    yield url
    process.terminate()
    process.wait(timeout=30)


def settings(url: str, **kw: object) -> OpenAISettings:
    base = {
        "model": "smollm2",
        "base_url": url,
        "api_key_env": "CUEAUDIT_TEST_KEY",
        "max_tokens_param": "max_tokens",
        "reasoning_effort": None,
        "send_seed": True,
        "timeout_s": 1.0,
        "backoff_base_s": 0.02,
        "backoff_max_s": 0.2,
        "concurrency": 4,
    }
    return OpenAISettings(**{**base, **kw})  # type: ignore[arg-type]


def reqs(n: int) -> list[Request]:
    table = prompt_table().head(n)
    return [Request(u, t, 0, cache_key=u) for u, t in table.select("prompt_uid", "text").rows()]


def test_retry_after_and_backoff() -> None:
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after-ms": "250"}) == 0.25
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after({}) is None
    rng = random.Random(0)
    delays = [backoff_delay(a, 1.0, 8.0, rng) for a in range(8) for _ in range(50)]
    assert max(delays) <= 8.0 and min(delays) >= 0.0
    assert max(backoff_delay(0, 1.0, 8.0, rng) for _ in range(50)) <= 1.0


def test_request_body_follows_the_paper_and_the_config() -> None:
    backend = OpenAIBackend(OpenAISettings(model="gpt-5.2-2025-12-11"))
    body = backend.body(Request("u1", "Hi?", 0), Decoding(max_new_tokens=16))
    assert body == {
        "model": "gpt-5.2-2025-12-11",
        "messages": [{"role": "user", "content": "Hi?"}],
        "temperature": 1.0,
        "max_completion_tokens": 16,
        "reasoning_effort": "none",
    }
    choice = {
        "logprobs": {
            "content": [
                {
                    "top_logprobs": [
                        {"token": "Yes", "logprob": -0.5},
                        {"token": " no", "logprob": -2.0},
                        {"token": "Maybe", "logprob": -3.0},
                    ]
                }
            ]
        }
    }
    p_yes, p_no = answer_probabilities(choice)
    assert p_yes == pytest.approx(0.6065, abs=1e-4) and p_no == pytest.approx(0.1353, abs=1e-4)


def test_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUEAUDIT_TEST_KEY", raising=False)
    backend = OpenAIBackend(settings("http://127.0.0.1:9/v1"))
    with pytest.raises(InputError, match="CUEAUDIT_TEST_KEY"):
        list(backend.generate(reqs(1), Decoding(max_new_tokens=2)))


@needs_server
def test_every_request_completes_once_under_injected_faults(
    llama_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUEAUDIT_TEST_KEY", SECRET)
    todo = reqs(16)
    with FaultProxy(llama_url, p429=0.2, p500=0.15, pstall=0.1, stall_s=2.0, seed=3) as proxy:
        backend = OpenAIBackend(settings(proxy.url, max_retries=30))
        results = [
            pair for batch in backend.generate(todo, Decoding(max_new_tokens=4)) for pair in batch
        ]
    assert sorted(r.uid for r, _ in results) == sorted(r.uid for r in todo)
    assert all(g.completion_tokens >= 1 and g.finish_reason for _, g in results)
    assert proxy.faults["429"] > 0 and proxy.faults["500"] > 0 and proxy.faults["stall"] > 0
    assert backend.stats["retries"] >= sum(proxy.faults.values())
    # The server answered each prompt exactly once: no request was completed twice.
    assert len(proxy.completed) == 16 and set(proxy.completed.values()) == {1}
    # The key only travels in the Authorization header.
    assert all(h["authorization"] == f"Bearer {SECRET}" for h in proxy.headers_seen)


@needs_server
def test_logprobs_give_answer_probabilities(
    llama_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUEAUDIT_TEST_KEY", SECRET)
    backend = OpenAIBackend(settings(llama_url, logprobs=True, top_logprobs=10))
    results = [g for b in backend.generate(reqs(3), Decoding(max_new_tokens=1)) for _, g in b]
    assert all(g.p_yes is not None and g.p_no is not None for g in results)
    assert all(0 <= g.p_yes + g.p_no <= 1 for g in results)
    assert all(g.completion_tokens == 1 and g.finish_reason == "length" for g in results)


@needs_server
def test_api_key_never_reaches_results_or_logs(
    llama_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUEAUDIT_TEST_KEY", SECRET)
    prompts = tmp_path / "results" / "prompts" / "healthcare.parquet"
    prompts.parent.mkdir(parents=True)
    prompt_table().head(6).write_parquet(prompts)
    spec = {
        "backend": "openai",
        "openai": {
            k: v for k, v in vars(settings(llama_url)).items() if k not in ("batch", "prices")
        },
    }
    log_path = tmp_path / "logs" / "inference.log"
    setup_logging(log_path)
    try:
        out = run_shard(
            prompts_path=prompts,
            shard=0,
            n_shards=1,
            model_dir=tmp_path,
            model_name="api",
            model_spec=spec,
            task="healthcare",
            seed=0,
            decoding={"temperature": 1.0},
            max_new_tokens=4,
            out_path=tmp_path / "results" / "responses" / "0.parquet",
            cache_dir=tmp_path / "results" / "cache" / "responses",
            backend=OpenAIBackend.from_spec(spec),
        )
    finally:
        setup_logging(None)
    assert out.height == 6
    assert "model calls: 6" in log_path.read_text()
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []
