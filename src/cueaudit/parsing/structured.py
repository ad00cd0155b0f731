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
    "too_long": "the answer is longer than MAX_ANSWER_CHARS characters (it is not read)",
    "too_deep": "the answer nests JSON brackets deeper than MAX_JSON_DEPTH (it is not read)",
}
#: The longest answer read: about 25,000 tokens, six times the longest answer a task may ask
#: for (max_new_tokens 4096). Longer ones are not read, so that no answer costs seconds.
MAX_ANSWER_CHARS: Final = 100_000
#: The deepest JSON nesting read. A tool call's arguments are 3 levels deep; Python's JSON
#: decoder recurses per level and would stop the parsing job on an answer of thousands.
MAX_JSON_DEPTH: Final = 32
_JSON_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS: Final = {"[": 1, "{": 1, "]": -1, "}": -1}

_FENCE_RE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL | re.IGNORECASE)
_DECODER: Final = json.JSONDecoder()


def nesting_depth(text: str) -> int:
    """The deepest nesting of JSON brackets in ``text``, brackets inside JSON strings aside."""
    depth = deepest = 0
    for char in _JSON_STRING_RE.sub("", text):
        step = _BRACKETS.get(char)
        if step is not None:
            depth = max(0, depth + step)
            deepest = max(deepest, depth)
    return deepest


def unreadable(answer: str | None) -> str | None:
    """Why an answer is not read at all (``too_long``, ``too_deep``), else None."""
    if answer is None:
        return None
    if len(answer) > MAX_ANSWER_CHARS:
        return "too_long"
    if nesting_depth(answer) > MAX_JSON_DEPTH:
        return "too_deep"
    return None


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
