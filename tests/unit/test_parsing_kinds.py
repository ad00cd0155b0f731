from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from cueaudit.errors import InputError
from cueaudit.inference.core import Option
from cueaudit.parsing import KINDS, NO, NULL_REASONS, YES, answer_spec, get_kind
from cueaudit.parsing.kinds import Parsed


def test_registry_names_every_kind() -> None:
    assert set(KINDS) == {"binary", "usd", "label", "race", "rating", "ranking", "classified_text"}
    for name, kind in KINDS.items():
        assert kind.name == name
        assert set(kind.reasons) <= set(NULL_REASONS)
        assert {"empty", "invalid_json", "missing_field", "wrong_tool"} <= set(kind.reasons)


def test_binary_options_are_the_migrated_keys() -> None:
    assert Option("Yes", ("Yes", "yes", "YES")) == YES and YES.key() == "Yes|yes|YES"
    assert Option("No", ("No", "no", "NO")) == NO and NO.key() == "No|no|NO"
    spec = answer_spec("binary")
    assert spec.options == (YES, NO) and not spec.tools and spec.json_schema is None


def test_text_format_scores_options_and_asks_nothing_else() -> None:
    assert answer_spec("usd").options == () and not answer_spec("usd").constrained
    assert answer_spec("ranking").options == ()
    assert [o.label for o in answer_spec("race").options] == ["Black", "White", "Unknown"]
    assert answer_spec("race").options[0].forms == ("Black", "black", "BLACK")
    assert [o.key() for o in answer_spec("rating").options] == ["1", "2", "3", "4", "5"]
    assert answer_spec("binary", {"score_options": False}).options == ()


@pytest.mark.parametrize(
    ("kind", "tool", "field"),
    [
        ("binary", "submit_decision", "decision"),
        ("rating", "submit_rating", "rating"),
        ("ranking", "submit_ranking", "ranks"),
        ("label", "submit_label", "label"),
        ("usd", "submit_amount", "amount"),
    ],
)
def test_tool_format_forces_the_kinds_tool(kind: str, tool: str, field: str) -> None:
    spec = answer_spec(kind, {"format": "tool"})
    assert spec.forced_tool is not None and spec.forced_tool.name == tool
    assert spec.options == () and spec.constrained
    parameters = spec.forced_tool.parameters
    assert parameters["required"] == [field] and parameters["additionalProperties"] is False
    json_spec = answer_spec(kind, {"format": "json"})
    assert json_spec.schema() == parameters and not json_spec.tools


def test_tool_wording_comes_from_the_study() -> None:
    settings = {
        "format": "tool",
        "tool_name": "record_decision",
        "tool_description": "Record whether to interview the applicant.",
        "argument": "interview",
        "argument_description": "yes to interview",
        "tool_choice": "auto",
    }
    spec = answer_spec("binary", settings)
    (tool,) = spec.tools
    assert (tool.name, tool.description) == ("record_decision", settings["tool_description"])
    assert tool.parameters["properties"]["interview"]["description"] == "yes to interview"
    assert spec.tool_choice == "auto" and spec.forced_tool is None
    kind = get_kind("binary", settings)
    call = [{"name": "record_decision", "arguments": {"interview": "no"}}]
    assert kind.parse_tool_calls(call) == Parsed({"answer": 0.0})


def test_ranking_schema_describes_n_candidates_with_ties() -> None:
    schema = answer_spec("ranking", {"format": "json", "candidates": ["P", "Q", "R"]}).schema()
    assert schema is not None
    ranks = schema["properties"]["ranks"]
    assert (ranks["minItems"], ranks["maxItems"]) == (3, 3)
    assert ranks["items"] == {"type": "integer", "minimum": 1, "maximum": 3}
    assert "P, Q, R" in ranks["description"] and "tied" in ranks["description"]
    jsonschema.validate({"ranks": [1, 1, 3]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"ranks": [1, 2, 3, 4]}, schema)


SCHEMA_ANSWERS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("binary", {"decision": "yes"}, {"answer": 1.0}),
    ("usd", {"amount": 85000}, {"answer": 85000.0}),
    ("race", {"label": "White"}, {"answer_label": "White"}),
    ("rating", {"rating": 2}, {"answer": 2.0}),
    ("ranking", {"ranks": [1, 1, 2, 4]}, {"ranks": [1, 1, 3, 4], "tie": True, "n_ranked": 4}),
]


@pytest.mark.parametrize(("kind", "answer", "values"), SCHEMA_ANSWERS)
def test_answers_valid_under_the_schema_are_read(
    kind: str, answer: dict[str, Any], values: dict[str, Any]
) -> None:
    outcome = get_kind(kind, {"format": "json"})
    schema = outcome.answer_spec().schema()
    assert schema is not None
    jsonschema.validate(answer, schema)
    assert outcome.parse_json(json.dumps(answer)) == Parsed(values)
    assert outcome.parse_structured(answer) == Parsed(values)
    assert set(values) == set(outcome.value_columns())


STRUCTURED_CASES: list[tuple[str, Any, Parsed]] = [
    ("binary", {"decision": "Yes"}, Parsed({"answer": 1.0})),
    ("binary", {"decision": " NO "}, Parsed({"answer": 0.0})),
    ("binary", {"decision": True}, Parsed({"answer": 1.0})),
    ("binary", {"decision": 1}, Parsed(reason="invalid_value")),
    ("binary", {"decision": "maybe"}, Parsed(reason="invalid_value")),
    ("binary", {"answer": "yes"}, Parsed(reason="missing_field")),
    ("binary", ["yes"], Parsed(reason="invalid_json")),
    ("usd", {"amount": "$90,000 a year"}, Parsed({"answer": 90000.0})),
    ("usd", {"amount": "$40 an hour"}, Parsed(reason="not_yearly")),
    ("usd", {"amount": 50}, Parsed(reason="implausible_amount")),
    ("usd", {"amount": None}, Parsed(reason="invalid_value")),
    ("race", {"label": "black"}, Parsed({"answer_label": "Black"})),
    ("race", {"label": "Asian"}, Parsed(reason="invalid_value")),
    ("rating", {"rating": 6}, Parsed(reason="rating_out_of_range")),
]


