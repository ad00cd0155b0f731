"""The chat-completions wire format, shared by online requests and Batch API request lines.

One function builds the request body of a :class:`Request` (so a Batch API line carries
exactly what an online call sends, ``tools`` and ``response_format`` included) and one reads
a response body back into a :class:`Generation`.

- **JSON schema.** OpenAI takes ``{"type": "json_schema", "json_schema": {"name", "schema",
  "strict": true}}``. llama-cpp-python's server (0.3.x) rejects that type (HTTP 500, a
  validation error) and takes ``{"type": "json_object", "schema": ...}``; it turns the schema
  into a grammar but ignores ``minimum``/``maximum``, so in its dialect bounded integers are
  sent as the equivalent ``enum`` (see :func:`grammar_schema`). ``schema_dialect`` picks one.
- **Tools.** ``tools`` in the OpenAI format; ``tool_choice`` naming a tool forces it (a
  ``{"type": "function", ...}`` object on the wire), ``"auto"``, ``"required"`` and
  ``"none"`` are sent as strings. Tool calls are read from ``message.tool_calls`` whatever
  the finish reason (OpenAI says ``"stop"`` for a forced call, llama-cpp-python
  ``"tool_calls"``).
- **Option scores** come from the first generated token's ``top_logprobs``: see
  :func:`option_logprobs`.
- **Fingerprint.** The response's ``system_fingerprint`` (the backend configuration that
  answered) is kept with each answer.
- **Greedy decoding** (``temperature: 0``) is sent as temperature 0 without ``top_p``.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeGuard, get_args

from cueaudit.errors import InputError
from cueaudit.inference.core import (
    PLAIN_TEXT,
    AnswerSpec,
    Decoding,
    Generation,
    Option,
    Request,
    Tool,
    ToolCall,
    canonical_json,
    tool_arguments,
)
from cueaudit.inference.seeding import native_seed

SchemaDialect = Literal["openai", "llama_cpp"]
OPENAI_BASE_URL: Final = "https://api.openai.com/v1"
TOOL_CHOICE_MODES: Final = frozenset({"auto", "required", "none"})
#: Largest integer range written out as an enum for llama.cpp's grammar.
MAX_ENUM_RANGE: Final = 256


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
    #: None: the server needs no key (the client sends :data:`NO_KEY`).
    api_key_env: str | None = "OPENAI_API_KEY"
    concurrency: int = 16
    timeout_s: float = 120.0
    #: None: retries are bounded by ``give_up_after_s`` only (a try count would give up on a
    #: slow but healthy endpoint whose every try times out).
    max_retries: int | None = None
    #: A request still failing this long after its first try is given up.
    give_up_after_s: float = 600.0
    #: A request that fails to connect at all this many times in a row stops the job.
    max_connection_failures: int = 5
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    reasoning_effort: str | None = "none"
    max_tokens_param: str = "max_completion_tokens"
    send_seed: bool = False
    logprobs: bool = False
    top_logprobs: int = 20
    #: How a JSON schema goes on the wire: "openai" or "llama_cpp" (llama-cpp-python's server).
    schema_dialect: SchemaDialect = "openai"
    batch: BatchSettings = field(default_factory=BatchSettings)
    prices: Prices = field(default_factory=Prices)

    def __post_init__(self) -> None:
        if self.schema_dialect not in get_args(SchemaDialect):
            raise InputError(
                "openai",
                f"unknown dialect {self.schema_dialect!r}; one of {get_args(SchemaDialect)}",
                "schema_dialect",
            )
        if self.give_up_after_s <= 0:
            raise InputError("openai", "must be positive", "give_up_after_s")
        if self.max_retries is not None and self.max_retries < 0:
            raise InputError("openai", "must be null or at least 0", "max_retries")
        if self.max_connection_failures < 1:
            raise InputError("openai", "must be at least 1", "max_connection_failures")

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> OpenAISettings:
        raw = dict(spec.get("openai") or {})
        batch = BatchSettings(**(raw.pop("batch", None) or {}))
        prices = Prices(**(raw.pop("prices", None) or {}))
        raw.setdefault("model", spec.get("path", ""))
        return cls(batch=batch, prices=prices, **raw)

    @property
    def endpoint(self) -> str:
        """The base URL requests go to (for messages; never holds the key)."""
        return self.base_url or OPENAI_BASE_URL


#: The key sent to a server that needs none (``api_key_env: null``): the client insists on one.
NO_KEY: Final = "no-key-needed"


def api_key(env: str | None) -> str:
    """The API key from the environment variable ``env``; :data:`NO_KEY` when it is None."""
    if env is None:
        return NO_KEY
    key = os.environ.get(env)
    if not key:
        raise InputError(
            "environment", f"set the API key in the environment variable {env}", "api_key_env"
        )
    return key


def make_client(settings: OpenAISettings, asynchronous: bool) -> Any:
    """An official ``openai`` client of the endpoint, without the library's own retries."""
    import openai

    cls = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return cls(
        api_key=api_key(settings.api_key_env),
        base_url=settings.base_url,
        max_retries=0,  # retries are ours: backoff with jitter, Retry-After, a time budget
        timeout=settings.timeout_s,
    )


