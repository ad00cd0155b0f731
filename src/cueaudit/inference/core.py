"""The inference contract every backend answers: requests, answer specs, generations.

A request carries the prompt text and an :class:`AnswerSpec` saying what kind of answer the
task wants; the backend returns a :class:`Generation`. Nothing here knows which study asked:
studies say what an answer is (options to score, a JSON schema, tools), backends only answer.

- **Option scores.** For a closed set of options the backend returns, per option, the log of
  the summed probability of the option's surface forms as full continuations of the prompt
  (``Option.forms``: "Yes", "yes", "YES"), as lm-evaluation-harness scores multiple choice.
  Scores are stored under :meth:`Option.key`, so a cached answer serves every later request
  that asks for options it has already scored.
- **Constrained generation.** ``json_schema`` asks for output that matches the schema.
- **Tools.** ``tools`` with ``tool_choice`` (a tool's name forces that tool; ``"auto"`` lets
  the model choose); tool calls come back in ``Generation.tool_calls``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import polars as pl

from cueaudit.errors import InputError

log = logging.getLogger(__name__)

#: Columns a backend fills for each prompt, with their types.
GENERATION_SCHEMA: Final = {
    "completion": pl.String,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "finish_reason": pl.String,
    #: JSON object {option key: log-probability}; null when no options were scored.
    "option_logprobs": pl.String,
    #: JSON list of {"name": ..., "arguments": {...}}; null when the answer is plain text.
    "tool_calls": pl.String,
    #: True when the output was constrained to a schema (a JSON schema or a forced tool).
    "constrained": pl.Boolean,
    "seconds": pl.Float64,
    #: The API's ``system_fingerprint`` (its backend configuration when it answered); null for
    #: local backends, for APIs that send none and in cache files written before it was kept.
    "system_fingerprint": pl.String,
}
GENERATION_FIELDS: Final = tuple(GENERATION_SCHEMA)

#: Columns of a response shard results/responses/{model}/seed{seed}/{task}/{shard}.parquet.
#: The generation columns are the contract read by cueaudit.parsing; the rest is provenance.
RESPONSE_SCHEMA: Final = {
    "prompt_uid": pl.String,
    "model": pl.String,
    "seed": pl.Int64,
    "task": pl.String,
    **GENERATION_SCHEMA,
    "backend": pl.String,
    "cache_key": pl.String,
    "cache_hit": pl.Boolean,
    #: When the answer was generated (seconds since the epoch; a cached answer keeps its own).
    "generated": pl.Float64,
}


def canonical_json(value: Any) -> str:
    """Key-sorted compact JSON: equal values give equal strings (cache keys, schemas)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Option:
    """One answer of a closed set: its label and the surface forms whose probabilities add up."""

    label: str
    forms: tuple[str, ...]

    def key(self) -> str:
        """The name its score is stored under: its forms, in order, joined by ``|``."""
        return "|".join(self.forms)


