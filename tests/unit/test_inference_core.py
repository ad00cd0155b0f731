"""The inference contract's shared pieces: a tool call's arguments, whichever backend read them."""

from __future__ import annotations

from typing import Any

import pytest

from cueaudit.inference.core import AnswerSpec, Tool, ToolCall, forced_tool_calls, tool_arguments

SCHEMA = {"type": "object", "properties": {"ranks": {"type": "array"}}, "required": ["ranks"]}
TOOL = Tool.of("submit_ranking", "Submit the ranks.", SCHEMA)


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ('{"ranks": [1, 2]}', {"ranks": [1, 2]}),  # a JSON object
        ({"ranks": [1]}, {"ranks": [1]}),  # already parsed by a client
        ('Sure: {"ranks": [1, 2]}', 'Sure: {"ranks": [1, 2]}'),  # JSON inside text: as written
        ('{"ranks": [1,', '{"ranks": [1,'),  # malformed (cut at the token limit)
        ("[1, 2]", "[1, 2]"),  # JSON, but not an object
        (None, ""),  # no arguments
        ("[" * 5000 + "]" * 5000, "[" * 5000 + "]" * 5000),  # too deep to decode: as written
    ],
)
def test_tool_arguments_are_a_json_object_or_the_raw_text(raw: Any, want: Any) -> None:
    assert tool_arguments(raw) == want


def test_a_forced_tools_call_is_the_completion() -> None:
    forced = AnswerSpec(tools=(TOOL,), tool_choice="submit_ranking")
    assert forced_tool_calls(forced, '{"ranks": [1, 2]}') == (
        ToolCall("submit_ranking", {"ranks": [1, 2]}),
    )
    assert forced_tool_calls(forced, '{"ranks": [1,') == (
        ToolCall("submit_ranking", '{"ranks": [1,'),
    )
    assert forced_tool_calls(AnswerSpec(tools=(TOOL,), tool_choice="auto"), "{}") == ()
