from __future__ import annotations

from typing import Any

import pytest

from cueaudit.parsing import ParsedAnswer, get_kind, parse_rating, parse_rating_value

RATING_TEXT_CASES = [
    ("4", 4.0, None),
    ("1", 1.0, None),
    ("5", 5.0, None),
    ("**3**", 3.0, None),
    ("4.", 4.0, None),
    ("4.0", 4.0, None),
    ("4/5", 4.0, None),
    ("4 / 5", 4.0, None),
    ("I would give this applicant 2 out of 5.", 2.0, None),
    ("Rating: 4", 4.0, None),
    ("Priority rating: **5**", 5.0, None),
    ("The profile is strong.\nRating: 5", 5.0, None),
    ("My score is 2 because of the gaps.", 2.0, None),
    ("4 - a strong fit", 4.0, None),
    ("I would rate this request 3.", 3.0, None),
    ("On a scale of 1 to 5, I'd rate it 4.", 4.0, None),
    ("(1-5): 2", 2.0, None),
    ("The candidate has 5 years of experience, so 3.", 3.0, None),
    ("With 20% more income, 4", 4.0, None),
    ("In 2024 terms, 3", 3.0, None),
    ('{"rating": 3}', 3.0, None),
    ('Here is my answer: {"rating": 2, "reason": "thin file"}', 2.0, None),
    ("", None, "empty"),
    ("   ", None, "empty"),
    (None, None, "empty"),
    ("Strong candidate overall.", None, "no_rating"),
    ("3-4", None, "several_ratings"),
    ("Either 3 or 4", None, "several_ratings"),
    ("4 or 5", None, "several_ratings"),
    ("3.5", None, "not_integer"),
    ("4.5/5", None, "not_integer"),
    ("0", None, "rating_out_of_range"),
    ("6", None, "rating_out_of_range"),
    ("Rating: 7", None, "rating_out_of_range"),
    ("8/10", None, "wrong_scale"),
    ("I can't rate people on their names.", None, "refusal"),
    ("As an AI, I cannot make that call.", None, "refusal"),
    ('{"rating": 9}', None, "rating_out_of_range"),
    # several ratings of parts, then an overall one: the overall one (it used to give the
    # first part's 3 here); overall ratings that disagree are several
    ("Technical: 3\nCommunication: 5\nOverall: 4", 4.0, None),
    ("Experience: 4/5. Education: 3/5. Leadership: 2/5. Overall rating: 4", 4.0, None),
    ("Skills 5, experience 3, overall: 2", 2.0, None),
    ("**Overall rating:** 4/5", 4.0, None),
    ("Overall: 4. Final score: 2", None, "several_ratings"),
    ("Overall, 3 of the 4 requirements are met. Rating: 2", 2.0, None),
]


@pytest.mark.parametrize(("text", "value", "reason"), RATING_TEXT_CASES)
def test_parse_rating_text(text: str | None, value: float | None, reason: str | None) -> None:
    assert parse_rating(text) == ParsedAnswer(value, reason)


RATING_VALUE_CASES: list[tuple[Any, float | None, str | None]] = [
    (4, 4.0, None),
    (1, 1.0, None),
    (5.0, 5.0, None),
    ("3", 3.0, None),
    (" 2 ", 2.0, None),
    (0, None, "rating_out_of_range"),
    (6, None, "rating_out_of_range"),
    (-1, None, "rating_out_of_range"),
    (3.5, None, "not_integer"),
    ("3.5", None, "not_integer"),
    ("four", None, "invalid_value"),
    (True, None, "invalid_value"),
    (None, None, "invalid_value"),
    ([4], None, "invalid_value"),
]


@pytest.mark.parametrize(("value", "rating", "reason"), RATING_VALUE_CASES)
def test_parse_rating_value(value: Any, rating: float | None, reason: str | None) -> None:
    assert parse_rating_value(value) == ParsedAnswer(rating, reason)


def test_rating_scale_is_a_setting() -> None:
    assert parse_rating("8/10", scale=10) == ParsedAnswer(8.0)
    assert parse_rating("7", scale=10) == ParsedAnswer(7.0)
    assert parse_rating("4/5", scale=10) == ParsedAnswer(None, "wrong_scale")
    assert parse_rating("On a scale of 1-10: 9", scale=10) == ParsedAnswer(9.0)
    assert parse_rating_value(9, scale=7) == ParsedAnswer(None, "rating_out_of_range")
    kind = get_kind("rating", {"scale": 7})
    assert kind.parse_text("6").values == {"answer": 6.0}
    assert [o.key() for o in kind.options()] == ["1", "2", "3", "4", "5", "6", "7"]


def test_rating_field_name_is_a_setting() -> None:
    kind = get_kind("rating", {"argument": "priority"})
    assert kind.parse_text('{"priority": 2}').values == {"answer": 2.0}
    assert kind.parse_structured({"rating": 2}).reason == "missing_field"
    assert kind.parse_structured({"priority": "2"}).values == {"answer": 2.0}


def test_every_rating_reason_is_documented() -> None:
    reasons = get_kind("rating").reasons
    used = {r for _, _, r in RATING_TEXT_CASES + RATING_VALUE_CASES if r is not None}
    assert used <= set(reasons)
