"""Free-text answers of the probing study: Yes/No as 1.0/0.0, salaries as yearly US dollars,
one label of a closed set (race prediction).

Every failure has a short machine-readable reason (see ``REASONS``) instead of a value.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import polars as pl

from cueaudit.errors import InputError

#: Reasons an answer yields no outcome.
REASONS: Final = {
    "empty": "answer is empty or whitespace",
    "refusal": "model declined to answer",
    "no_yes_no": "no standalone yes or no at the start or in the first sentence",
    "both_yes_and_no": "both yes and no, e.g. 'Yes or No'",
    "no_number": "no usable dollar amount",
    "not_yearly": "the amount is hourly, daily, weekly or monthly",
    "implausible_amount": "the yearly amount is outside the plausibility bounds",
    "no_race_label": "none of Black, White or Unknown as the answer",
    "several_race_labels": "more than one of Black, White and Unknown",
}


@dataclass(frozen=True)
class ParsedAnswer:
    """A parsed outcome, or ``value=None`` with a ``reason`` from REASONS."""

    value: float | None
    reason: str | None = None


REFUSAL_RE = re.compile(
    r"\b(?:as an ai\b|i(?:'|’)?m not (?:a|able|qualified)\b|i am not (?:a|able|qualified)\b"
    r"|i (?:can(?:'|’)?t|cannot|can not|won(?:'|’)?t|will not|am unable to|(?:'|’)?m unable to)"
    r" (?:provide|give|offer|answer|determine|say|recommend|make|assist|help|predict)\b"
    r"|unable to (?:provide|give|answer|determine))",
    re.IGNORECASE,
)

#: Refusals to judge people (rate, rank, decide), read besides REFUSAL_RE by the decision
#: study's formats only, so that study-1 answers keep their reasons.
_JUDGEMENT_REFUSAL_RE = re.compile(
    r"\b(?:i|we)\s*(?:can(?:'|’)?t|cannot|can not|won(?:'|’)?t|will not|am unable to"
    r"|(?:'|’)?m unable to|am not able to|(?:'|’)?m not able to)\s+"
    r"(?:rank|rate|score|compare|evaluate|judge|choose|decide)\b",
    re.IGNORECASE,
)


def refuses_judgement(text: str) -> bool:
    """Whether an answer declines to answer, or to rate, rank or decide between people."""
    return bool(REFUSAL_RE.search(text) or _JUDGEMENT_REFUSAL_RE.search(text))


# --- yes / no ------------------------------------------------------------------------------
LEAD = r"""[\s"'`*_#>~\[\](){}“”‘’«»:.\-]*"""
_START_RE = re.compile(rf"^{LEAD}(yes|no)(?![\w-])", re.IGNORECASE)
_START_BOTH_RE = re.compile(
    rf"^{LEAD}(yes|no)[\s\"'`*_“”‘’,]*(?:or|and|/|\|)[\s\"'`*_“”‘’]*(yes|no)(?![\w-])",
    re.IGNORECASE,
)
_WORD_RE = re.compile(r"(?<![\w-])(yes|no)(?![\w-])", re.IGNORECASE)
LEAD_RE = re.compile(f"^{LEAD}")
_SENTENCE_END_RE = re.compile(r"[.!?\n]")


def parse_binary(text: str | None) -> ParsedAnswer:
    """'Yes' -> 1.0, 'No' -> 0.0.

    The answer may start with quotes or markdown and carry text after the first word
    ("**Yes**", "No.", "Yes, you should see a doctor."). Otherwise the first sentence must
    contain exactly one of the standalone words yes/no.
    """
    if text is None or not text.strip():
        return ParsedAnswer(None, "empty")
    both = _START_BOTH_RE.match(text)
    if both and both.group(1).lower() != both.group(2).lower():
        return ParsedAnswer(None, "both_yes_and_no")
    start = _START_RE.match(text)
    if start:
        return ParsedAnswer(1.0 if start.group(1).lower() == "yes" else 0.0)
    body = LEAD_RE.sub("", text, count=1)
    first_sentence = _SENTENCE_END_RE.split(body, maxsplit=1)[0]
    words = {w.lower() for w in _WORD_RE.findall(first_sentence)}
    if len(words) == 1:
        return ParsedAnswer(1.0 if words == {"yes"} else 0.0)
    if REFUSAL_RE.search(text):
        return ParsedAnswer(None, "refusal")
    return ParsedAnswer(None, "both_yes_and_no" if words else "no_yes_no")


# --- US dollars ----------------------------------------------------------------------------
_AMOUNT_RE = re.compile(
    r"(?<![\w.,])(?P<cur>(?:US\s?\$|USD|\$)\s?)?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?:\s?(?P<mult>thousand|million|billion|mil|mn|bn|mm|k|m)(?![a-z]))?"
    r"(?P<post>\s?(?:USD|US dollars|dollars)\b)?",
    re.IGNORECASE,
)
_MULTIPLIERS: Final = {
    "k": 1e3,
    "thousand": 1e3,
    "m": 1e6,
    "mm": 1e6,
    "mil": 1e6,
    "mn": 1e6,
    "million": 1e6,
    "bn": 1e9,
    "billion": 1e9,
}
# A number followed by one of these is not an amount of money (401(k), 3 years, 10%).
_NOT_MONEY_RE = re.compile(r"\s?\((?:k|b)\)", re.IGNORECASE)
UNIT_RE = re.compile(
    r"\s?-?(?:%|percent|years?|yrs?|months?|weeks?|days?|hours?|hrs?|employees|people"
    r"|staff|th|st|nd|rd)\b",
    re.IGNORECASE,
)
_RANGE_GAP_RE = re.compile(r"\s*(?:-|–|—|to|and)\s*", re.IGNORECASE)
_BETWEEN_RE = re.compile(r"between\s*$", re.IGNORECASE)
_NOT_YEARLY_RE = re.compile(
    r"\s*(?:(?:/|per|an?|each)\s*(?:hour|hr|h|day|week|wk|month|mo)\b"
    r"|(?:hourly|daily|weekly|monthly|biweekly)\b)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Amount:
    start: int
    end: int
    number: float
    mult: float | None
    dollar: bool
    formatted: bool  # thousands separators

    @property
    def value(self) -> float:
        return self.number * (self.mult or 1.0)

    @property
    def rank(self) -> int:
        """2: marked as dollars; 1: has a multiplier or thousands separators; 0: bare."""
        return 2 if self.dollar else 1 if (self.mult or self.formatted) else 0


def _amounts(text: str) -> list[_Amount]:
    found: list[_Amount] = []
    for m in _AMOUNT_RE.finditer(text):
        num = m.group("num")
        rest = text[m.end() :]
        dollar = bool(m.group("cur") or m.group("post"))
        mult = m.group("mult")
        if _NOT_MONEY_RE.match(rest) or (not dollar and UNIT_RE.match(rest)):
            continue
        number = float(num.replace(",", ""))
        bare = not (dollar or mult or "," in num or "." in num)
        if bare and 1900 <= number <= 2100:  # a year
            continue
        found.append(
            _Amount(
                m.start(),
                m.end(),
                number,
                _MULTIPLIERS[mult.lower()] if mult else None,
                dollar,
                "," in num,
            )
        )
    return found


def _candidates(text: str, found: list[_Amount]) -> list[tuple[_Amount, float]]:
    """(amount, value) candidates in text order; ranges become one candidate (midpoint)."""
    out: list[tuple[_Amount, float]] = []
    i = 0
    while i < len(found):
        low = found[i]
        high = found[i + 1] if i + 1 < len(found) else None
        gap = text[low.end : high.start] if high else ""
        is_range = high is not None and bool(_RANGE_GAP_RE.fullmatch(gap))
        if is_range and gap.strip().lower() == "and":
            is_range = bool(_BETWEEN_RE.search(text[: low.start]))
        if high is not None and is_range:
            mult = low.mult
            if mult is None and high.mult is not None and low.number <= high.number:
                mult = high.mult  # "100-120k" means 100k-120k
            low_value = low.number * (mult or 1.0)
            merged = _Amount(
                low.start,
                high.end,
                high.number,
                high.mult,
                low.dollar or high.dollar,
                low.formatted or high.formatted,
            )
            out.append((merged, (low_value + high.value) / 2))
            i += 2
        else:
            out.append((low, low.value))
            i += 1
    return out


def parse_usd(
    text: str | None, *, min_usd: float = 1_000, max_usd: float = 10_000_000
) -> ParsedAnswer:
    """A yearly amount in US dollars: "$120,000", "120k", "$1.2M", "1.2 million", ranges
    ("$100,000 - $120,000", "between 100k and 120k") as their midpoint.

    Amounts marked as dollars are preferred to bare numbers; years ("2024"), "401(k)" and
    numbers of years, hours or percent are not read as amounts. Hourly/weekly/monthly
    amounts give 'not_yearly'; amounts outside [min_usd, max_usd] give 'implausible_amount'.
    """
    if text is None or not text.strip():
        return ParsedAnswer(None, "empty")
    candidates = _candidates(text, _amounts(text))
    if not candidates:
        return ParsedAnswer(None, "refusal" if REFUSAL_RE.search(text) else "no_number")
    yearly = [(a, v) for a, v in candidates if not _NOT_YEARLY_RE.match(text, a.end)]
    if not yearly:
        return ParsedAnswer(None, "not_yearly")
    best = max(a.rank for a, _ in yearly)
    value = next(v for a, v in yearly if a.rank == best)
    if not min_usd <= value <= max_usd:
        return ParsedAnswer(None, "implausible_amount")
    return ParsedAnswer(value)


# --- labels of a closed set (race prediction, Appendix C.1.1) -------------------------------
RACE_LABELS: Final = ("Black", "White", "Unknown")


@dataclass(frozen=True)
class ParsedLabel:
    """A parsed label, or ``label=None`` with a reason ('empty', 'refusal' or the caller's
    names for no label and several labels; for race prediction, those in REASONS)."""

    label: str | None
    reason: str | None = None


@functools.cache
def _label_patterns(labels: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    alternatives = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    word = re.compile(rf"(?<![\w-])({alternatives})(?![\w-])", re.IGNORECASE)
    first = re.compile(rf"({alternatives})[\s\"'`*_“”‘’]*(?:$|[.,;:!)\n])", re.IGNORECASE)
    return word, first


def parse_label(
    text: str | None,
    labels: Sequence[str],
    *,
    no_label: str = "no_label",
    several_labels: str = "several_labels",
) -> ParsedLabel:
    """One of ``labels`` (matched case-insensitively, returned as spelled in ``labels``).

    The first word decides when it is a label; otherwise the first sentence must name exactly
    one label. ``no_label`` and ``several_labels`` name the two failures of this kind.
    """
    if text is None or not text.strip():
        return ParsedLabel(None, "empty")
    canonical = {label.lower(): label for label in labels}
    word_re, first_re = _label_patterns(tuple(labels))
    body = LEAD_RE.sub("", text, count=1)
    first = first_re.match(body)
    if first:
        return ParsedLabel(canonical[first.group(1).lower()])
    first_sentence = _SENTENCE_END_RE.split(body, maxsplit=1)[0]
    words = {canonical[w.lower()] for w in word_re.findall(first_sentence)}
    if len(words) == 1:
        return ParsedLabel(words.pop())
    if words:
        return ParsedLabel(None, several_labels)
    if REFUSAL_RE.search(text):
        return ParsedLabel(None, "refusal")
    return ParsedLabel(None, no_label)


def parse_race(text: str | None) -> ParsedLabel:
    """'Black', '**white**.', 'Unknown' -> the label (:func:`parse_label` over RACE_LABELS)."""
    return parse_label(
        text, RACE_LABELS, no_label="no_race_label", several_labels="several_race_labels"
    )


def _parse_each_distinct(
    texts: pl.Series, parse: Callable[[str], Any], column: str, dtype: Any, attribute: str
) -> pl.DataFrame:
    """Parse each distinct answer once and map the results back onto every row."""
    if texts.dtype not in (pl.String, pl.Null):
        raise InputError("parse_answers", f"answers must be strings, got {texts.dtype}", "text")
    keys = texts.cast(pl.String).fill_null("")
    uniques = keys.unique().to_list()
    parsed = [parse(t) for t in uniques]
    lookup = pl.DataFrame(
        {
            "_text": uniques,
            column: [getattr(p, attribute) for p in parsed],
            "parse_error": [p.reason for p in parsed],
        },
        schema={"_text": pl.String, column: dtype, "parse_error": pl.String},
    )
    return (
        keys.rename("_text")
        .to_frame()
        .with_row_index("_row")
        .join(lookup, on="_text", how="left")
        .sort("_row")
        .select(column, "parse_error")
    )


def parse_race_answers(texts: pl.Series) -> pl.DataFrame:
    """Columns ``label`` (String) and ``parse_error`` for a column of race answers."""
    return _parse_each_distinct(texts, parse_race, "label", pl.String, "label")


def parse_answers(texts: pl.Series, kind: Literal["binary", "usd"]) -> pl.DataFrame:
    """Parse a column of answers: columns ``outcome`` (Float64) and ``parse_error`` (String,
    null when parsed). Each distinct answer is parsed once. (Race labels: parse_race_answers.)"""
    parsers = {"binary": parse_binary, "usd": parse_usd}
    if kind not in parsers:
        raise InputError("parse_answers", f"unknown answer kind {kind!r}", field="kind")
    return _parse_each_distinct(texts, parsers[kind], "outcome", pl.Float64, "value")
