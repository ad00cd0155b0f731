"""OpenAI-compatible chat completions (official ``openai`` client), online or through the Batch API.

Online mode keeps ``concurrency`` requests in flight (a new one starts as soon as one finishes,
so a stalled request holds only its own slot), hands the answers back in batches as they
finish, and retries 429, 5xx, timeouts and connection errors with exponential backoff and full
jitter, honouring ``Retry-After`` (``retry-after-ms`` too), until ``give_up_after_s`` seconds
since the request's first try (and, only if set, ``max_retries`` retries): a time budget,
because a try count turns a slow but healthy endpoint into lost requests. Other 4xx answers (a
bad request, a wrong key) and a 200 whose body is not a chat completion are not retried: they
raise InputError naming the endpoint and the request. A request that fails to connect at all
(connection refused, no such host, connect timeout) ``max_connection_failures`` times in a row
stops the job with InputError naming the endpoint and the model: a dead endpoint is not waited
for until the time budget runs out. Each retry is logged as a warning (scripts that log to the
console show it there too). The API key is read from the environment variable named in the
config (``api_key_env``; null: a server that needs no key, sent a placeholder) and is never
written to a file or a log line.

Batch mode (``batch.enabled``) hands the requests to cueaudit.inference.openai_batch; both
modes send the bodies of cueaudit.inference.openai_protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import queue
import random
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Final

from cueaudit.errors import InputError
from cueaudit.inference import openai_protocol as protocol
from cueaudit.inference.core import (
    API_SAMPLING_KEYS,
    PLAIN_TEXT,
    AnswerSpec,
    Decoding,
    Generation,
    Request,
)
from cueaudit.inference.openai_batch import BatchRunner
from cueaudit.inference.openai_protocol import (
    BatchSettings,
    OpenAISettings,
    Prices,
    generation_from_body,
)

__all__ = [
    "BatchSettings",
    "OpenAIBackend",
    "OpenAISettings",
    "Prices",
    "RetryableError",
    "backoff_delay",
    "generation_from_body",
    "retry_after",
]

log = logging.getLogger(__name__)


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


def refusal(error: Any) -> tuple[str, str | None]:
    """What an HTTP error answer says (its message), and the setting or body field at fault:
    ``api_key_env`` for 401 and 403, else the body's ``param``."""
    body = error.body if isinstance(error.body, Mapping) else {}
    detail = body.get("message") or error.message
    field = "api_key_env" if error.status_code in (401, 403) else body.get("param")
    return str(detail), str(field) if field else None


def _refused(where: str, request: Request, error: Any) -> InputError:
    """A 4xx other than 429: the request itself is wrong (or the key), so it is not retried."""
    detail, field = refusal(error)
    return InputError(where, f"request {request.uid}: HTTP {error.status_code}: {detail}", field)


#: The client's HTTP library's errors of a connection never made (refused, no such host,
#: connect timeout); by name, as httpx and httpx2 (the openai client's, by version) share them.
CONNECT_ERRORS: Final = frozenset({"ConnectError", "ConnectTimeout"})


def connection_failed(error: BaseException) -> bool:
    """Whether a client error is a failure to connect at all (refused, no such host, connect
    timeout), as against an endpoint that answered slowly or dropped a request mid-way."""
    return type(error.__cause__).__name__ in CONNECT_ERRORS


@dataclass(frozen=True)
class _End:
    """The sender finished: ``error`` is the first request's error, if any."""

    error: BaseException | None