# -- requests -------------------------------------------------------------------------------


def messages(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def grammar_schema(schema: Any) -> Any:
    """The schema with bounded integer ranges written as enums (for llama.cpp's grammar).

    llama-cpp-python builds a grammar from a JSON schema but drops ``minimum``/``maximum``
    (``exclusiveMinimum``/``exclusiveMaximum``), so ``{"type": "integer", "minimum": 1,
    "maximum": 4}`` lets 7 or 2008 through; the same values as an ``enum`` are enforced.
    Ranges over :data:`MAX_ENUM_RANGE` values, and ``multipleOf``, are left as they are.
    """
    if isinstance(schema, list):
        return [grammar_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {
        k: v if k in ("enum", "const", "default", "examples") else grammar_schema(v)
        for k, v in schema.items()
    }
    if out.get("type") != "integer" or "enum" in out or "multipleOf" in out:
        return out
    low = _bound(out, "minimum", "exclusiveMinimum", +1)
    high = _bound(out, "maximum", "exclusiveMaximum", -1)
    if low is None or high is None or not 0 < high - low + 1 <= MAX_ENUM_RANGE:
        return out
    bounds = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
    return {**{k: v for k, v in out.items() if k not in bounds}, "enum": list(range(low, high + 1))}


def _bound(schema: Mapping[str, Any], inclusive: str, exclusive: str, step: int) -> int | None:
    """The tightest integer bound on one side (step +1: lower, -1: upper); None if unbounded."""
    if isinstance(schema.get(exclusive), bool):  # draft 4's flag form: left to the server
        return None
    bounds = []
    if _is_number(value := schema.get(inclusive)):
        bounds.append(math.ceil(value) if step > 0 else math.floor(value))
    if _is_number(value := schema.get(exclusive)):
        bounds.append(math.floor(value) + 1 if step > 0 else math.ceil(value) - 1)
    if not bounds:
        return None
    return max(bounds) if step > 0 else min(bounds)


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def schema_name(schema: Mapping[str, Any]) -> str:
    """The ``json_schema.name`` OpenAI requires: the schema's title if it fits, else answer."""
    title = schema.get("title")
    if isinstance(title, str) and 0 < len(title) <= 64 and re.fullmatch(r"[A-Za-z0-9_-]+", title):
        return title
    return "answer"


def response_format(schema: Mapping[str, Any], dialect: SchemaDialect) -> dict[str, Any]:
    if dialect == "llama_cpp":
        return {"type": "json_object", "schema": grammar_schema(dict(schema))}
    return {
        "type": "json_schema",
        "json_schema": {"name": schema_name(schema), "schema": dict(schema), "strict": True},
    }


def wire_tool(tool: Tool, dialect: SchemaDialect) -> dict[str, Any]:
    entry = tool.openai()
    if dialect == "llama_cpp":
        entry["function"]["parameters"] = grammar_schema(entry["function"]["parameters"])
    return entry


def wire_tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in TOOL_CHOICE_MODES:
        return choice
    return {"type": "function", "function": {"name": choice}}


def answer_fields(answer: AnswerSpec, dialect: SchemaDialect = "openai") -> dict[str, Any]:
    """The body fields of an answer spec: ``response_format``, ``tools``, ``tool_choice``."""
    fields: dict[str, Any] = {}
    if (schema := answer.schema()) is not None:
        fields["response_format"] = response_format(schema, dialect)
    if answer.tools:
        fields["tools"] = [wire_tool(t, dialect) for t in answer.tools]
        if answer.tool_choice is not None:
            fields["tool_choice"] = wire_tool_choice(answer.tool_choice)
    return fields


def render(text: str, answer: AnswerSpec = PLAIN_TEXT) -> str:
    """The model input of a prompt, for the cache key.

    Plain text renders as the JSON of the messages, as every cached answer was keyed; a schema
    or tools add their OpenAI-format fields in canonical JSON (the dialect only changes how
    the same constraint is spelled for a server, so it stays out).
    """
    fields = answer_fields(answer)
    if not fields:
        return json.dumps(messages(text), ensure_ascii=False)
    return canonical_json({"messages": messages(text), **fields})


def request_body(request: Request, decoding: Decoding, settings: OpenAISettings) -> dict[str, Any]:
    """The request body of one prompt (identical online and in Batch API files)."""
    s = settings
    body: dict[str, Any] = {"model": s.model, "messages": messages(request.text)}
    # Sampling keys the config leaves unset (None) are not sent: the API's defaults apply.
    if decoding.temperature is not None:
        body["temperature"] = decoding.temperature
    body[s.max_tokens_param] = decoding.max_new_tokens
    if decoding.top_p is not None:
        body["top_p"] = decoding.top_p
    if s.reasoning_effort is not None:
        body["reasoning_effort"] = s.reasoning_effort
    if s.send_seed:
        body["seed"] = native_seed(request.seed, request.uid)
    if s.logprobs:
        body["logprobs"] = True
        body["top_logprobs"] = s.top_logprobs
    body.update(answer_fields(request.answer, s.schema_dialect))
    return body


# -- responses ------------------------------------------------------------------------------


def first_token_text(form: str) -> str:
    """A form's first token as the API can see it: its first word (no tokenizer here)."""
    words = form.split()
    return words[0] if words else form


def option_logprobs(
    choice: Mapping[str, Any], options: Iterable[Option]
) -> dict[str, float] | None:
    """Log-probability of each option at the first generated token, from its top logprobs.

    A first-token approximation of the full-continuation scores local backends compute: an
    option's score is log of the summed probability of the top-logprob tokens that, with
    surrounding whitespace stripped, equal the first token (word) of one of its forms. For
    ``Option("Yes", ("Yes", "yes", "YES"))`` that is the P(Yes) the old ``p_yes`` read (it
    lower-cased tokens, so it also counted spellings such as "yES" that are no form here). An
    option none of whose forms is in the top list gets no key (its probability is below the
    list's cut-off, not zero). None when no options were asked or no logprobs came back.
    """
    options = tuple(options)
    content = ((choice.get("logprobs") or {}).get("content")) or []
    if not options or not content:
        return None
    top = content[0].get("top_logprobs") or []
    scores: dict[str, float] = {}
    for option in options:
        firsts = {first_token_text(f) for f in option.forms}
        mass = sum(math.exp(t["logprob"]) for t in top if str(t["token"]).strip() in firsts)
        if mass > 0:
            scores[option.key()] = math.log(mass)
    return scores


def tool_calls(message: Mapping[str, Any]) -> tuple[ToolCall, ...]:
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        calls.append(
            ToolCall(str(function.get("name") or ""), tool_arguments(function.get("arguments")))
        )
    return tuple(calls)


def generation_from_body(
    body: Mapping[str, Any],
    answer: AnswerSpec = PLAIN_TEXT,
    seconds: float = 0.0,
    source: str = "response",
) -> Generation:
    """A Generation from a chat-completion response body (online or Batch API).

    Raises InputError naming ``source`` when the body has no ``choices`` list with an object.
    """
    choices = body.get("choices") if isinstance(body, Mapping) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        keys = (
            sorted(k for k, v in body.items() if v is not None) if isinstance(body, Mapping) else []
        )
        raise InputError(source, f"not a chat completion (no choices; keys {keys})", "choices")
    choice = choices[0]
    message = choice.get("message") or {}
    usage = body.get("usage") or {}
    return Generation(
        completion=message.get("content") or "",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        finish_reason=str(choice.get("finish_reason") or ""),
        option_logprobs=option_logprobs(choice, answer.options),
        tool_calls=tool_calls(message),
        constrained=answer.constrained,
        seconds=seconds,
        system_fingerprint=_fingerprint(body.get("system_fingerprint")),
    )


def _fingerprint(value: Any) -> str | None:
    """The response's ``system_fingerprint`` as text (None when absent or empty)."""
    return str(value) if value not in (None, "") else None