@pytest.mark.parametrize(("kind", "answer", "parsed"), STRUCTURED_CASES)
def test_structured_answers(kind: str, answer: Any, parsed: Parsed) -> None:
    assert get_kind(kind).parse_structured(answer) == parsed


def test_tool_calls_are_checked() -> None:
    kind = get_kind("rating")
    call = {"name": "submit_rating", "arguments": {"rating": 4}}
    assert kind.parse_tool_calls([call]) == Parsed({"answer": 4.0})
    assert kind.parse_tool_calls([{**call, "arguments": '{"rating": 4}'}]) == Parsed(
        {"answer": 4.0}
    )
    assert kind.parse_tool_calls([{**call, "arguments": '{"rating": 4'}]).reason == "invalid_json"
    assert kind.parse_tool_calls([{"name": "search", "arguments": {}}]).reason == "wrong_tool"
    assert kind.parse_tool_calls([call, call]).reason == "several_tool_calls"
    assert kind.parse_tool_calls({"name": "submit_rating"}).reason == "invalid_json"
    assert kind.parse_json("").reason == "empty"
    assert kind.parse_json('{"rating": 4').reason == "invalid_json"
    assert kind.parse_json('```json\n{"rating": 4}\n```') == Parsed({"answer": 4.0})


def test_label_kind_takes_its_labels_and_names_columns_after_them() -> None:
    kind = get_kind("label", {"labels": ["Approve", "Deny", "Not sure"]})
    assert list(kind.columns()) == [
        "answer_label",
        "p_label_approve",
        "p_label_deny",
        "p_label_not_sure",
        "label_mass",
    ]
    assert kind.parse_text("deny.") == Parsed({"answer_label": "Deny"})
    assert kind.parse_text("Approve or deny") == Parsed(reason="several_labels")
    assert kind.parse_text("Hmm") == Parsed(reason="no_label")
    race = get_kind("race")
    assert race.parse_text("Hmm") == Parsed(reason="no_race_label")
    assert race.parse_text("Black or White").reason == "several_race_labels"


@pytest.mark.parametrize(
    ("kind", "settings", "field"),
    [
        ("rating", {"sclae": 5}, "sclae"),
        ("rating", {"scale": 1}, "scale"),
        ("rating", {"scale": "5"}, "scale"),
        ("binary", {"format": "xml"}, "format"),
        ("binary", {"score_options": "yes"}, "score_options"),
        ("binary", {"tool_name": 3}, "tool_name"),
        ("usd", {"min_usd": 10, "max_usd": 1}, "max_usd"),
        ("label", {"labels": ["Yes"]}, "labels"),
        ("label", {"labels": ["Yes", "yes"]}, "labels"),
        ("ranking", {"candidates": ["1", "2", "3"]}, "candidates"),
        ("ranking", {"candidates": ["A", "A", "B"]}, "candidates"),
        ("ranking", {"candidates": ["A", "B"], "n_candidates": 3}, "candidates"),
        ("ranking", {"n_candidates": 1}, "n_candidates"),
    ],
)
def test_bad_settings_name_their_field(kind: str, settings: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError, match=f"field '{field}'"):
        get_kind(kind, settings)


def test_unknown_kind_is_an_input_error() -> None:
    with pytest.raises(InputError, match="unknown kind 'decision'"):
        get_kind("decision")


@pytest.mark.parametrize("answer_format", ["text", "json", "tool"])
@pytest.mark.parametrize(
    ("kind", "settings", "values", "column"),
    [
        ("binary", {}, [1.0, 0.0], "answer"),
        ("rating", {"scale": 5}, [1.0, 3.0, 5.0], "answer"),
        (
            "ranking",
            {"candidates": ["A", "B", "C", "D"]},
            [[1, 2, 3, 4], [2, 1, 2, 4], [1, 1, 1, 1], [4, 3, 1, 1]],
            "ranks",
        ),
    ],
)
def test_a_rendered_answer_parses_back_to_its_value(
    answer_format: str, kind: str, settings: dict, values: list, column: str
) -> None:
    """What the planted checks rely on: a value rendered as a model would write it in the
    kind's format (text, constrained JSON, a tool call) is read back as that value."""
    import polars as pl

    from cueaudit.parsing.responses import parse_responses

    full = {**settings, "format": answer_format}
    outcome = get_kind(kind, full)
    rows = [
        {"prompt_uid": str(i), "model": "m", "seed": 0, "task": "t", **outcome.render(v)}
        for i, v in enumerate(values)
    ]
    parsed = parse_responses(pl.DataFrame(rows), kind, full)
    assert parsed["parse_error"].null_count() == len(values)
    assert parsed[column].to_list() == values
    expected = {"text": "text", "json": "json", "tool": "tool_call"}[answer_format]
    assert set(parsed["answer_source"]) == {expected}


def test_an_unrenderable_value_is_refused() -> None:
    with pytest.raises(InputError, match="not a rating from 1 to 5"):
        get_kind("rating", {"scale": 5}).render(6)
    with pytest.raises(InputError, match="one rank per candidate"):
        get_kind("ranking", {}).render([1, 2, 3])
    with pytest.raises(InputError, match="cannot render"):
        get_kind("usd", {}).render(52000)
