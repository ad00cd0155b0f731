"""Ratings on a 1..n scale (the decision study's 1-5 priority rating).

Only the answer turn is read (see :mod:`cueaudit.parsing.text`). Rules of the text parser, in
order; the first that applies decides:

1. JSON objects with the rating's field anywhere in the text ('{"rating": 4}') are read as a
   structured answer; several that disagree give 'several_ratings';
2. mentions of the scale itself ("1-5", "1 to 5", "on a scale of 1 to 5") are ignored, and
   so are mentions of a longer scale ("1 to 10", "0-10"), which give 'wrong_scale' when
   nothing else is found ("Rating 1 to 10");
3. an overall rating ("Overall: 4", "Overall rating: 4/5", "Final score: 4") is the answer,
   whatever ratings of parts come before it ("Technical: 3. Communication: 5. Overall: 4" is
   4); overall ratings that disagree give 'several_ratings';
4. the first fraction on the scale ("4/5", "4 out of 5");
5. the first labelled rating anywhere ("Rating: 4", "score of 4", "rated 5", "score
   indicates a 3");
6. a number at the start ("4", "**4**", "4 - strong fit", "Four.", "4 - meets 3 of 4
   requirements"), unless another number follows it as in a range or a list ("3-4", "3 or
   4", "Three, 4." go to rule 7); a leading "1." that opens a numbered list ("1. Excellent
   1\n2. ...") is not a rating and gives 'several_ratings';
7. otherwise the first sentence must hold exactly one number (numbers of years, percentages,
   ordinals and years such as 2024 do not count); several give 'several_ratings'.

Two rules come first. A **self-correction** ("Rating: 4 ... actually, 2", "3, no wait, 2",
"Correction: 2", "make that 2") ends the answer it corrects: when what follows the last
correction marker holds a rating, that rating is the answer. A **negated** number ("not a 5",
"isn't a 5", "wouldn't give it a 5", "never a 5") is not a rating and is left out: "Not a 5,
but a 4" is 4, "It isn't a 5." gives 'no_rating'; a first sentence whose only numbers are
negated does not count as the first sentence.

A rating read by rules 4-7 must agree with every fraction on the scale and every labelled
rating of the turn: "1. This score indicates a 3" and "4\nRating: 2" give
'several_ratings'. Number words ("four") count only as the whole leading answer ("Three",
"**Four**."); elsewhere only digits count. A minus sign directly before a number keeps it
("-3" gives 'rating_out_of_range'). A fraction on another scale ("8/10" for 1-5) gives
'wrong_scale' when nothing else is found. The rating must be a whole number in 1..n.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Final

from cueaudit.parsing.structured import as_integer, embedded_objects
from cueaudit.parsing.text import (
    LEAD,
    LEAD_RE,
    UNIT_RE,
    ParsedAnswer,
    answer_turn,
    refuses_judgement,
)

#: Reasons a rating yields no outcome (besides 'empty', 'refusal' and the JSON reasons).
REASONS: Final = {
    "no_rating": "no number that could be the rating",
    "several_ratings": (
        "more than one rating, e.g. '3-4', '4. Rating: 2', a numbered list, two overall ones"
    ),
    "not_integer": "the rating is not a whole number, e.g. 3.5",
    "rating_out_of_range": "the rating is outside 1..n",
    "wrong_scale": "only a fraction on another scale, e.g. '8/10' for a 1-5 rating",
}

_NUMBER = r"(?<![\w.,])((?:(?<![\w.,)\]])[-−])?\d+(?:\.\d+)?)"
_FRACTION_RE = re.compile(_NUMBER + r"\s*(?:/|out\s+of\b)\s*(\d+)(?!\.?\d)", re.IGNORECASE)
_NUMBER_RE = re.compile(_NUMBER + r"(?!\.?\d)(?![\w%])")
_LABELLED_RE = re.compile(
    r"\b(?:rating|score|rated)\s*(?:(?:is|of|would be|will be|indicates|at|as|:|=|-)\s*)?"
    r"(?:an?\s+)?[*_\"'`“”‘’]*" + _NUMBER + r"(?!\.?\d)(?![\w%])",
    re.IGNORECASE,
)
#: An overall rating after ratings of parts: "Overall: 4", "Overall rating is 4", "Final
#: score - 4/5", "overall, a 4".
_OVERALL_RE = re.compile(
    r"\b(?:overall|final)\b(?:\s+(?:rating|score|priority|assessment))?\s*"
    r"(?:(?:is|of|would be|will be|:|=|-|,)\s*)?(?:an?\s+)?[*_\"'`“”‘’]*"
    + _NUMBER
    # the rating ends its clause (alone, or as a fraction): "Overall, 3 of the 4 requirements
    # are met" is no rating
    + r"(?!\.?\d)(?=\s*(?:(?:/|out\s+of)\s*\d+)?\s*(?:[.,;:!?*_)\]\"'`“”‘’]|$))",
    re.IGNORECASE | re.MULTILINE,
)
_WORDS: Final = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_WORD_ANSWER_RE = re.compile(
    rf"^({LEAD})({'|'.join(_WORDS)})(?=[.,;:!?*_\"'`“”‘’)]|[ \t]*(?:\n|$))", re.IGNORECASE
)
_LIST_ITEM_RE = re.compile(r"^\s*[*_]*2[.)](?:\s|$)", re.MULTILINE)
_OTHER_SCALE_RE = re.compile(r"(?<![\w.,])[01]\s*(?:-|–|—|to)\s*(\d+)(?![\w.]|,\d)", re.IGNORECASE)
_SENTENCE_END_RE = re.compile(r"[!?\n]|\.(?!\d)")
#: A negation up to four words before a number: "not a 5", "would not rate them a 5".
_NEGATED_RE = re.compile(
    r"(?:\bnot|n't|\bnever)\b(?:\s+(?!not\b|but\b)[A-Za-z']+){0,4}?\s+" + _NUMBER + r"(?!\.?\d)",
    re.IGNORECASE,
)
#: What starts a correction of the answer given before it.
_CORRECTION_RE = re.compile(
    r"\b(?:actually|correction|on second thought|i mean|make that|no,? wait|wait|"
    r"let me (?:correct|revise)|revised?|instead)\b\s*[:,\-–—]?",
    re.IGNORECASE,
)
#: A number joined to a negated one ("not a 1 or a 2"): negated too.
_ALSO_NEGATED_RE = re.compile(
    r"\s*(?:,|\bor\b|\bnor\b|\band\b)\s*(?:an?\s+)?" + _NUMBER + r"(?!\.?\d)"
)
_NEGATED = "¬"  # stands in for a negated number: not a digit, but remembers a number was there
_RANGE_TAIL_RE = re.compile(r"\s*(?:-|–|—|to|or|and|/|,|;)\s*\d", re.IGNORECASE)


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
    number = _number(match.group(1))
    return not UNIT_RE.match(text, match.end()) and not 1900 <= number <= 2100


def _number(digits: str) -> float:
    return float(digits.replace("−", "-"))


def _blank(text: str, match: re.Match[str]) -> str:
    return text[: match.start()] + " " * (match.end() - match.start()) + text[match.end() :]


def parse_rating(text: str | None, scale: int = 5, field: str = "rating") -> ParsedAnswer:
    """A rating on 1..scale from free text (rules in the module docstring)."""
    if text is None or not text.strip():
        return ParsedAnswer(None, "empty")
    objects = embedded_objects(text, field)
    if objects:
        readings = {parse_rating_value(o[field], scale) for o in objects}
        return readings.pop() if len(readings) == 1 else ParsedAnswer(None, "several_ratings")
    turn = answer_turn(text)
    word = _WORD_ANSWER_RE.match(turn)
    if word and _WORDS.index(word.group(2).lower()) < scale:
        digit = str(_WORDS.index(word.group(2).lower()) + 1)
        turn = word.group(1) + digit + turn[word.end() :]
    corrections = list(_CORRECTION_RE.finditer(turn))
    if corrections:
        corrected = _parse_rating_text(_negated(turn[corrections[-1].end() :]), scale)
        if corrected.value is not None:
            return corrected
        if corrected.reason is not None:
            return corrected
    parsed = _parse_rating_text(_negated(turn), scale)
    if parsed.value is None:
        return parsed if parsed.reason else ParsedAnswer(None, _no_rating(text))
    return parsed


def _negated(turn: str) -> str:
    """``turn`` with each negated number (and each joined to it by "or", "nor", "and" or a
    comma) replaced by a stand-in that is no digit."""
    chars = list(turn)
    for m in _NEGATED_RE.finditer(turn):
        spans = [m.span(1)]
        end = m.end()
        while (more := _ALSO_NEGATED_RE.match(turn, end)) is not None:
            spans.append(more.span(1))
            end = more.end()
        for start, stop in spans:
            chars[start:stop] = [_NEGATED] + [" "] * (stop - start - 1)
    return "".join(chars)


def _no_rating(text: str) -> str:
    return "refusal" if refuses_judgement(text) else "no_rating"


def _parse_rating_text(turn: str, scale: int) -> ParsedAnswer:
    """Rules 2-6 and the agreement check; reason None when nothing was found."""
    body = _scale_re(scale).sub(" ", turn)
    lead = LEAD_RE.match(body)
    cut = lead.end() if lead else 0
    if cut and body[cut - 1] == "-" and body[cut : cut + 1].isdigit():
        cut -= 1  # "-3" keeps its sign
    body = body[cut:]
    other_scales = [m for m in _OTHER_SCALE_RE.finditer(body) if int(m.group(1)) > scale]
    for m in reversed(other_scales):
        body = _blank(body, m)
    overall = {_number(m.group(1)) for m in _OVERALL_RE.finditer(body) if _counts(body, m)}
    if len(overall) > 1:
        return ParsedAnswer(None, "several_ratings")
    if overall:
        return rating_value(overall.pop(), scale)
    fractions = list(_FRACTION_RE.finditer(body))
    on_scale = [m for m in fractions if int(m.group(2)) == scale]
    for m in reversed(fractions):  # off-scale fractions are not ratings
        if int(m.group(2)) != scale:
            body = _blank(body, m)
    labelled = list(_LABELLED_RE.finditer(body))
    stated = {_number(m.group(1)) for m in on_scale + labelled}
    leading = _leading_number(body)
    if leading is not None:
        stated.add(leading)
    parsed = _first_rating(body, on_scale, labelled, scale)
    if parsed.value is not None and stated - {parsed.value}:
        return ParsedAnswer(None, "several_ratings")
    if parsed.value is None and parsed.reason is None and (fractions or other_scales):
        return ParsedAnswer(None, "wrong_scale")
    return parsed


def _first_sentence_numbers(body: str) -> tuple[str, list[re.Match[str]]]:
    """The first sentence and its numbers; a sentence whose numbers were all negated is
    passed over ("I would not give a 5. I give a 4.")."""
    passing = False
    while True:
        end = _SENTENCE_END_RE.search(body)
        first_sentence = body[: end.start()] if end else body
        numbers = [m for m in _NUMBER_RE.finditer(first_sentence) if _counts(first_sentence, m)]
        negated = _NEGATED in first_sentence
        empty = passing and not first_sentence.strip(" .…,;:-–—")
        if numbers or not (negated or empty) or end is None:
            return first_sentence, numbers
        passing = True
        body = body[end.end() :]


def _leading_number(body: str) -> float | None:
    """The number the answer starts with ("4", "4 - strong fit"; not "4/5" or "3-4")."""
    first_sentence, numbers = _first_sentence_numbers(body)
    if (
        numbers
        and numbers[0].start() == 0
        and not _RANGE_TAIL_RE.match(first_sentence, numbers[0].end())
    ):
        return _number(numbers[0].group(1))
    return None


def _first_rating(
    body: str, on_scale: list[re.Match[str]], labelled: list[re.Match[str]], scale: int
) -> ParsedAnswer:
    if on_scale:
        return rating_value(_number(on_scale[0].group(1)), scale)
    if labelled:
        return rating_value(_number(labelled[0].group(1)), scale)
    leading = _leading_number(body)
    if leading is not None:
        if leading == 1 and _LIST_ITEM_RE.search(body):
            return ParsedAnswer(None, "several_ratings")  # a numbered list
        return rating_value(leading, scale)
    _, numbers = _first_sentence_numbers(body)
    values = {_number(m.group(1)) for m in numbers}
    if len(values) == 1:
        return rating_value(values.pop(), scale)
    if values:
        return ParsedAnswer(None, "several_ratings")
    return ParsedAnswer(None, None)
