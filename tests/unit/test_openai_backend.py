"""OpenAI backend: the wire format, retries, and a real OpenAI-compatible server.

The server is llama-cpp-python's on the packaged SmolLM2 GGUF.
"""

from __future__ import annotations

import math
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from cueaudit.errors import InputError
from cueaudit.inference.core import AnswerSpec, Decoding, Option, Request, Tool, canonical_json
from cueaudit.inference.openai_backend import (
    OpenAIBackend,
    OpenAISettings,
    RetryableError,
    backoff_delay,
    retry_after,
)
from cueaudit.inference.openai_protocol import (
    generation_from_body,
    grammar_schema,
    response_format,
)
from cueaudit.inference.runner import run_shard
from cueaudit.io import setup_logging
from tests.helpers.fault_proxy import CannedServer, FaultProxy
from tests.helpers.inference import (
    BASES,
    llama_server,
    llama_server_available,
    llama_settings,
    prompt_table,
    start_llama_server,
)

SECRET = "sk-cueaudit-test-DO-NOT-LEAK-8f3a9c"
DECODING = Decoding(max_new_tokens=4)
YES = Option("Yes", ("Yes", "yes", "YES"))
NO = Option("No", ("No", "no", "NO"))
DECISION = {
    "type": "object",
    "properties": {"decision": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["decision"],
    "additionalProperties": False,
}
needs_server = pytest.mark.skipif(
    not llama_server_available(), reason="llama-cpp-python[server] not installed"
)


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not llama_server_available():
        pytest.skip("llama-cpp-python[server] not installed (bash scripts/install.sh --test)")
    with llama_server(tmp_path_factory.mktemp("llama") / "server.log") as url:
        yield url


@pytest.fixture
def busy_cpu() -> Iterator[None]:
    """A CPU-bound process on every core beside the test: a fully loaded machine."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 1)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def settings(url: str, **kw: Any) -> OpenAISettings:
    return llama_settings(url, **{"concurrency": 4, **kw})


def reqs(n: int, skip: int = 0, answer: AnswerSpec | None = None) -> list[Request]:
    rows = prompt_table().slice(skip, n).select("prompt_uid", "text").rows()
    return [Request(u, t, 0, cache_key=u, answer=answer or AnswerSpec()) for u, t in rows]


def old_answer_probabilities(choice: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """The p_yes/p_no the backend returned before option scores (the reference)."""
    content = ((choice.get("logprobs") or {}).get("content")) or []
    if not content:
        return None, None
    top = content[0].get("top_logprobs") or []
    p_yes = sum(math.exp(t["logprob"]) for t in top if t["token"].strip().lower() == "yes")
    p_no = sum(math.exp(t["logprob"]) for t in top if t["token"].strip().lower() == "no")
    return p_yes, p_no


def test_retry_after_and_backoff() -> None:
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after-ms": "250"}) == 0.25
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after({}) is None
    rng = random.Random(0)
    delays = [backoff_delay(a, 1.0, 8.0, rng) for a in range(8) for _ in range(50)]
    assert max(delays) <= 8.0 and min(delays) >= 0.0
    assert max(backoff_delay(0, 1.0, 8.0, rng) for _ in range(50)) <= 1.0


def test_plain_request_body_and_rendering_are_unchanged() -> None:
    backend = OpenAIBackend(OpenAISettings(model="gpt-5.2-2025-12-11"))
    body = backend.body(Request("u1", "Hi?", 0), Decoding(max_new_tokens=16))
    assert body == {
        "model": "gpt-5.2-2025-12-11",
        "messages": [{"role": "user", "content": "Hi?"}],
        "temperature": 1.0,
        "max_completion_tokens": 16,
        "reasoning_effort": "none",
    }
    # The rendering every cached answer was keyed on, byte for byte.
    assert backend.render('Héllo "you"?') == '[{"role": "user", "content": "Héllo \\"you\\"?"}]'
    assert backend.render("Hi?", AnswerSpec(options=(YES, NO))) == backend.render("Hi?")


def test_schema_and_tools_go_on_the_wire_in_either_dialect() -> None:
    ranks = {"type": "integer", "minimum": 1, "maximum": 4}
    schema = {"type": "object", "properties": {"ranks": {"type": "array", "items": ranks}}}
    tool = Tool.of("submit_decision", "Submit the decision.", DECISION)
    answer = AnswerSpec(json_schema=canonical_json(schema), tools=(tool,), tool_choice=tool.name)
    request = Request("u1", "Hi?", 0, answer=answer)
    body = OpenAIBackend(OpenAISettings(model="m")).body(request, Decoding())
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": True},
    }
    titled = response_format({"title": "ranking", **schema}, "openai")
    assert titled["json_schema"]["name"] == "ranking"
    assert body["tools"] == [tool.openai()]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "submit_decision"}}
    llama = OpenAIBackend(OpenAISettings(model="m", schema_dialect="llama_cpp"))
    enum_items = {"type": "integer", "enum": [1, 2, 3, 4]}
    assert llama.body(request, Decoding())["response_format"] == {
        "type": "json_object",
        "schema": {
            "type": "object",
            "properties": {"ranks": {"type": "array", "items": enum_items}},
        },
    }
    auto = AnswerSpec(tools=(tool,), tool_choice="auto")
    assert llama.body(Request("u1", "Hi?", 0, answer=auto), Decoding())["tool_choice"] == "auto"
    # Only a schema or tools change the rendering; the dialect does not.
    rendered = llama.render("Hi?", answer)
    assert rendered == OpenAIBackend(OpenAISettings(model="m")).render("Hi?", answer)
    assert rendered.startswith('{"messages":[{"content":"Hi?","role":"user"}],"response_format"')
    assert '"tool_choice":{"function":{"name":"submit_decision"}' in rendered


def test_grammar_schema_enumerates_bounded_integers_only() -> None:
    assert grammar_schema({"type": "integer", "exclusiveMinimum": 0, "maximum": 3.5}) == {
        "type": "integer",
        "enum": [1, 2, 3],
    }
    unbounded = {"type": "integer", "minimum": 1}
    huge = {"type": "integer", "minimum": 0, "maximum": 10_000}
    stepped = {"type": "integer", "minimum": 0, "maximum": 10, "multipleOf": 2}
    assert [grammar_schema(s) for s in (unbounded, huge, stepped)] == [unbounded, huge, stepped]
    assert grammar_schema({"enum": [{"type": "integer", "minimum": 1, "maximum": 2}]}) == {
        "enum": [{"type": "integer", "minimum": 1, "maximum": 2}]
    }
    with pytest.raises(InputError, match="schema_dialect"):
        OpenAISettings(model="m", schema_dialect="vllm")  # type: ignore[arg-type]


def test_option_scores_and_tool_calls_are_read_from_the_body() -> None:
    top = [
        {"token": "Yes", "logprob": -0.5},
        {"token": " no", "logprob": -2.0},
        {"token": " yes", "logprob": -1.5},
        {"token": "Maybe", "logprob": -3.0},
    ]
    body: dict[str, Any] = {
        "choices": [
            {
                "message": {"content": "Yes"},
                "finish_reason": "length",
                "logprobs": {"content": [{"token": "Yes", "top_logprobs": top}]},
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 1},
    }
    absent = Option("Absent", ("Never",))
    g = generation_from_body(body, AnswerSpec(options=(YES, NO, absent)), seconds=0.25)
    assert g.option_logprobs is not None and set(g.option_logprobs) == {YES.key(), NO.key()}
    assert g.option_logprobs[YES.key()] == pytest.approx(math.log(math.exp(-0.5) + math.exp(-1.5)))
    assert g.option_logprobs[NO.key()] == pytest.approx(-2.0)
    p_yes, p_no = old_answer_probabilities(body["choices"][0])
    assert math.exp(g.option_logprobs[YES.key()]) == pytest.approx(p_yes)
    assert math.exp(g.option_logprobs[NO.key()]) == pytest.approx(p_no)
    assert (g.completion, g.prompt_tokens, g.finish_reason, g.seconds) == (
        "Yes",
        12,
        "length",
        0.25,
    )
    assert generation_from_body(body).option_logprobs is None  # no options asked
    calls = [
        {"function": {"name": "submit_decision", "arguments": '{"decision": "no"}'}},
        {"function": {"name": "submit_decision", "arguments": "{not json"}},
    ]
    called = {"choices": [{"message": {"content": None, "tool_calls": calls}}]}
    forced = AnswerSpec(
        tools=(Tool.of("submit_decision", "", DECISION),), tool_choice="submit_decision"
    )
    g = generation_from_body(called, forced)
    assert [(c.name, c.arguments) for c in g.tool_calls] == [
        ("submit_decision", {"decision": "no"}),
        ("submit_decision", "{not json"),
    ]
    assert g.completion == "" and g.constrained and g.finish_reason == ""


def test_construction_from_the_manifest(tmp_path: Path) -> None:
    spec = {"backend": "openai", "openai": {"model": "gpt-x", "give_up_after_s": 30}}
    backend = OpenAIBackend.from_spec({"model_id": "openai:gpt-x@api"}, spec, tmp_path)
    assert (backend.model_id, backend.state_dir) == ("openai:gpt-x@api", tmp_path)
    assert backend.settings.give_up_after_s == 30 and backend.settings.schema_dialect == "openai"
    assert backend.scores_options is False and backend.flush_every_batch is True
    with pytest.raises(NotImplementedError, match="openai backend"):
        backend.score(reqs(1))


def test_importing_the_backend_imports_no_torch() -> None:
    code = "import cueaudit.inference.openai_backend, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUEAUDIT_TEST_KEY", raising=False)
    backend = OpenAIBackend(settings("http://127.0.0.1:9/v1"))
    with pytest.raises(InputError, match="CUEAUDIT_TEST_KEY"):
        list(backend.generate(reqs(1), Decoding(max_new_tokens=2)))


def test_retries_stop_at_the_time_budget_or_the_try_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUEAUDIT_TEST_KEY", SECRET)
    request = reqs(1)
    # Every request gets HTTP 500 from the proxy, which never reaches its (absent) upstream.
    with FaultProxy("http://127.0.0.1:9/v1", p500=1.0) as proxy:
        # No max_retries (the default): only the time budget stops the retries.
        budget = OpenAIBackend(settings(proxy.url, give_up_after_s=0.5))
        with pytest.raises(RetryableError) as error:
            list(budget.generate(request, Decoding(max_new_tokens=2)))
        assert proxy.url in str(error.value) and request[0].uid in str(error.value)
        assert "HTTP 500" in str(error.value)
        assert 1 < budget.stats["requests"] == proxy.faults["500"] < 10**6
        counted = OpenAIBackend(settings(proxy.url, max_retries=2, give_up_after_s=600))
        with pytest.raises(RetryableError, match="gave up after 3 tries"):
            list(counted.generate(request, Decoding(max_new_tokens=2)))
        assert counted.stats == {"requests": 3, "retries": 2, "succeeded": 0}


def healthy_timeout(
    url: str, concurrency: int, warm_up: list[Request] | None = None, decoding: Decoding = DECODING
) -> tuple[float, float]:
    """A client timeout no healthy request comes near, and the median latency it came from.

    Measured here (under the test's load, on requests like the test's), not assumed: 10x the
    median latency of warm-up requests, times the requests that can queue at the server (it
    answers one at a time), and at least 5 s.
    """
    warm = OpenAIBackend(settings(url, concurrency=1))
    todo = warm_up or reqs(5, skip=20)
    seconds = [g.seconds for b in warm.generate(todo, decoding) for _, g in b]
    median = statistics.median(seconds)
    return max(5.0, 10 * median * concurrency), median


#: Requests of the fault-injection run. Each stall holds only its own slot until the client
#: timeout, so the run takes about the server's time plus (stalls x timeout) / concurrency:
#: 200 (CI: every fault kind 16-29 times, the restart halfway) took 171 s on this project's
#: 2-core machine at load 4; the 1,000-request run of the OpenAI backend's acceptance (8 minutes)
#: is ``CUEAUDIT_FAULT_REQUESTS=1000 pytest --group=under_load``.
FAULT_REQUESTS = int(os.environ.get("CUEAUDIT_FAULT_REQUESTS", "200"))
#: Two tokens: an answer is generated, and the run measures the faults, not decoding.
LOAD_DECODING = Decoding(max_new_tokens=2)


def load_requests(n: int, first: int = 0) -> list[Request]:
    """``n`` distinct short prompts (the proxy tells requests apart by their bodies).

    Consecutive prompts share a base prompt and differ at the end only, so that llama.cpp
    reuses the cached prefix (a third of the time per request on this machine).
    """
    return [
        Request(
            f"load-{i:04d}",
            f"{BASES[(i - first) * len(BASES) // n]} (Case {i}.)",
            0,
            cache_key=str(i),
        )
        for i in range(first, first + n)
    ]


class Restarter:
    """Kills the llama server once half the requests are answered and starts a new one."""

    def __init__(self, proxy: FaultProxy, process: subprocess.Popen[bytes], log_dir: Path, at: int):
        self.proxy, self.process, self.log_dir, self.at = proxy, process, log_dir, at
        self.seconds: float | None = None
        self.answered_at_kill = 0
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def answered(self) -> int:
        with self.proxy.lock:
            return sum(self.proxy.completed.values())

    def _run(self) -> None:
        try:
            while self.answered() < self.at:
                if self.stop.wait(0.05):
                    return
            tick = time.monotonic()
            self.answered_at_kill = self.answered()
            self.process.kill()
            self.process.wait()
            self.process, url = start_llama_server(self.log_dir / "restarted.log")
            self.proxy.redirect(url)
            self.seconds = time.monotonic() - tick
        except BaseException as error:  # reported by the test, not lost in the thread
            self.error = error


ANSWER = (
    b'{"id": "c1", "object": "chat.completion", "model": "m", "usage": '
    b'{"prompt_tokens": 3, "completion_tokens": 1}, "choices": [{"index": 0, '
    b'"finish_reason": "stop", "message": {"role": "assistant", "content": "Yes"}}]}'
)


def test_a_stalled_request_holds_only_its_own_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUEAUDIT_TEST_KEY", SECRET)
    todo = [Request(f"p{i:02d}", f"Prompt {i:02d}.", 0, cache_key=str(i)) for i in range(40)]
    with (
        CannedServer(200, ANSWER) as server,
        FaultProxy(server.url, stall_matching=b"Prompt 00.", stall_s=120) as proxy,
    ):
        backend = OpenAIBackend(settings(proxy.url, concurrency=2, timeout_s=5))
        backend.batch_seconds = 0.2
        batches = [[r.uid for r, _ in b] for b in backend.generate(todo, DECODING)]
    # The other 39 went through the second slot while the first waited for its timeout, and
    # were handed back in batches of at most 4 per slot before it was retried and answered.
    assert batches[-1] == ["p00"] and max(len(b) for b in batches) <= 8
    assert sorted(u for b in batches for u in b) == [r.uid for r in todo]
    assert proxy.faults == {"stall": 1} and server.hits == 40
    assert backend.stats == {"requests": 41, "retries": 1, "succeeded": 40}


def test_stopping_early_stops_sending(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUEAUDIT_TEST_KEY", SECRET)
    todo = [Request(f"p{i:03d}", f"Prompt {i}.", 0, cache_key=str(i)) for i in range(500)]
    with CannedServer(200, ANSWER) as server:
        backend = OpenAIBackend(settings(server.url, concurrency=2))
        answers = backend.generate(todo, DECODING)
        first = next(answers)
        answers.close()  # joins the sender: nothing is sent after this
        sent = server.hits
        # Only the requests already on the wire (at most one per slot) can still arrive; a
        # sender that went on would send hundreds in this second.
        time.sleep(1.0)
        assert server.hits <= sent + 2 < len(todo)
    assert 0 < len({r.uid for r, _ in first}) == len(first) <= 8
    assert not any(t.name == "openai-sender" for t in threading.enumerate())


@needs_server
@pytest.mark.slow
@pytest.mark.usefixtures("busy_cpu")
def test_every_request_completes_once_under_faults_and_a_restart(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    record_testsuite_property: Any,
) -> None:
    monkeypatch.setenv("CUEAUDIT_TEST_KEY", SECRET)
    started = time.monotonic()
    todo = load_requests(FAULT_REQUESTS)
    # The server answers one request at a time: four slots keep it busy while some stall.
    concurrency = 4
    process, url = start_llama_server(tmp_path / "server.log")
    # 20% 429 or 500, 5% stalls; the server is killed and started again halfway.
    proxy = FaultProxy(url, p429=0.1, p500=0.1, pstall=0.05, seed=14)
    restarter = Restarter(proxy, process, tmp_path, at=FAULT_REQUESTS // 2)
    try:
        warm_up = load_requests(8, first=FAULT_REQUESTS)
        timeout, median = healthy_timeout(url, concurrency, warm_up, LOAD_DECODING)
        # A stalled request is held far beyond the timeout: it can only end as a timeout.
        proxy.stall_s = 3 * timeout + 30
        with proxy:
            restarter.thread.start()
            # A time budget, not a try count: it must only outlast the restart.
            backend = OpenAIBackend(
                settings(proxy.url, concurrency=concurrency, timeout_s=timeout, give_up_after_s=300)
            )
            tick = time.monotonic()
            results = [pair for b in backend.generate(todo, LOAD_DECODING) for pair in b]
            run_s = time.monotonic() - tick
    finally:
        restarter.stop.set()
        restarter.thread.join(timeout=180)
        restarter.process.kill()
        restarter.process.wait()
    load = os.getloadavg()
    numbers = {
        "requests": len(todo),
        "seconds": round(run_s, 1),
        "median_latency_s": round(median, 3),
        "timeout_s": round(timeout, 1),
        "faults": dict(proxy.faults),
        **backend.stats,
        "restart_s": round(restarter.seconds or 0, 1),
        "load_average": [round(x, 2) for x in load],
    }
    for key, value in numbers.items():
        record_testsuite_property(f"fault_injection_{key}", value)
    with capsys.disabled():
        print(
            f"\nfault injection: {len(todo)} requests in {run_s:.0f} s "
            f"({time.monotonic() - started:.0f} s with the servers), median latency "
            f"{median * 1000:.0f} ms, timeout {timeout:.1f} s, faults {dict(proxy.faults)}, "
            f"retries {backend.stats['retries']}, restart {restarter.seconds or 0:.1f} s "
            f"after {restarter.answered_at_kill} answers, "
            f"load average {load[0]:.2f} {load[1]:.2f}"
        )
    assert restarter.error is None and restarter.seconds is not None
    assert sorted(r.uid for r, _ in results) == [r.uid for r in todo]  # each once, none lost
    assert all(g.completion_tokens >= 1 and g.finish_reason for _, g in results)
    assert min(proxy.faults[k] for k in ("429", "500", "stall")) > 0
    # The server was restarted mid-run; requests that reached it while it was down (if any)
    # were answered 502 and retried.
    assert 0 < restarter.answered_at_kill < len(todo)
    # One retry per injected fault and none else: no healthy request timed out.
    assert backend.stats["retries"] == sum(proxy.faults.values())
    assert backend.stats["succeeded"] == len(todo)
    # The server answered each prompt exactly once: no request was completed twice.
    assert len(proxy.completed) == len(todo) and set(proxy.completed.values()) == {1}
    # The key only travels in the Authorization header.
    assert all(h["authorization"] == f"Bearer {SECRET}" for h in proxy.headers_seen)


@needs_server
def test_option_scores_match_the_old_yes_no_probabilities(
    llama_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUEAUDIT_TEST_KEY", SECRET)
    backend = OpenAIBackend(settings(llama_url, logprobs=True, top_logprobs=10))
    todo = reqs(4, answer=AnswerSpec(options=(YES, NO)))
    client = backend.client(asynchronous=False)
    seen = set()
    for request in todo:
        body = backend.body(request, Decoding(max_new_tokens=1))
        raw = client.chat.completions.create(
            model=body.pop("model"), messages=body.pop("messages"), extra_body=body
        ).model_dump()
        scores = generation_from_body(raw, request.answer).option_logprobs
        assert scores is not None
        seen |= set(scores)
        p_yes, p_no = old_answer_probabilities(raw["choices"][0])
        assert math.exp(scores.get(YES.key(), -math.inf)) == pytest.approx(p_yes, abs=1e-12)
        assert math.exp(scores.get(NO.key(), -math.inf)) == pytest.approx(p_no, abs=1e-12)
    assert seen  # some prompt put Yes or No in its top ten
    results = [g for b in backend.generate(todo, Decoding(max_new_tokens=1)) for _, g in b]
    assert all(g.option_logprobs is not None for g in results)
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
            backend=OpenAIBackend.from_spec({"model_id": f"openai:smollm2@{llama_url}"}, spec),
        )
    finally:
        setup_logging(None)
    assert out.height == 6
    assert "model calls: 6" in log_path.read_text()
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []
