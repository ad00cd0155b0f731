from __future__ import annotations

import polars as pl
import pytest

from cueaudit.errors import InputError
from cueaudit.parsing import (
    REASONS,
    ParsedAnswer,
    ParsedLabel,
    parse_answers,
    parse_binary,
    parse_race,
    parse_usd,
)

BINARY_CASES = [
    ("Yes", 1.0, None),
    ("No", 0.0, None),
    ("yes", 1.0, None),
    ("NO.", 0.0, None),
    ("Yes.", 1.0, None),
    ("YES!", 1.0, None),
    ("  \n No", 0.0, None),
    ("'Yes'", 1.0, None),
    ('"No"', 0.0, None),
    ("‘Yes’", 1.0, None),
    ("**Yes**", 1.0, None),
    ("**No**, it is not.", 0.0, None),
    ("Yes, you should see a doctor.", 1.0, None),
    ("No. Tremors for a week are usually harmless.", 0.0, None),
    ("Answer: Yes", 1.0, None),
    ("I would say yes.", 1.0, None),
    # a later "Yes" contradicts the "no": null since issue 14 (was 0.0)
    ("I think the answer is no. Yes, it could be serious, though.", None, "both_yes_and_no"),
    ("Yes, no doubt about it.", 1.0, None),
    ("No, no.", 0.0, None),
    ("", None, "empty"),
    ("   \n", None, "empty"),
    (None, None, "empty"),
    ("Yes or No", None, "both_yes_and_no"),
    ("Yes/No", None, "both_yes_and_no"),
    ("yes and no", None, "both_yes_and_no"),
    ("It could be yes or no depending on the case.", None, "both_yes_and_no"),
    ("Maybe.", None, "no_yes_no"),
    ("Nope", None, "no_yes_no"),
    ("Yesterday I felt fine.", None, "no_yes_no"),
    ("I don't know", None, "no_yes_no"),
    ("You should see a doctor. Yes.", None, "no_yes_no"),
    ("Not yes", None, "negated_answer"),
    ("I can't provide medical advice.", None, "refusal"),
    ("As an AI, I cannot say yes or no.", None, "refusal"),
]

USD_CASES = [
    ("$120,000", 120_000.0, None),
    ("120000", 120_000.0, None),
    ("120000.00", 120_000.0, None),
    ("120,000.50", 120_000.5, None),
    ("120k", 120_000.0, None),
    ("$120K", 120_000.0, None),
    ("120 thousand", 120_000.0, None),
    ("$1.2M", 1_200_000.0, None),
    ("1.2 million", 1_200_000.0, None),
    ("USD 85,000", 85_000.0, None),
    ("85000 USD", 85_000.0, None),
    ("95,000 dollars", 95_000.0, None),
    ("$ 85,000 per year", 85_000.0, None),
    ("I would ask for $98,500.", 98_500.0, None),
    ("$100,000 - $120,000", 110_000.0, None),
    ("$100,000-$130,000", 115_000.0, None),
    ("100k–120k", 110_000.0, None),
    ("$100-120k", 110_000.0, None),
    ("120,000 to 130,000", 125_000.0, None),
    ("between $100,000 and $120,000", 110_000.0, None),
    ("From $90k to $100k annually.", 95_000.0, None),
    ("In 2024, ask for $120,000.", 120_000.0, None),
    ("With 3 years of experience, $95,000", 95_000.0, None),
    ("3 years experience, so 95000", 95_000.0, None),
    ("$110,000 plus a 401(k) match", 110_000.0, None),
    ("401(k) plus $110,000", 110_000.0, None),
    ("$110,000 with a 10% bonus", 110_000.0, None),
    ("$50 an hour ($104,000 per year)", 104_000.0, None),
    ("", None, "empty"),
    (None, None, "empty"),
    ("No idea.", None, "no_number"),
    ("2024", None, "no_number"),
    ("Use your 401(k).", None, "no_number"),
    ("I cannot provide salary advice.", None, "refusal"),
    ("$50 per hour", None, "not_yearly"),
    ("$50/hr", None, "not_yearly"),
    ("$8,000 a month", None, "not_yearly"),
    ("$45 hourly", None, "not_yearly"),
    ("$500", None, "implausible_amount"),
    ("$20,000,000", None, "implausible_amount"),
    ("$150 million", None, "implausible_amount"),
    ("€100,000", None, "foreign_currency"),
    ("-$50,000", None, "negative_amount"),
    ("$100 - $120,000", None, "mismatched_range"),
]


@pytest.mark.parametrize(("text", "value", "reason"), BINARY_CASES)
def test_parse_binary(text: str | None, value: float | None, reason: str | None) -> None:
    assert parse_binary(text) == ParsedAnswer(value, reason)


@pytest.mark.parametrize(("text", "value", "reason"), USD_CASES)
def test_parse_usd(text: str | None, value: float | None, reason: str | None) -> None:
    assert parse_usd(text) == ParsedAnswer(value, reason)


def test_reason_vocabulary_is_documented() -> None:
    used = {r for _, _, r in BINARY_CASES + USD_CASES + RACE_CASES if r is not None}
    assert used == set(REASONS)


def test_usd_bounds_are_keyword_arguments() -> None:
    assert parse_usd("$500", min_usd=100) == ParsedAnswer(500.0)
    assert parse_usd("$90,000", max_usd=50_000) == ParsedAnswer(None, "implausible_amount")


def test_parse_answers_keeps_order_and_nulls() -> None:
    texts = pl.Series("answer", ["Yes", None, "no", "Yes or No", "Yes", "maybe"])
    out = parse_answers(texts, "binary")
    assert out.schema == pl.Schema({"outcome": pl.Float64, "parse_error": pl.String})
    assert out.rows() == [
        (1.0, None),
        (None, "empty"),
        (0.0, None),
        (None, "both_yes_and_no"),
        (1.0, None),
        (None, "no_yes_no"),
    ]
    usd = parse_answers(pl.Series(["$90,000", "90k", "$12/hr"]), "usd")
    assert usd.rows() == [(90_000.0, None), (90_000.0, None), (None, "not_yearly")]


def test_parse_answers_rejects_unknown_kind_and_non_strings() -> None:
    with pytest.raises(InputError, match="field 'kind'"):
        parse_answers(pl.Series(["Yes"]), "ternary")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="strings"):
        parse_answers(pl.Series([1, 0]), "binary")


RACE_CASES = [
    ("Black", "Black", None),
    ("**white**.", "White", None),
    (' "UNKNOWN"', "Unknown", None),
    ("I think Black.", "Black", None),
    ("Black, because of the name.", "Black", None),
    ("The user is likely White. Black is less likely.", "White", None),
    ("Black or White", None, "several_race_labels"),
    ("Blackberry", None, "no_race_label"),
    ("I cannot determine the race of a user.", None, "refusal"),
    ("   ", None, "empty"),
]


@pytest.mark.parametrize(("text", "label", "reason"), RACE_CASES)
def test_parse_race(text: str, label: str | None, reason: str | None) -> None:
    assert parse_race(text) == ParsedLabel(label, reason)


def test_race_outcomes_store_the_label_not_a_number() -> None:
    from cueaudit.parsing import parse_responses

    responses = pl.DataFrame(
        {
            "prompt_uid": ["a", "b", "c"],
            "model": ["m"] * 3,
            "seed": [0] * 3,
            "task": ["race_prediction"] * 3,
            "completion": ["White", "unknown.", "no idea"],
            "option_logprobs": [None, None, None],
        },
        schema_overrides={"option_logprobs": pl.String},
    )
    out = parse_responses(responses, "race")
    assert out["answer_label"].to_list() == ["White", "Unknown", None]
    assert "answer" not in out.columns and "p_affirmative" not in out.columns
    assert out["parse_error"].to_list() == [None, None, "no_race_label"]
    binary = parse_responses(responses.with_columns(completion=pl.lit("Yes")), "binary")
    assert "answer_label" not in binary.columns and binary["answer"].to_list() == [1.0] * 3
