"""Answers given as JSON: a constrained completion, a tool call's arguments, JSON in text."""

from __future__ import annotations

import json
import re
from typing import Any, Final

#: Reasons a JSON answer or a tool call yields no outcome (every kind).
REASONS: Final = {
    "invalid_json": "the constrained completion or the tool arguments are not a JSON object",
    "missing_field": "the JSON object lacks the answer's field",
    "invalid_value": "the answer's field has the wrong type or a value outside the schema",
    "wrong_tool": "the model called tools, but not the answer's tool",
    "several_tool_calls": "the model called the answer's tool more than once",
}

_FENCE_RE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL | re.IGNORECASE)
_DECODER: Final = json.JSONDecoder()


def loads_object(text: str) -> dict[str, Any] | None:
    """The JSON object ``text`` holds (a ```json fence around it is fine), else None."""
    fenced = _FENCE_RE.match(text)
    try:
        value = json.loads(fenced.group(1) if fenced else text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def embedded_objects(text: str, field: str) -> list[dict[str, Any]]:
    """The JSON objects in ``text`` that have ``field``, e.g. 'Ranking: {"ranks": [...]}', in
    order; an object nested in one already found is not counted again."""
    found: list[dict[str, Any]] = []
    start = text.find("{")
    while start != -1:
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            value, end = None, start + 1
        if isinstance(value, dict) and field in value:
            found.append(value)
            start = text.find("{", end)
        else:
            start = text.find("{", start + 1)
    return found


def as_integer(value: Any) -> int | None:
    """A JSON integer (2, or 2.0), else None; booleans are not integers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
