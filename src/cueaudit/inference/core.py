"""Types shared by every inference backend: requests, generations and the response schema."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import polars as pl

#: Columns a backend fills for each prompt, with their types.
GENERATION_SCHEMA: Final = {
    "completion": pl.String,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "finish_reason": pl.String,
    "p_yes": pl.Float64,
    "p_no": pl.Float64,
    "seconds": pl.Float64,
}
GENERATION_FIELDS: Final = tuple(GENERATION_SCHEMA)

#: Columns of a response shard results/responses/{model}/seed{seed}/{task}/{shard}.parquet.
#: The first eleven are the contract read by cueaudit.outcomes; the rest describe provenance.
RESPONSE_SCHEMA: Final = {
    "prompt_uid": pl.String,
    "model": pl.String,
    "seed": pl.Int64,
    "task": pl.String,
    **GENERATION_SCHEMA,
    "backend": pl.String,
    "cache_key": pl.String,
    "cache_hit": pl.Boolean,
}


@dataclass(frozen=True)
class Decoding:
    """Decoding parameters of one task (the paper: temperature 1, framework defaults)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 50
    max_new_tokens: int = 16

    @classmethod
    def from_config(cls, decoding: Mapping[str, Any], max_new_tokens: int) -> Decoding:
        known = {k: decoding[k] for k in ("temperature", "top_p", "top_k") if k in decoding}
        return cls(max_new_tokens=int(max_new_tokens), **known)


@dataclass(frozen=True)
class Request:
    """One prompt to answer. ``group`` names prompts sharing a long prefix (e.g. one cue)."""

    uid: str
    text: str
    seed: int
    cache_key: str = ""
    group: str = ""


@dataclass(frozen=True)
class Generation:
    completion: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    p_yes: float | None
    p_no: float | None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def row(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in GENERATION_FIELDS}


class Backend(Protocol):
    """What the shard runner needs from a backend."""

    name: str

    def identity(self) -> dict[str, Any]:
        """Everything besides the prompt and seed that determines an answer (cache key)."""
        ...

    def render(self, text: str) -> str:
        """The exact model input of a prompt (chat template applied), for the cache key."""
        ...

    def generate(
        self, requests: Iterable[Request], decoding: Decoding
    ) -> Iterator[list[tuple[Request, Generation]]]:
        """Answer the requests, yielding completed batches as soon as they finish."""
        ...


def render_user_turn(tokenizer: Any, text: str) -> str:
    """The prompt as one user turn in the model's chat template, ready for the answer."""
    rendered: str = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
    )
    return rendered
