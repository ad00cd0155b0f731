from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from cueaudit.errors import InputError
from cueaudit.inference.core import canonical_json
from cueaudit.parsing import (
    COMMON_COLUMNS,
    NO,
    YES,
    answer_spec,
    get_kind,
    outcome_schema,
    parse_answers,
    parse_response_files,
    parse_responses,
)


def responses(n: int, **columns: list[Any]) -> pl.DataFrame:
    """A response shard of n rows; columns not given are null."""
    base: dict[str, list[Any]] = {
        "prompt_uid": [f"p{i}" for i in range(n)],
        "model": ["m"] * n,
        "seed": [0] * n,
        "task": ["t"] * n,
        "completion": [""] * n,
        "option_logprobs": [None] * n,
        "tool_calls": [None] * n,
        "constrained": [False] * n,
    }
    schema = {
        "prompt_uid": pl.String,
        "model": pl.String,
        "seed": pl.Int64,
        "task": pl.String,
        "completion": pl.String,
        "option_logprobs": pl.String,
        "tool_calls": pl.String,
        "constrained": pl.Boolean,
    }
    return pl.DataFrame({**base, **columns}, schema=schema)


def three_sources(text: str, answer: dict[str, Any], tool: str) -> pl.DataFrame:
    """The same answer as text, as a constrained JSON completion and as a tool call."""
    call = canonical_json([{"name": tool, "arguments": answer}])
    return responses(
        3,
        completion=[text, json.dumps(answer), ""],
        tool_calls=[None, None, call],
        constrained=[False, True, True],
    )


EQUIVALENT_ANSWERS: list[tuple[str, str, dict[str, Any], str]] = [
    ("binary", "Yes, schedule the interview.", {"decision": "yes"}, "submit_decision"),
    ("binary", "No.", {"decision": "no"}, "submit_decision"),
    ("usd", "$85,000", {"amount": 85000}, "submit_amount"),
    ("race", "White", {"label": "White"}, "submit_label"),
    ("rating", "4/5", {"rating": 4}, "submit_rating"),
    ("rating", "Rating: 1", {"rating": 1}, "submit_rating"),
    ("ranking", "B > A = C > D", {"ranks": [2, 1, 2, 3]}, "submit_ranking"),
    ("ranking", "1. A, B, C, D", {"ranks": [1, 1, 1, 1]}, "submit_ranking"),
    (
        "ranking",
        "1. D 2. C 3. B 4. A",
        {"ranks": {"A": 4, "B": 3, "C": 2, "D": 1}},
        "submit_ranking",
    ),
]


@pytest.mark.parametrize(("kind", "text", "answer", "tool"), EQUIVALENT_ANSWERS)
def test_tool_calls_and_json_fill_the_same_columns_as_text(
    kind: str, text: str, answer: dict[str, Any], tool: str
) -> None:
    out = parse_responses(three_sources(text, answer, tool), kind, {"format": "tool"})
    assert out["answer_source"].to_list() == ["text", "json", "tool_call"]
    assert out["parse_error"].null_count() == 3
    values = out.select(list(get_kind(kind).value_columns())).rows()
    assert values[0] == values[1] == values[2]


def test_failures_keep_their_reason_whatever_the_source() -> None:
    call = canonical_json([{"name": "submit_ranking", "arguments": {"ranks": [1, 2, 3]}}])
    other = canonical_json([{"name": "search", "arguments": {"q": "x"}}])
    shard = responses(
        5,
        completion=["B > A > C", '{"ranks": [1, 2', "", "", "B > A > C > D"],
        tool_calls=[None, None, call, other, "[]"],
        constrained=[False, True, True, False, False],
    )
    out = parse_responses(shard, "ranking", {})
    assert out["parse_error"].to_list() == [
        "missing_candidate",
        "invalid_json",
        "wrong_count",
        "wrong_tool",
        None,
    ]
    assert out["answer_source"].to_list() == ["text", "json", "tool_call", "tool_call", "text"]
    assert out["n_ranked"].to_list() == [3, None, None, None, 4]
    assert out["ranks"].to_list()[-1] == [2, 1, 3, 4]
    assert out["tie"].to_list() == [None, None, None, None, False]


