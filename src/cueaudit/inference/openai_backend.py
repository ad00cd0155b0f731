"""OpenAI-compatible chat completions (official ``openai`` client), online or through the Batch API.

Online mode sends requests with bounded concurrency and retries 429, 5xx, timeouts and
connection errors with exponential backoff and full jitter, honouring ``Retry-After``
(``retry-after-ms`` too). The API key is read from the environment variable named in the
config (``api_key_env``) and is never written to a file or a log line.

Batch mode (``batch.enabled``) hands the requests to cueaudit.inference.openai_batch.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import random
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from cueaudit.errors import InputError
from cueaudit.inference.core import Decoding, Generation, Request
from cueaudit.inference.sampling import prompt_seed

log = logging.getLogger(__name__)

AFFIRMATIVE = {"yes"}
NEGATIVE = {"no"}


@dataclass(frozen=True)
class Prices:
    """US dollars per million tokens; the Batch API bills ``batch_discount`` of that."""

    input_per_million: float = 1.75
    output_per_million: float = 14.0
    batch_discount: float = 0.5


@dataclass(frozen=True)
class BatchSettings:
    enabled: bool = False
    dry_run: bool = False
    max_lines: int = 50_000
    max_bytes: int = 200 * 1024 * 1024
    poll_seconds: float = 60.0
    max_rounds: int = 3
    completion_window: str = "24h"


@dataclass(frozen=True)
class OpenAISettings:
    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 16
    timeout_s: float = 120.0
    max_retries: int = 8
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    reasoning_effort: str | None = "none"
    max_tokens_param: str = "max_completion_tokens"
    send_seed: bool = False
    logprobs: bool = False
    top_logprobs: int = 20
    batch: BatchSettings = field(default_factory=BatchSettings)
    prices: Prices = field(default_factory=Prices)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> OpenAISettings:
        raw = dict(spec.get("openai") or {})
        batch = BatchSettings(**(raw.pop("batch", None) or {}))
        prices = Prices(**(raw.pop("prices", None) or {}))
        raw.setdefault("model", spec.get("path", ""))
        return cls(batch=batch, prices=prices, **raw)


class RetryableError(Exception):
    """A request that may succeed later; ``delay`` is the server's Retry-After if given."""

    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asks us to wait (Retry-After in seconds or as a date, or -ms)."""
    if not headers:
        return None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2**attempt)]."""
    return rng.uniform(0, min(cap, base * 2**attempt))


def api_key(env: str) -> str:
    key = os.environ.get(env)
    if not key:
        raise InputError(
            "environment", f"set the API key in the environment variable {env}", "api_key_env"
        )
    return key


