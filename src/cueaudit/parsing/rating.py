"""Ratings on a 1..n scale (the decision study's 1-5 priority rating).

Rules of the text parser, in order; the first that applies decides:

1. a JSON object with the rating's field anywhere in the text ('{"rating": 4}') is read as a
   structured answer;
2. mentions of the scale itself ("1-5", "1 to 5", "on a scale of 1 to 5") are ignored;
3. the first fraction on the scale ("4/5", "4 out of 5");
4. the first labelled rating anywhere ("Rating: 4", "score of 4");
5. a number at the start ("4", "**4**", "4 - strong fit");
6. otherwise the first sentence must hold exactly one number (numbers of years, percentages,
   ordinals and years such as 2024 do not count); several give 'several_ratings'.

Only digits count ("four" is not read). A fraction on another scale ("8/10" for 1-5) gives
'wrong_scale' when nothing else is found. The rating must be a whole number in 1..n.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Final

from cueaudit.parsing.structured import as_integer, embedded_object
from cueaudit.parsing.text import LEAD_RE, UNIT_RE, ParsedAnswer, refuses_judgement

#: Reasons a rating yields no outcome (besides 'empty', 'refusal' and the JSON reasons).
REASONS: Final = {
    "no_rating": "no number that could be the rating",
    "several_ratings": "more than one number in the first sentence, e.g. '3-4'",
    "not_integer": "the rating is not a whole number, e.g. 3.5",
    "rating_out_of_range": "the rating is outside 1..n",
    "wrong_scale": "only a fraction on another scale, e.g. '8/10' for a 1-5 rating",
}

_NUMBER = r"(?<![\w.,])(\d+(?:\.\d+)?)"
_FRACTION_RE = re.compile(_NUMBER + r"\s*(?:/|out\s+of\b)\s*(\d+)(?!\.?\d)", re.IGNORECASE)
_NUMBER_RE = re.compile(_NUMBER + r"(?!\.?\d)(?![\w%])")
_LABELLED_RE = re.compile(
    r"\b(?:rating|score)\s*(?:is|of|:|=|-)?\s*"
    r"[*_\"'`“”‘’]*" + _NUMBER + r"(?!\.?\d)(?![\w%])",
    re.IGNORECASE,
)
_SENTENCE_END_RE = re.compile(r"[!?\n]|\.(?!\d)")
_RANGE_TAIL_RE = re.compile(r"\s*(?:-|–|—|to|or|/)\s*\d", re.IGNORECASE)


@functools.cache
def _scale_re(scale: int) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.,])1\s*(?:-|–|—|to)\s*{scale}(?![\w.]|,\d)", re.IGNORECASE)


def rating_value(number: float, scale: int) -> ParsedAnswer:
    """A stated number as a rating on 1..scale."""
    if not float(number).is_integer():
        return ParsedAnswer(None, "not_integer")
    if not 1 <= number <= scale:
        return ParsedAnswer(None, "rating_out_of_range")
    return ParsedAnswer(float(number))


def parse_rating_value(value: Any, scale: int = 5) -> ParsedAnswer:
    """The rating field of a JSON answer: an integer (4, 4.0) or a string of one ("4")."""
    if isinstance(value, str) and _NUMBER_RE.fullmatch(value.strip()):
        return rating_value(float(value.strip()), scale)
    if isinstance(value, float) and not value.is_integer():
        return ParsedAnswer(None, "not_integer")
    number = as_integer(value)
    if number is None:
        return ParsedAnswer(None, "invalid_value")
    return rating_value(number, scale)


def _counts(text: str, match: re.Match[str]) -> bool:
    """Whether a number is a candidate rating (not '5 years', not a year such as 2024)."""
    number = float(match.group(1))
    return not UNIT_RE.match(text, match.end()) and not 1900 <= number <= 2100


def parse_rating(text: str | None, scale: int = 5, field: str = "rating") -> ParsedAnswer:
    """A rating on 1..scale from free text (rules in the module docstring)."""
    if text is None or not text.strip():
        return ParsedAnswer(None, "empty")
    structured = embedded_object(text, field)
    if structured is not None:
        return parse_rating_value(structured[field], scale)
    body = LEAD_RE.sub("", _scale_re(scale).sub(" ", text), count=1)
    fractions = list(_FRACTION_RE.finditer(body))
    on_scale = [m for m in fractions if int(m.group(2)) == scale]
    if on_scale:
        return rating_value(float(on_scale[0].group(1)), scale)
    for m in reversed(fractions):  # off-scale fractions are not ratings
        body = body[: m.start()] + " " * (m.end() - m.start()) + body[m.end() :]
    labelled = _LABELLED_RE.search(body)
    if labelled:
        return rating_value(float(labelled.group(1)), scale)
    end = _SENTENCE_END_RE.search(body)
    first_sentence = body[: end.start()] if end else body
    numbers = [m for m in _NUMBER_RE.finditer(first_sentence) if _counts(first_sentence, m)]
    if (
        numbers
        and numbers[0].start() == 0
        and not _RANGE_TAIL_RE.match(first_sentence, numbers[0].end())
    ):
        return rating_value(float(numbers[0].group(1)), scale)
    values = {float(m.group(1)) for m in numbers}
    if len(values) == 1:
        return rating_value(values.pop(), scale)
    if values:
        return ParsedAnswer(None, "several_ratings")
    if fractions:
        return ParsedAnswer(None, "wrong_scale")
    return ParsedAnswer(None, "refusal" if refuses_judgement(text) else "no_rating")