def test_an_unreadable_answer_fails_alone_with_its_reason() -> None:
    """Answers nested tens of thousands of brackets deep (in a tool call, in its argument
    string, in a constrained JSON completion, in text) and an answer of a megabyte are each a
    failure of that answer with its reason; the shard's other answers parse."""
    deep = "[" * 20_000 + "]" * 20_000
    deep_objects = '{"rating": ' * 5_000 + "4" + "}" * 5_000
    argument_string = json.dumps(deep)  # the arguments as a JSON string holding the nesting
    rows = {
        "tool_call": (
            "",
            canonical_json([{"name": "submit_rating", "arguments": {"rating": 4}}])[:-2]
            + ', "extra": '
            + deep
            + "}]",
            True,
        ),
        "argument_string": (
            "",
            '[{"name": "submit_rating", "arguments": ' + argument_string + "}]",
            True,
        ),
        "json": (deep_objects, None, True),
        "text": ("My rating: " + deep_objects, None, False),
        "long": ("4 " * 500_000, None, False),
        "fine": ("4", None, False),
    }
    completion, tool_calls, constrained = (list(c) for c in zip(*rows.values(), strict=True))
    table = parse_responses(
        responses(len(rows), completion=completion, tool_calls=tool_calls, constrained=constrained),
        "rating",
    )
    reasons = dict(zip(rows, table["parse_error"], strict=True))
    assert reasons == {
        "tool_call": "too_deep",
        "argument_string": "too_deep",
        "json": "too_deep",
        "text": "too_deep",
        "long": "too_long",
        "fine": None,
    }
    assert table["answer"].to_list()[-1] == 4
    assert set(table["answer_source"]) == {"tool_call", "json", "text"}
    assert {"too_deep", "too_long"} <= set(get_kind("rating").reasons)


def test_outcome_tables_have_the_common_columns_then_the_kinds() -> None:
    for kind in ("binary", "usd", "race", "label", "rating", "ranking"):
        out = parse_responses(responses(2, completion=["Yes", "4"]), kind)
        assert out.schema == pl.Schema(outcome_schema(kind))
        assert list(out.columns)[: len(COMMON_COLUMNS)] == list(COMMON_COLUMNS)
    binary = outcome_schema("binary")
    assert list(binary)[len(COMMON_COLUMNS) :] == ["answer", "p_affirmative", "answer_mass"]
    assert list(outcome_schema("ranking"))[len(COMMON_COLUMNS) :] == ["ranks", "tie", "n_ranked"]
    assert outcome_schema("ranking")["ranks"] == pl.List(pl.Int64)


def test_study_one_answers_parse_as_before() -> None:
    texts = ["Yes", "no.", "Yes or No", "", "Maybe.", "I can't provide medical advice.", "No"]
    out = parse_responses(responses(len(texts), completion=texts), "binary")
    old = parse_answers(pl.Series(texts), "binary")
    assert out["answer"].to_list() == old["outcome"].to_list()
    assert out["parse_error"].to_list() == old["parse_error"].to_list()
    salaries = ["$120,000", "$50/hr", "No idea.", "120k"]
    usd = parse_responses(responses(4, completion=salaries), "usd")
    assert usd["answer"].to_list() == parse_answers(pl.Series(salaries), "usd")["outcome"].to_list()


def _logprobs(scores: dict[str, float]) -> str:
    return canonical_json(scores)


def test_binary_probability_is_the_old_formula() -> None:
    rng = random.Random(7)
    pairs = [(math.log(rng.random()), math.log(rng.random())) for _ in range(200)]
    pairs += [(-0.01, -50.0), (-800.0, -800.0), (0.0, -math.inf)]
    raw = [_logprobs({YES.key(): y, NO.key(): n}) for y, n in pairs]
    out = parse_responses(responses(len(raw), option_logprobs=raw), "binary")
    # the old outcomes.py, on p_yes / p_no columns holding exp of the option logprobs
    old = pl.DataFrame(
        {"p_yes": [math.exp(y) for y, _ in pairs], "p_no": [math.exp(n) for _, n in pairs]}
    ).select(
        p_affirmative=pl.when(pl.col("p_yes") + pl.col("p_no") > 0).then(
            pl.col("p_yes") / (pl.col("p_yes") + pl.col("p_no"))
        ),
        answer_mass=pl.col("p_yes") + pl.col("p_no"),
    )
    assert out["p_affirmative"].to_list() == old["p_affirmative"].to_list()
    assert out["answer_mass"].to_list() == old["answer_mass"].to_list()
    assert out["p_affirmative"][-2] is None and out["answer_mass"][-2] == 0.0
    assert out["p_affirmative"][-1] == 1.0


def test_option_scores_are_null_without_logprobs() -> None:
    raw = [None, _logprobs({YES.key(): -0.1}), _logprobs({"Yes": -0.1, "No": -2.0})]
    out = parse_responses(responses(3, completion=["Yes"] * 3, option_logprobs=raw), "binary")
    assert out["p_affirmative"].null_count() == 3 and out["answer_mass"].null_count() == 3
    assert out["answer"].to_list() == [1.0] * 3
    rating = parse_responses(responses(1, completion=["4"]), "rating")
    scores = rating.select("^p_rating_.*$", "expected_rating", "rating_mass")
    assert scores.width == 7 and scores.null_count().row(0) == (1,) * 7