def answer_probabilities(choice: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """P(Yes), P(No) at the first generated token from top logprobs (None if absent)."""
    content = ((choice.get("logprobs") or {}).get("content")) or []
    if not content:
        return None, None
    top = content[0].get("top_logprobs") or []
    p_yes = sum(math.exp(t["logprob"]) for t in top if t["token"].strip().lower() in AFFIRMATIVE)
    p_no = sum(math.exp(t["logprob"]) for t in top if t["token"].strip().lower() in NEGATIVE)
    return p_yes, p_no


def generation_from_body(body: Mapping[str, Any], seconds: float = 0.0) -> Generation:
    """A Generation from a chat-completion response body (online or Batch API)."""
    choice = body["choices"][0]
    usage = body.get("usage") or {}
    p_yes, p_no = answer_probabilities(choice)
    return Generation(
        completion=(choice.get("message") or {}).get("content") or "",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        finish_reason=str(choice.get("finish_reason") or ""),
        p_yes=p_yes,
        p_no=p_no,
        seconds=seconds,
    )


class OpenAIBackend:
    """Chat completions against the OpenAI API or any compatible server."""

    name = "openai"
    flush_every_batch = True

    def __init__(self, settings: OpenAISettings, model_id: str | None = None) -> None:
        self.settings = settings
        self.model_id = model_id or f"openai:{settings.model}@{settings.base_url}"
        self.state_dir: Path | None = None  # set by the runner for the Batch API state
        self.stats: dict[str, int] = {"requests": 0, "retries": 0, "succeeded": 0}
        self._rng = random.Random()

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], model_id: str | None = None) -> OpenAIBackend:
        return cls(OpenAISettings.from_spec(spec), model_id)

    def identity(self) -> dict[str, Any]:
        s = self.settings
        return {
            "backend": self.name,
            "model": self.model_id,
            "reasoning_effort": s.reasoning_effort,
            "logprobs": s.logprobs,
            "send_seed": s.send_seed,
        }

    def messages(self, text: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": text}]

    def render(self, text: str) -> str:
        return json.dumps(self.messages(text), ensure_ascii=False)

    def body(self, request: Request, decoding: Decoding) -> dict[str, Any]:
        """The request body of one prompt (identical online and in Batch API files)."""
        s = self.settings
        body: dict[str, Any] = {
            "model": s.model,
            "messages": self.messages(request.text),
            "temperature": decoding.temperature,
            s.max_tokens_param: decoding.max_new_tokens,
        }
        if decoding.top_p != 1.0:
            body["top_p"] = decoding.top_p
        if s.reasoning_effort is not None:
            body["reasoning_effort"] = s.reasoning_effort
        if s.send_seed:
            body["seed"] = prompt_seed(request.seed, request.uid) % (2**31 - 1)
        if s.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = s.top_logprobs
        return body

    def client(self, asynchronous: bool) -> Any:
        import openai

        cls = openai.AsyncOpenAI if asynchronous else openai.OpenAI
        return cls(
            api_key=api_key(self.settings.api_key_env),
            base_url=self.settings.base_url,
            max_retries=0,  # retries are ours: backoff with jitter, Retry-After, counted
            timeout=self.settings.timeout_s,
        )

    def generate(
        self, requests: Iterable[Request], decoding: Decoding
    ) -> Iterator[list[tuple[Request, Generation]]]:
        todo = list(requests)
        if self.settings.batch.enabled:
            from cueaudit.inference.openai_batch import BatchRunner

            state_dir = self.state_dir or Path("results/cache/batches/unnamed")
            runner = BatchRunner(self, state_dir)
            yield from runner.run(todo, decoding)
            return
        chunk = max(1, self.settings.concurrency * 4)
        for first in range(0, len(todo), chunk):
            yield asyncio.run(self._run_chunk(todo[first : first + chunk], decoding))

    async def _run_chunk(
        self, requests: list[Request], decoding: Decoding
    ) -> list[tuple[Request, Generation]]:
        client = self.client(asynchronous=True)
        limit = asyncio.Semaphore(self.settings.concurrency)
        try:

            async def one(request: Request) -> tuple[Request, Generation]:
                async with limit:
                    return request, await self._complete(client, request, decoding)

            return list(await asyncio.gather(*(one(r) for r in requests)))
        finally:
            await client.close()

    async def _complete(self, client: Any, request: Request, decoding: Decoding) -> Generation:
        import openai

        s = self.settings
        body = self.body(request, decoding)
        model = body.pop("model")
        messages = body.pop("messages")
        for attempt in range(s.max_retries + 1):
            self.stats["requests"] += 1
            tick = time.perf_counter()
            try:
                response = await client.chat.completions.create(
                    model=model, messages=messages, extra_body=body
                )
            except openai.APIStatusError as error:
                if error.status_code != 429 and error.status_code < 500:
                    raise
                delay = retry_after(error.response.headers)
                reason = f"HTTP {error.status_code}"
            except (openai.APITimeoutError, openai.APIConnectionError) as error:
                delay, reason = None, type(error).__name__
            else:
                self.stats["succeeded"] += 1
                return generation_from_body(response.model_dump(), time.perf_counter() - tick)
            if attempt == s.max_retries:
                raise RetryableError(f"{request.uid}: gave up after {attempt + 1} tries ({reason})")
            wait = delay if delay is not None else 0.0
            wait = max(wait, backoff_delay(attempt, s.backoff_base_s, s.backoff_max_s, self._rng))
            self.stats["retries"] += 1
            log.info("retry %d of %s in %.2f s (%s)", attempt + 1, request.uid, wait, reason)
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")