class OpenAIBackend:
    """Chat completions against the OpenAI API or any compatible server."""

    name = "openai"
    #: Option scores come only from top logprobs of generated answers (``logprobs: true``).
    scores_options = False
    #: Answers are paid for: the runner caches every batch as soon as it arrives.
    flush_every_batch = True
    #: Sampling parameters the API accepts; what the config leaves unset is not sent (the
    #: API's defaults), so no model defaults are resolved here.
    sampling_keys = API_SAMPLING_KEYS
    sampling_defaults = None
    #: Online answers are handed back (and cached) in batches of the answers finished within
    #: this many seconds of the batch's first, and at most this many per concurrent slot.
    batch_seconds = 10.0
    batch_rows_per_slot = 4

    def __init__(
        self,
        settings: OpenAISettings,
        model_id: str | None = None,
        state_dir: Path | None = None,
    ) -> None:
        self.settings = settings
        self.model_id = model_id or f"openai:{settings.model}@{settings.base_url}"
        self.state_dir = state_dir  # Batch API state of this job (results/cache/batches/...)
        self.stats: dict[str, int] = {"requests": 0, "retries": 0, "succeeded": 0}
        self._rng = random.Random()

    @classmethod
    def from_spec(
        cls,
        manifest: Mapping[str, Any],
        spec: Mapping[str, Any],
        state_dir: Path | None = None,
    ) -> OpenAIBackend:
        """The backend of a prepared model (its manifest) and its config entry."""
        return cls(OpenAISettings.from_spec(spec), str(manifest["model_id"]), state_dir)

    @staticmethod
    def remote_model(name: str, spec: Mapping[str, Any]) -> tuple[str, str]:
        """The manifest's ``source`` and ``model_id`` of a configured model: nothing is
        downloaded; the identity is the dated model snapshot at its endpoint."""
        openai = spec.get("openai", {})
        model = openai.get("model", name)
        base_url = openai.get("base_url") or protocol.OPENAI_BASE_URL
        return base_url, f"openai:{model}@{base_url}"

    @property
    def rechecks(self) -> bool:
        """Whether the runner may re-answer a few prompts alone (its determinism check): not
        through the Batch API, where each answer is a submission of up to 24 h."""
        return not self.settings.batch.enabled

    def identity(self) -> dict[str, Any]:
        s = self.settings
        return {
            "backend": self.name,
            "model": self.model_id,
            "reasoning_effort": s.reasoning_effort,
            "logprobs": s.logprobs,
            "send_seed": s.send_seed,
        }

    def render(self, text: str, answer: AnswerSpec = PLAIN_TEXT) -> str:
        return protocol.render(text, answer)

    def body(self, request: Request, decoding: Decoding) -> dict[str, Any]:
        """The request body of one prompt (identical online and in Batch API files)."""
        return protocol.request_body(request, decoding, self.settings)

    def client(self, asynchronous: bool) -> Any:
        return protocol.make_client(self.settings, asynchronous)

    def score(
        self, requests: Iterable[Request]
    ) -> Iterator[list[tuple[Request, dict[str, float]]]]:
        raise NotImplementedError(
            f"the {self.name} backend cannot score options without generating; with "
            "openai.logprobs: true it returns first-token option scores from generate()"
        )

    def generate(
        self, requests: Iterable[Request], decoding: Decoding
    ) -> Iterator[list[tuple[Request, Generation]]]:
        todo = list(requests)
        s = self.settings
        if s.batch.enabled:
            if self.state_dir is None:
                raise InputError(
                    "openai.batch", "Batch API mode needs a state folder (state_dir)", "enabled"
                )
            yield from BatchRunner(self, self.state_dir, s.batch, s.prices).run(todo, decoding)
            return
        yield from self._online(todo, decoding)

    def _online(
        self, todo: list[Request], decoding: Decoding
    ) -> Iterator[list[tuple[Request, Generation]]]:
        """Answers in batches as they finish, while the sender keeps ``concurrency`` in flight.

        The requests are sent from an event loop in a thread of their own, so that sending
        goes on while the caller writes a batch to the cache. After the first error (a refused
        request, or one that ran out of its time budget) the answers finished before it are
        handed back, the requests in flight are cancelled, and the error is raised.
        """
        done: queue.SimpleQueue[tuple[Request, Generation] | _End] = queue.SimpleQueue()
        loop = asyncio.new_event_loop()
        sender = loop.create_task(self._send(todo, decoding, done))

        def drive() -> None:
            try:
                loop.run_until_complete(sender)
            except BaseException as error:  # a request's error, or cancelled by close()
                done.put(_End(error))
            else:
                done.put(_End(None))
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        thread = threading.Thread(target=drive, name="openai-sender", daemon=True)
        thread.start()
        try:
            while True:
                batch, end = self._next_batch(done)
                if batch:
                    yield batch
                if end is not None:
                    if end.error is not None:
                        raise end.error
                    return
        finally:
            if thread.is_alive():  # the caller stopped early (or an error): stop sending
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(sender.cancel)
            thread.join()

    def _next_batch(
        self, done: queue.SimpleQueue[tuple[Request, Generation] | _End]
    ) -> tuple[list[tuple[Request, Generation]], _End | None]:
        """The answers finished within ``batch_seconds`` of the first (``batch_rows`` at most)."""
        item = done.get()
        if isinstance(item, _End):
            return [], item
        batch = [item]
        until = time.monotonic() + self.batch_seconds
        while len(batch) < max(1, self.settings.concurrency * self.batch_rows_per_slot):
            try:
                item = done.get(timeout=max(0.0, until - time.monotonic()))
            except queue.Empty:
                break
            if isinstance(item, _End):
                return batch, item
            batch.append(item)
        return batch, None

    async def _send(
        self,
        todo: list[Request],
        decoding: Decoding,
        done: queue.SimpleQueue[tuple[Request, Generation] | _End],
    ) -> None:
        """At most ``concurrency`` requests in flight; one starts as soon as one finishes."""
        client = self.client(asynchronous=True)
        waiting = iter(todo)
        flying: dict[asyncio.Task[Generation], Request] = {}

        def start(count: int) -> None:
            for request in itertools.islice(waiting, count):
                flying[asyncio.create_task(self._complete(client, request, decoding))] = request

        try:
            start(self.settings.concurrency)
            while flying:
                finished, _ = await asyncio.wait(flying, return_when=asyncio.FIRST_COMPLETED)
                failed = [t for t in finished if t.exception() is not None]
                for task in finished - set(failed):
                    done.put((flying.pop(task), task.result()))
                if failed:
                    raise failed[0].exception()  # type: ignore[misc]
                start(len(finished))
        finally:
            for task in flying:
                task.cancel()
            await asyncio.gather(*flying, return_exceptions=True)
            await client.close()

    async def _complete(self, client: Any, request: Request, decoding: Decoding) -> Generation:
        import openai

        s = self.settings
        body = self.body(request, decoding)
        model = body.pop("model")
        messages = body.pop("messages")
        deadline = time.monotonic() + s.give_up_after_s
        where = f"{s.endpoint} (model {model})"
        unreachable = 0  # connection failures in a row: a dead endpoint stops the job
        for attempt in itertools.count():
            self.stats["requests"] += 1
            tick = time.perf_counter()
            try:
                response = await client.chat.completions.create(
                    model=model,
                    messages=messages,
                    extra_body=body,
                    timeout=max(0.1, min(s.timeout_s, deadline - time.monotonic())),
                )
            except openai.APIStatusError as error:
                if error.status_code != 429 and error.status_code < 500:
                    raise _refused(where, request, error) from error
                delay = retry_after(error.response.headers)
                reason, unreachable = f"HTTP {error.status_code}", 0
            except (openai.APITimeoutError, openai.APIConnectionError) as error:
                delay, reason = None, type(error).__name__
                unreachable = unreachable + 1 if connection_failed(error) else 0
                if unreachable >= s.max_connection_failures:
                    raise InputError(
                        where,
                        f"cannot connect: {unreachable} connection failures in a row "
                        f"(last: {error.__cause__}); is the server running, and is "
                        f"openai.base_url right? (stopped at openai.max_connection_failures "
                        f"{s.max_connection_failures})",
                        "base_url",
                    ) from error
            except json.JSONDecodeError as error:  # a 200 that is not JSON: answered, not retried
                raise InputError(
                    where, f"request {request.uid}: response body is not JSON ({error})"
                ) from error
            else:
                seconds = time.perf_counter() - tick
                generation = generation_from_body(
                    response.model_dump(),
                    request.answer,
                    seconds,
                    source=f"{where}: request {request.uid}",
                )
                self.stats["succeeded"] += 1
                return generation
            backoff = backoff_delay(attempt, s.backoff_base_s, s.backoff_max_s, self._rng)
            wait = max(delay or 0.0, backoff)
            out_of_tries = s.max_retries is not None and attempt >= s.max_retries
            if out_of_tries or time.monotonic() + wait >= deadline:
                raise RetryableError(
                    f"{s.endpoint} (model {model}): request {request.uid}: gave up after "
                    f"{attempt + 1} tries "
                    f"in {s.give_up_after_s - (deadline - time.monotonic()):.0f} s "
                    f"(last: {reason}; "
                    + (f"max_retries {s.max_retries}, " if s.max_retries is not None else "")
                    + f"give_up_after_s {s.give_up_after_s:g})",
                    delay,
                )
            self.stats["retries"] += 1
            log.warning("retry %d of %s in %.2f s (%s)", attempt + 1, request.uid, wait, reason)
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")