def test_rating_scores_are_normalised_and_give_the_expected_rating() -> None:
    probabilities = [0.05, 0.1, 0.15, 0.3, 0.2]  # mass 0.8
    raw = _logprobs({str(k): math.log(p) for k, p in enumerate(probabilities, start=1)})
    out = parse_responses(responses(1, completion=["4"], option_logprobs=[raw]), "rating")
    row = out.row(0, named=True)
    shares = [row[f"p_rating_{k}"] for k in range(1, 6)]
    assert math.fsum(shares) == pytest.approx(1.0, abs=1e-12)
    for share, p in zip(shares, probabilities, strict=True):
        assert share == pytest.approx(p / 0.8, abs=1e-12)
    expected = sum(k * p for k, p in enumerate(probabilities, start=1)) / 0.8
    assert abs(row["expected_rating"] - expected) < 1e-12
    assert row["rating_mass"] == pytest.approx(0.8, abs=1e-12)
    assert row["answer"] == 4.0


def test_rating_scores_follow_the_scale() -> None:
    rng = random.Random(3)
    logprobs = {str(k): -rng.random() * 5 for k in range(1, 11)}
    out = parse_responses(
        responses(1, completion=["7"], option_logprobs=[_logprobs(logprobs)]),
        "rating",
        {"scale": 10},
    )
    row = out.row(0, named=True)
    weights = {k: math.exp(logprobs[str(k)]) for k in range(1, 11)}
    mass = sum(weights.values())
    assert abs(row["expected_rating"] - sum(k * w for k, w in weights.items()) / mass) < 1e-12
    assert abs(math.fsum(row[f"p_rating_{k}"] for k in range(1, 11)) - 1.0) < 1e-12


def test_label_scores_sum_to_one() -> None:
    options = answer_spec("race").options
    raw = _logprobs(dict(zip([o.key() for o in options], [-0.5, -1.5, -3.0], strict=True)))
    out = parse_responses(responses(1, completion=["Black"], option_logprobs=[raw]), "race")
    row = out.row(0, named=True)
    shares = [row["p_label_black"], row["p_label_white"], row["p_label_unknown"]]
    assert abs(math.fsum(shares) - 1.0) < 1e-12
    assert shares[0] > shares[1] > shares[2]
    mass = math.exp(-0.5) + math.exp(-1.5) + math.exp(-3.0)
    assert row["label_mass"] == pytest.approx(mass, rel=1e-15)
    assert row["p_label_black"] == pytest.approx(math.exp(-0.5) / mass, rel=1e-15)
    assert row["answer_label"] == "Black"


def test_old_shards_without_the_new_columns_read_as_text() -> None:
    shard = responses(2, completion=["Yes", "no"]).drop(
        "tool_calls", "constrained", "option_logprobs"
    )
    out = parse_responses(shard, "binary")
    assert out["answer"].to_list() == [1.0, 0.0]
    assert out["constrained"].to_list() == [False, False]
    assert out["answer_source"].to_list() == ["text", "text"]
    assert out["p_affirmative"].null_count() == 2


def test_bad_input_is_an_input_error() -> None:
    with pytest.raises(InputError, match="field 'completion'"):
        parse_responses(responses(1).drop("completion"), "binary")
    with pytest.raises(InputError, match="field 'option_logprobs'"):
        parse_responses(responses(1, option_logprobs=["not json"]), "binary")
    with pytest.raises(InputError, match="field 'completion'"):
        parse_responses(responses(1).with_columns(completion=pl.lit(1)), "binary")


def test_parse_response_files_writes_one_table(tmp_path: Path) -> None:
    shards = []
    for i, texts in enumerate([["B > A > C > D", "A = B = C = D"], ["1. C 2. D 3. A 4. B"]]):
        path = tmp_path / f"{i}.parquet"
        responses(len(texts), completion=texts).with_columns(
            prompt_uid=pl.lit(f"s{i}") + pl.col("prompt_uid")
        ).write_parquet(path)
        shards.append(path)
    out_path = tmp_path / "out" / "ranking.parquet"
    written = parse_response_files(
        shards, "ranking", {"candidates": ["A", "B", "C", "D"]}, out_path
    )
    assert pl.read_parquet(out_path).equals(written)
    assert written["ranks"].to_list() == [[2, 1, 3, 4], [1, 1, 1, 1], [3, 4, 1, 2]]
    assert written["tie"].to_list() == [False, True, False]
    assert [p.name for p in out_path.parent.iterdir()] == ["ranking.parquet"]
    with pytest.raises(InputError, match="no response shards"):
        parse_response_files([], "ranking", {}, out_path)
