from __future__ import annotations

import json

import polars as pl
import pytest

from cueaudit.errors import InputError
from cueaudit.parsing import NULL_REASONS, answer_spec, get_kind, parse_responses
from cueaudit.parsing.kinds import Parsed

#: Study-neutral rules: the order is the precedence, the last category catches any word.
RULES = {
    "weather": [r"\brain\w*", r"\bsnow"],
    "sport": [r"\bfootball\b", r"\btennis\b"],
    "unsure": [r"\bnot sure\b", r"\bdon'?t know\b"],
    "other": [r"[a-z]{2,}"],
}
KIND = get_kind("classified_text", {"rules": RULES})


@pytest.mark.parametrize(
    ("answer", "label", "matched"),
    [
        ("It is raining again.", "weather", "raining"),
        ("Tennis, mostly.", "sport", "Tennis"),
        # the first category wins even when a later one matches earlier in the text
        ("Football in the snow", "weather", "snow"),
        ("I'm not sure.", "unsure", "not sure"),
        ("Probably cooking", "other", "Probably"),
        ("I DON'T KNOW", "unsure", "DON'T KNOW"),
    ],
)
def test_first_matching_category_wins(answer: str, label: str, matched: str) -> None:
    assert KIND.parse_text(answer) == Parsed({"answer_label": label, "matched_text": matched})


@pytest.mark.parametrize(
    ("answer", "reason"),
    [("", "empty"), ("   \n", "empty"), (None, "empty"), ("42 !", "no_category")],
)
def test_null_reasons(answer: str | None, reason: str) -> None:
    assert KIND.parse_text(answer) == Parsed(reason=reason)
    assert reason in KIND.reasons and reason in NULL_REASONS


def test_rules_keep_their_order_as_pairs_too() -> None:
    pairs = get_kind("classified_text", {"rules": [["b", ["x"]], ["a", ["x"]]]})
    assert pairs.categories == ("b", "a")
    assert pairs.parse_text("x").values["answer_label"] == "b"
    assert KIND.categories == ("weather", "sport", "unsure", "other")


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({}, "non-empty mapping"),
        ({"a": []}, "non-empty list of regexes"),
        ({"a": "rain"}, "non-empty list of regexes"),
        ({"a": ["(unclosed"]}, "bad regex"),
        ({"": ["x"]}, "category name"),
        ([["a", ["x"]], ["a", ["y"]]], "distinct"),
    ],
)
def test_bad_rules_are_named(rules: object, message: str) -> None:
    with pytest.raises(InputError, match=message) as raised:
        get_kind("classified_text", {"rules": rules})
    assert raised.value.field == "rules"


def test_tool_and_json_answers_are_classified_like_text() -> None:
    spec = answer_spec("classified_text", {"rules": RULES, "format": "tool"})
    (tool,) = spec.tools
    assert tool.name == "submit_answer" and spec.tool_choice == "submit_answer"
    assert spec.options == ()
    assert tool.parameters["properties"]["answer"]["type"] == "string"
    call = [{"name": "submit_answer", "arguments": json.dumps({"answer": "heavy snow"})}]
    assert KIND.parse_tool_calls(call).values == {"answer_label": "weather", "matched_text": "snow"}
    assert KIND.parse_json('{"answer": "tennis"}').values["answer_label"] == "sport"
    assert KIND.parse_json('{"answer": 3}') == Parsed(reason="invalid_value")


def test_outcome_table_columns() -> None:
    responses = pl.DataFrame(
        {
            "prompt_uid": ["u1", "u2", "u3"],
            "model": ["m"] * 3,
            "seed": [0] * 3,
            "task": ["t"] * 3,
            "completion": ["rain", "...", None],
        }
    )
    out = parse_responses(responses, "classified_text", {"rules": RULES})
    assert out["answer_label"].to_list() == ["weather", None, None]
    assert out["matched_text"].to_list() == ["rain", None, None]
    assert out["parse_error"].to_list() == [None, "no_category", "empty"]