@dataclass(frozen=True)
class Tool:
    """A function the model may call: a name, a description and a JSON schema of arguments."""

    name: str
    description: str
    parameters_json: str  # canonical JSON of the arguments' schema (hashable)

    @classmethod
    def of(cls, name: str, description: str, parameters: Mapping[str, Any]) -> Tool:
        return cls(name, description, canonical_json(dict(parameters)))

    @property
    def parameters(self) -> dict[str, Any]:
        parameters: dict[str, Any] = json.loads(self.parameters_json)
        return parameters

    def openai(self) -> dict[str, Any]:
        """The tool in the chat-completions ``tools`` format (also what chat templates read)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True)
class AnswerSpec:
    """What a task asks the backend for, beyond free text."""

    options: tuple[Option, ...] = ()
    json_schema: str | None = None  # canonical JSON of a schema the output must match
    tools: tuple[Tool, ...] = ()
    tool_choice: str | None = None  # a tool's name (forced), "auto", "required" or "none"

    @property
    def forced_tool(self) -> Tool | None:
        """The tool the model must call, when ``tool_choice`` names one."""
        return next((t for t in self.tools if t.name == self.tool_choice), None)

    @property
    def constrained(self) -> bool:
        return self.json_schema is not None or self.forced_tool is not None

    def schema(self) -> dict[str, Any] | None:
        schema: dict[str, Any] | None = (
            json.loads(self.json_schema) if self.json_schema is not None else None
        )
        return schema

    def cache_fields(self) -> dict[str, Any]:
        """What of the spec changes the generated text, for the response-cache key.

        Options are scored beside the generation without changing it, so they stay out of the
        key: an answer cached before a task scored options (or scored other ones) is served,
        and only the missing scores are computed. A spec with no schema and no tools adds
        nothing, so keys of plain-text answers are the keys they always were.
        """
        fields: dict[str, Any] = {}
        if self.json_schema is not None:
            fields["json_schema"] = self.json_schema
        if self.tools:
            fields["tools"] = [[t.name, t.description, t.parameters_json] for t in self.tools]
            fields["tool_choice"] = self.tool_choice
        return fields


PLAIN_TEXT: Final = AnswerSpec()


#: Sampling parameters resolved per model: the ones vLLM's ``generation_config="auto"`` reads
#: from a model's generation config (besides its token limit, which each task sets).
SAMPLING_KEYS: Final = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
#: What of them the chat-completions API accepts; the others are never sent.
API_SAMPLING_KEYS: Final = ("temperature", "top_p")
_INTEGER_KEYS: Final = frozenset({"top_k"})
#: Filters that always keep the most likely token, so greedy decoding ignores them.
GREEDY_IGNORED: Final = ("top_p", "top_k", "min_p")


@dataclass(frozen=True)
class Decoding:
    """The decoding of one task as the backend applies it.

    ``None`` means not applied: no top-k or nucleus filter, no min-p, no repetition penalty,
    and for API backends a key not sent (the API's default). The values a run uses come from
    :meth:`from_config`: the config's ``decoding`` block where it sets a key, else the model's
    own generation config (the paper: temperature 1, framework defaults otherwise).

    Temperature 0 is greedy decoding (:attr:`greedy`): every backend takes the most likely
    token at each step (the HF engine its argmax, vLLM and APIs ``temperature: 0``). Top-k,
    top-p and min-p always keep the most likely token, so they cannot change a greedy answer:
    they are not applied (None) and not sent. The repetition penalty still applies (it
    changes which token is the most likely). The seed draws nothing under greedy decoding:
    every seed gives the same answers.
    """

    temperature: float | None = 1.0
    top_p: float | None = None
    top_k: int | None = None
    max_new_tokens: int = 16
    min_p: float | None = None
    repetition_penalty: float | None = None

    def __post_init__(self) -> None:
        if self.temperature is not None and self.temperature < 0:
            raise InputError("config", f"{self.temperature} is below 0", "decoding.temperature")
        if self.greedy:  # the filters keep the most likely token: nothing to apply
            for key in GREEDY_IGNORED:
                object.__setattr__(self, key, None)

    @property
    def greedy(self) -> bool:
        """Temperature 0: the most likely token at every step, whatever the seed."""
        return self.temperature == 0

    @classmethod
    def from_config(
        cls,
        decoding: Mapping[str, Any],
        max_new_tokens: int,
        defaults: Mapping[str, Any] | None = None,
        supported: Iterable[str] = SAMPLING_KEYS,
    ) -> Decoding:
        """Resolve the config's ``decoding`` block against the model's defaults.

        A key the block sets (not null) wins; otherwise the model's value (``defaults``: its
        generation config, :func:`cueaudit.inference.manifest.sampling_defaults`; None for API
        models, whose unset keys are left to the API). Keys the backend cannot apply (not in
        ``supported``) are None, with a warning when the config set them.
        """
        supported = set(supported)
        values: dict[str, Any] = {}
        for key in SAMPLING_KEYS:
            value = decoding.get(key)
            if key not in supported:
                if value is not None:
                    log.warning("decoding.%s = %r is not applied by this backend", key, value)
                value = None
            elif value is None and defaults:
                value = defaults.get(key)
            if value is not None:
                value = int(value) if key in _INTEGER_KEYS else float(value)
            values[key] = value
        if values["temperature"] == 0:
            ignored = {k: decoding[k] for k in GREEDY_IGNORED if decoding.get(k) is not None}
            if ignored:
                log.warning(
                    "decoding.temperature 0 is greedy decoding: %s cannot change its answers "
                    "and are not applied",
                    ", ".join(f"{k} = {v!r}" for k, v in ignored.items()),
                )
        return cls(max_new_tokens=int(max_new_tokens), **values)

    def sampling(self) -> dict[str, Any]:
        """The sampling parameters (everything but the token limit), as recorded in provenance;
        ``greedy: true`` is added under greedy decoding."""
        values = {key: getattr(self, key) for key in SAMPLING_KEYS}
        return {**values, "greedy": True} if self.greedy else values

    def cache_fields(self) -> dict[str, Any]:
        """What of the decoding enters the response-cache key: the values actually applied.

        Temperature, top-p, top-k and the token limit always enter, as they always did (so the
        keys of answers sampled with the same values stay what they were); min-p and the
        repetition penalty only when they change the sampling (min-p > 0, penalty != 1), and
        ``greedy: true`` under greedy decoding.
        """
        fields: dict[str, Any] = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "max_new_tokens": self.max_new_tokens,
        }
        if self.min_p:
            fields["min_p"] = self.min_p
        if self.repetition_penalty is not None and self.repetition_penalty != 1.0:
            fields["repetition_penalty"] = self.repetition_penalty
        if self.greedy:
            fields["greedy"] = True
        return fields


def backend_decoding(backend: Any, decoding: Mapping[str, Any], max_new_tokens: int) -> Decoding:
    """The decoding a backend applies to a task: the config resolved against the backend's
    ``sampling_defaults`` (a model's generation config; absent or None: none) and limited
    to its ``sampling_keys`` (absent: all of :data:`SAMPLING_KEYS`)."""
    return Decoding.from_config(
        decoding,
        max_new_tokens,
        getattr(backend, "sampling_defaults", None),
        getattr(backend, "sampling_keys", SAMPLING_KEYS),
    )


@dataclass(frozen=True)
class Request:
    """One prompt to answer. ``group`` names prompts sharing a long prefix (e.g. one cue)."""

    uid: str
    text: str
    seed: int
    cache_key: str = ""
    group: str = ""
    answer: AnswerSpec = PLAIN_TEXT


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] | str  # the parsed arguments, or the raw text if not JSON

    def row(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments}


def tool_arguments(raw: Any) -> dict[str, Any] | str:
    """A tool call's arguments: the JSON object ``raw`` holds (an object already parsed passes
    through), else the raw text (None as ""): malformed JSON, a JSON value that is not an
    object, JSON inside other text and JSON nested too deep to decode are kept as written for
    the parser to judge."""
    if isinstance(raw, dict):
        return raw
    text = "" if raw is None else str(raw)
    try:
        parsed = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text
    return parsed if isinstance(parsed, dict) else text


def forced_tool_calls(answer: AnswerSpec, completion: str) -> tuple[ToolCall, ...]:
    """The call of the tool ``answer`` forces, its arguments the (constrained) completion;
    none when no tool is forced."""
    tool = answer.forced_tool
    return (ToolCall(tool.name, tool_arguments(completion)),) if tool is not None else ()


@dataclass(frozen=True)
class Generation:
    completion: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    option_logprobs: dict[str, float] | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    constrained: bool = False
    seconds: float = 0.0
    system_fingerprint: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def row(self) -> dict[str, Any]:
        """The generation's columns (GENERATION_SCHEMA), JSON-encoded where structured."""
        return {
            "completion": self.completion,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
            "option_logprobs": (
                canonical_json(self.option_logprobs) if self.option_logprobs is not None else None
            ),
            "tool_calls": (
                canonical_json([c.row() for c in self.tool_calls]) if self.tool_calls else None
            ),
            "constrained": self.constrained,
            "seconds": self.seconds,
            "system_fingerprint": self.system_fingerprint,
        }


