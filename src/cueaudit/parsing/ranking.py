"""Rankings of n candidates with ties (the decision study's four-candidate ranking).

A ranking is stored as ``ranks``: one rank per candidate in the order the prompt shows them,
1 = best, tied candidates sharing a rank. Ranks are normalised to standard competition
ranking ("1224"): a candidate's rank is 1 + the number of candidates placed strictly above
it, so "B > A = C > D" and the dense ranks [2, 1, 2, 3] both become [2, 1, 2, 4].

Structured answers (JSON, tool arguments): the ranking field (default ``ranks``) holds

- a list of n integers, the rank of each candidate in the order shown: ``[2, 1, 2, 3]``;
- an object from candidate to rank: ``{"A": 2, "B": 1, "C": 2, "D": 3}``;
- or a list of candidates best first, a nested list for a tie: ``["B", ["A", "C"], "D"]``.

Text answers are read in these forms (candidate labels are matched case-sensitively as whole
words, optionally after "Candidate"/"Applicant"/"Option"/"Profile"/"Patient" and inside
markdown or quotes):

1. a JSON object with the ranking field anywhere in the text, read as a structured answer;
2. a numbered list "1. B 2. A, C 3. D" (also "1) B", "Rank 1: B", "1st: B"), the candidates
   of one item joined by ",", "=", "/", "&" or "and" tie;
3. assignments "A: 2, B: 1, C: 2, D: 3" (also "A = 2", "A - rank 2", "A → 2nd"; not
   "A: 5 years");
4. a chain "B > A = C > D": ">" separates ranks and "=" (or "," when ">" is used) ties;
   without ">", "B, A, C, D" is a strict order. Only the chain naming most candidates counts.

A ranking in prose ("Top choice is B, then D, then A, and C last") is none of these forms and
is left unread ('no_ranking') rather than guessed.

When several forms match, the one that places most candidates wins (ties: the order above).
Labels must not be bare integers, which would read as ranks. With single-capital labels (A-D),
a form that also places another capital ("B > A > C > D > E", "E: 5" beside the four, "5. E",
"Candidate F") ranks a candidate that was not shown: 'unknown_candidate' ("I" is read as the
pronoun).

Only the answer turn is read (see :mod:`cueaudit.parsing.text`). Two readings that each
place every candidate once but disagree give 'several_rankings': two chains ("B > A > C > D.
Actually A > B > C > D"), a list and a chain, or two JSON objects with different ranks. A
minus sign before a rank ("A: -1") makes the assignment unreadable, so that candidate is
missing rather than ranked 1.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from cueaudit.parsing.structured import as_integer, embedded_objects
from cueaudit.parsing.text import UNIT_RE, answer_turn, refuses_judgement

DEFAULT_CANDIDATES: Final = ("A", "B", "C", "D")

#: Reasons a ranking yields no outcome (besides 'empty', 'refusal' and the JSON reasons).
REASONS: Final = {
    "no_ranking": "no ranking in a form the parser reads",
    "unknown_candidate": "a candidate that is not one of those shown ('B > A > C > D > E')",
    "duplicate_candidate": "a candidate placed more than once",
    "missing_candidate": "a candidate not placed",
    "rank_out_of_range": "a rank outside 1..n",
    "wrong_count": "a list of ranks whose length is not the number of candidates",
    "several_rankings": "two complete rankings that disagree, e.g. 'B > A > C > D. A > B > C > D'",
}


@dataclass(frozen=True)
class ParsedRanking:
    """Competition ranks per candidate, or ``ranks=None`` with a ``reason`` from REASONS.

    ``n_ranked`` counts the distinct known candidates the answer placed, also when the ranking
    is rejected (a missing candidate gives n - 1); None when no ranking was read at all.
    """

    ranks: tuple[int, ...] | None
    reason: str | None = None
    n_ranked: int | None = None

    @property
    def tie(self) -> bool | None:
        return None if self.ranks is None else len(set(self.ranks)) < len(self.ranks)


Placement = tuple[str, int]  # (candidate, stated rank)


def competition_ranks(stated: Sequence[int]) -> tuple[int, ...]:
    """1 + the number of strictly better stated ranks, for each candidate."""
    return tuple(1 + sum(other < rank for other in stated) for rank in stated)


def rank_placements(placements: Sequence[Placement], candidates: Sequence[str]) -> ParsedRanking:
    """Check (candidate, rank) pairs against the candidates and normalise the ranks."""
    placed = [candidate for candidate, _ in placements]
    n_ranked = len(set(placed) & set(candidates))
    if not set(placed) <= set(candidates):
        return ParsedRanking(None, "unknown_candidate", n_ranked)
    if len(set(placed)) < len(placed):
        return ParsedRanking(None, "duplicate_candidate", n_ranked)
    if n_ranked < len(candidates):
        return ParsedRanking(None, "missing_candidate", n_ranked)
    if not all(1 <= rank <= len(candidates) for _, rank in placements):
        return ParsedRanking(None, "rank_out_of_range", n_ranked)
    stated = dict(placements)
    return ParsedRanking(competition_ranks([stated[c] for c in candidates]), None, n_ranked)


def _tier_placements(tiers: Sequence[Sequence[str]]) -> list[Placement]:
    return [(candidate, i + 1) for i, tier in enumerate(tiers) for candidate in tier]


def parse_ranking_value(
    value: Any, candidates: Sequence[str] = DEFAULT_CANDIDATES
) -> ParsedRanking:
    """The ranking field of a JSON answer (the three forms in the module docstring)."""
    if isinstance(value, dict):
        ranks = {str(k): as_integer(v) for k, v in value.items()}
        if any(rank is None for rank in ranks.values()):
            return ParsedRanking(None, "invalid_value")
        return rank_placements([(c, r) for c, r in ranks.items() if r is not None], candidates)
    if not isinstance(value, list):
        return ParsedRanking(None, "invalid_value")
    integers = [as_integer(v) for v in value]
    if all(rank is not None for rank in integers):
        if len(value) != len(candidates):
            return ParsedRanking(None, "wrong_count")
        return rank_placements(
            [(c, r) for c, r in zip(candidates, integers, strict=True) if r is not None],
            candidates,
        )
    tiers = [[v] if isinstance(v, str) else v for v in value]
    if not all(isinstance(t, list) and all(isinstance(c, str) for c in t) for t in tiers):
        return ParsedRanking(None, "invalid_value")
    return rank_placements(_tier_placements(tiers), candidates)


@dataclass(frozen=True)
class _Patterns:
    label: re.Pattern[str]
    chain: re.Pattern[str]
    numbered: re.Pattern[str]
    assignment: re.Pattern[str]
    separator: re.Pattern[str]
    # a label of the same shape that is not one of the candidates ("E" beside A-D), right
    # after or before a chain, as an assignment or as a list item
    unknown_after: re.Pattern[str] | None
    unknown_before: re.Pattern[str] | None
    unknown_assignment: re.Pattern[str] | None
    unknown_item: re.Pattern[str] | None


_OPEN = r"[*_\"'`“”‘’(\[]*"
_CLOSE = r"[*_\"'`“”‘’)\]]*"
_PREFIX = r"(?:(?i:candidate|applicant|option|profile|patient)\s+)?"
_ORDINAL = r"(?:st|nd|rd|th)?"


@functools.cache
def _patterns(candidates: tuple[str, ...]) -> _Patterns:
    names = "|".join(re.escape(c) for c in sorted(candidates, key=len, reverse=True))
    label = rf"(?<!\w)(?:{names})(?!\w)"
    token = rf"{_OPEN}{_PREFIX}{_OPEN}{label}{_CLOSE}"
    joined = rf"{token}(?:\s*(?:,|=|/|&|(?i:and))\s*{token})*"
    others = _other_labels(candidates)
    unknown = (
        rf"(?:{_OPEN}(?i:candidate|applicant|option|profile|patient)\s+{_OPEN}[{others}]{_CLOSE}"
        rf"|{_OPEN}(?<!\w)[{others}](?!\w){_CLOSE})(?!\w)"
        if others
        else None
    )
    return _Patterns(
        unknown_after=re.compile(rf"\s*(?:>|==|=|,|;)\s*{unknown}") if unknown else None,
        unknown_before=re.compile(rf"{unknown}\s*(?:>|==|=|,|;)\s*$") if unknown else None,
        unknown_assignment=(
            re.compile(rf"{unknown}\s*(?::|=|->|→|-|–)\s*(?:(?i:rank(?:ed)?)\s*)?#?\d+")
            if unknown
            else None
        ),
        unknown_item=(
            re.compile(rf"(?<![\w.])(\d+){_ORDINAL}\s*[.):\-–]\s*{unknown}") if unknown else None
        ),
        label=re.compile(rf"(?<!\w)({names})(?!\w)"),
        chain=re.compile(rf"{token}(?:\s*(?:>|==|=|,|;)\s*{token})+"),
        numbered=re.compile(
            rf"(?<![\w.])(?:#|(?i:rank(?:ed)?)\s*)?(\d+){_ORDINAL}(?:\s*(?i:place))?"
            rf"\s*[.):\-–]\s*({joined})"
        ),
        assignment=re.compile(
            rf"({token})\s*(?::|=|->|→|-|–)\s*(?:(?i:rank(?:ed)?)\s*)?#?(\d+){_ORDINAL}(?!\.?\d)"
        ),
        separator=re.compile(rf"(?<!\w)({names})(?!\w)|(>|==|=|,|;)"),
    )


def _other_labels(candidates: tuple[str, ...]) -> str:
    """The capital letters that would be further candidates when the labels are single
    capitals (A-D: E-Z); "I" is left out, as the pronoun it usually is."""
    if not all(len(c) == 1 and c.isupper() for c in candidates):
        return ""
    return "".join(c for c in "ABCDEFGHJKLMNOPQRSTUVWXYZ" if c not in candidates)


def _names_unknown(text: str, form: str, spans: Sequence[re.Match[str]], p: _Patterns) -> bool:
    """Whether the text form read from ``spans`` also names a candidate that is not shown."""
    if form == "chain":
        assert p.unknown_after is not None and p.unknown_before is not None
        return any(
            p.unknown_after.match(text, m.end()) or p.unknown_before.search(text[: m.start()])
            for m in spans
        )
    pattern = p.unknown_assignment if form == "assignments" else p.unknown_item
    assert pattern is not None
    return pattern.search(text) is not None


def _chain_placements(span: str, patterns: _Patterns) -> list[Placement]:
    parts = [(m.group(1), m.group(2)) for m in patterns.separator.finditer(span)]
    breaks = {">"} if any(sep == ">" for _, sep in parts) else {",", ";"}
    tiers: list[list[str]] = [[]]
    for candidate, separator in parts:
        if candidate:
            tiers[-1].append(candidate)
        elif separator in breaks:
            tiers.append([])
    return _tier_placements(tiers)


def _text_forms(
    text: str, candidates: tuple[str, ...]
) -> tuple[list[list[Placement]], set[tuple[int, ...]], list[bool]]:
    """The placements each text form reads, in order of precedence, the ranks of every
    complete reading (a chain, the list, the assignments), and whether each form also names
    a candidate that is not shown."""
    p = _patterns(candidates)
    items = list(p.numbered.finditer(text))
    numbered = [
        (candidate, int(m.group(1))) for m in items for candidate in p.label.findall(m.group(2))
    ]
    assignments = [
        (p.label.findall(m.group(1))[-1], int(m.group(2)))
        for m in p.assignment.finditer(text)
        if not UNIT_RE.match(text, m.end())
    ]
    matches = list(p.chain.finditer(text))
    chains = [_chain_placements(m.group(0), p) for m in matches]
    longest_chain = max(chains, key=len, default=[])
    # a chain inside a list item ("1. A, B, C, D": all tied) is part of the list's reading
    free = [
        chain
        for chain, m in zip(chains, matches, strict=True)
        if not any(i.start() <= m.start() < i.end() for i in items)
    ]
    complete = set()
    for placements in (numbered, assignments, *free):
        ranks = rank_placements(placements, candidates).ranks if placements else None
        if ranks is not None:
            complete.add(ranks)
    longest = [m for c, m in zip(chains, matches, strict=True) if c is longest_chain]
    unknown = [
        bool(p.unknown_item) and bool(numbered) and _names_unknown(text, "numbered", items, p),
        bool(p.unknown_assignment)
        and bool(assignments)
        and _names_unknown(text, "assignments", [], p),
        bool(p.unknown_after) and bool(longest) and _names_unknown(text, "chain", longest, p),
    ]
    return [numbered, assignments, longest_chain], complete, unknown


def parse_ranking(
    text: str | None, candidates: Sequence[str] = DEFAULT_CANDIDATES, field: str = "ranks"
) -> ParsedRanking:
    """A ranking of ``candidates`` from free text (rules in the module docstring)."""
    if text is None or not text.strip():
        return ParsedRanking(None, "empty")
    objects = embedded_objects(text, field)
    if objects:
        readings = [parse_ranking_value(o[field], candidates) for o in objects]
        if len({r.ranks for r in readings if r.ranks is not None}) > 1:
            return ParsedRanking(None, "several_rankings", len(candidates))
        return next((r for r in readings if r.ranks is not None), readings[0])
    forms, complete, unknown = _text_forms(answer_turn(text), tuple(candidates))
    if len(complete) > 1:
        return ParsedRanking(None, "several_rankings", len(candidates))
    best = max(forms, key=len)  # max keeps the first of equally long forms
    if best:
        if unknown[forms.index(best)]:
            n_ranked = len({c for c, _ in best} & set(candidates))
            return ParsedRanking(None, "unknown_candidate", n_ranked)
        return rank_placements(best, candidates)
    return ParsedRanking(None, "refusal" if refuses_judgement(text) else "no_ranking")