class Backend(Protocol):
    """What the shard runner needs from a backend.

    ``scores_options`` says whether :meth:`score` works (local models); API backends return
    the scores they can read from top-logprobs within :meth:`generate` only.
    ``flush_every_batch`` asks the runner to write each batch to the cache at once (paid
    answers). Optionally, ``sampling_defaults`` holds the model's own sampling parameters
    (its generation config) and ``sampling_keys`` the parameters the backend can apply
    (:func:`backend_decoding`); ``rechecks`` false stops the runner from re-answering prompts
    alone (cueaudit.inference.determinism; the Batch API).
    """

    name: str
    scores_options: bool
    flush_every_batch: bool

    def identity(self) -> dict[str, Any]:
        """Everything besides the prompt and seed that determines an answer (cache key)."""
        ...

    def render(self, text: str, answer: AnswerSpec = PLAIN_TEXT) -> str:
        """The exact model input of a prompt (chat template, tools), for the cache key."""
        ...

    def generate(
        self, requests: Iterable[Request], decoding: Decoding
    ) -> Iterator[list[tuple[Request, Generation]]]:
        """Answer the requests, yielding completed batches as soon as they finish."""
        ...

    def score(
        self, requests: Iterable[Request]
    ) -> Iterator[list[tuple[Request, dict[str, float]]]]:
        """Option log-probabilities of each request's ``answer.options``, without generating."""
        ...


#: How tools reach a model whose chat template ignores ``tools`` (SmolLM2's does): one system
#: turn, in place of the template's default system prompt, listing each tool's chat-completions
#: entry as canonical JSON, one per line.
TOOLS_SYSTEM_TURN: Final = (
    "You can call the following tools. Each line describes one tool as JSON: its name, what it "
    "does and the JSON schema of its arguments.\n{tools}\n"
    "To call a tool, answer with its arguments as one JSON object."
)


def render_user_turn(tokenizer: Any, text: str, tools: Iterable[Tool] = ()) -> str:
    """The prompt as one user turn in the model's chat template, ready for the answer.

    Tools go through the template's own ``tools`` variable; a template that renders the same
    text with and without them gets them as a system turn (:data:`TOOLS_SYSTEM_TURN`). Without
    tools the rendering is the one every cached answer was keyed on.
    """
    listed = [t.openai() for t in tools]
    messages = [{"role": "user", "content": text}]
    rendered: str = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    )
    if not listed:
        return rendered
    with_tools: str = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, tools=listed
    )
    if with_tools != rendered:
        return with_tools
    system = TOOLS_SYSTEM_TURN.format(tools="\n".join(canonical_json(t) for t in listed))
    fallback: str = tokenizer.apply_chat_template(
        [{"role": "system", "content": system}, *messages],
        tokenize=False,
        add_generation_prompt=True,
    )
    return fallback
