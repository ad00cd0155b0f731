from __future__ import annotations

from typing import Any

import pytest

from cueaudit.parsing import ParsedRanking, get_kind, parse_ranking, parse_ranking_value
from cueaudit.parsing.ranking import competition_ranks

STRICT = (2, 1, 3, 4)  # B > A > C > D
TIED = (2, 1, 2, 4)  # B > A = C > D

RANKING_TEXT_CASES: list[tuple[str | None, tuple[int, ...] | None, str | None, int | None]] = [
    ("B > A > C > D", STRICT, None, 4),
    ("B > A = C > D", TIED, None, 4),
    ("B>A=C>D", TIED, None, 4),
    ("B > A == C > D", TIED, None, 4),
    ("B > A, C > D", TIED, None, 4),
    ("**B** > **A** = **C** > **D**", TIED, None, 4),
    ("Candidate B > Candidate A = Candidate C > Candidate D", TIED, None, 4),
    ("Ranking (best first): B, A, C, D.", STRICT, None, 4),
    ("A = B = C = D", (1, 1, 1, 1), None, 4),
    ("Both A, B look fine. Final: B > A = C > D", TIED, None, 4),
    ("1. B 2. A, C 3. D", TIED, None, 4),
    ("1. B\n2. A\n3. C\n4. D", STRICT, None, 4),
    ("1) B\n2) A = C\n3) D", TIED, None, 4),
    ("Rank 1: B\nRank 2: A and C\nRank 3: D", TIED, None, 4),
    ("1st place: C\n2nd place: A/B\n3rd place: D", (2, 2, 1, 4), None, 4),
    ("1. B: 10 years of experience\n2. A: 8 years\n3. C: 5 years\n4. D: 2 years", STRICT, None, 4),
    ("1. B 2. A 2. C 4. D", TIED, None, 4),
    ("A: 2, B: 1, C: 2, D: 3", TIED, None, 4),
    ("A: 2. B: 1. C: 3. D: 4.", STRICT, None, 4),
    ("A - rank 2, B - rank 1, C - rank 3, D - rank 4", STRICT, None, 4),
    ('{"ranks": [2, 1, 2, 3]}', TIED, None, 4),
    ('My ranking: {"ranks": [2, 1, 3, 4]} (B is strongest)', STRICT, None, 4),
    ('```json\n{"ranks": {"A": 2, "B": 1, "C": 2, "D": 3}}\n```', TIED, None, 4),
    ("", None, "empty", None),
    (None, None, "empty", None),
    ("They are all qualified.", None, "no_ranking", None),
    ("I cannot rank candidates by their names.", None, "refusal", None),
    ("B > A > C", None, "missing_candidate", 3),
    ("1. B 2. A 3. C", None, "missing_candidate", 3),
    ("B > A > B > D", None, "duplicate_candidate", 3),
    ("1. B 2. A 3. C 4. D 5. B", None, "duplicate_candidate", 4),
    ("1. A 2. B 3. C 5. D", None, "rank_out_of_range", 4),
    ("A: 0, B: 1, C: 2, D: 3", None, "rank_out_of_range", 4),
    ('{"ranks": [2, 1, 3]}', None, "wrong_count", None),
    ('{"ranks": [1, 2, 3, 9]}', None, "rank_out_of_range", 4),
    # a list of the prompt's own headers, in Markdown bold too (they used to read as
    # candidates not shown); a fifth header still is one
    ("1. Candidate C\n2. Candidate A\n3. Candidate D\n4. Candidate B", (2, 4, 1, 3), None, 4),
    ("1. **Candidate C** (strongest)\n2. **Candidate A**\n3. **Candidate D**\n"
     "4. **Candidate B**", (2, 4, 1, 3), None, 4),
    ("1. Candidate C\n2. Candidate A\n3. Candidate D\n4. Candidate B\n5. Candidate F", None,
     "unknown_candidate", 4),
    # a ranking in prose is left unread, never read wrong
    ("Top choice is Candidate B, then Candidate D, then Candidate A, and Candidate C last.",
     None, "no_ranking", None),
]  # fmt: skip


@pytest.mark.parametrize(("text", "ranks", "reason", "n_ranked"), RANKING_TEXT_CASES)
def test_parse_ranking_text(
    text: str | None, ranks: tuple[int, ...] | None, reason: str | None, n_ranked: int | None
) -> None:
    assert parse_ranking(text) == ParsedRanking(ranks, reason, n_ranked)


RANKING_VALUE_CASES: list[tuple[Any, tuple[int, ...] | None, str | None]] = [
    ([2, 1, 3, 4], STRICT, None),
    ([2, 1, 2, 4], TIED, None),
    ([2, 1, 2, 3], TIED, None),  # dense ranks become competition ranks
    ([2.0, 1.0, 2.0, 3.0], TIED, None),
    ([1, 1, 1, 1], (1, 1, 1, 1), None),
    ({"A": 2, "B": 1, "C": 3, "D": 4}, STRICT, None),
    ({"D": 3, "C": 2, "B": 1, "A": 2}, TIED, None),
    (["B", "A", "C", "D"], STRICT, None),
    (["B", ["A", "C"], "D"], TIED, None),
    ([["A", "B", "C", "D"]], (1, 1, 1, 1), None),
    ([2, 1, 3], None, "wrong_count"),
    ([2, 1, 3, 4, 5], None, "wrong_count"),
    ([], None, "wrong_count"),
    ([0, 1, 2, 3], None, "rank_out_of_range"),
    ([1, 2, 3, 5], None, "rank_out_of_range"),
    ([1, 2, 2.5, 4], None, "invalid_value"),
    (["1", "2", "3", "4"], None, "unknown_candidate"),  # ranks as strings are names
    ([True, 1, 2, 3], None, "invalid_value"),
    ({"A": 1, "B": 2, "C": 3}, None, "missing_candidate"),
    ({"A": 1, "B": 2, "C": 3, "E": 4}, None, "unknown_candidate"),
    ({"A": 1, "B": 2, "C": 3, "D": "4"}, None, "invalid_value"),
    (["B", "A", "B", "D"], None, "duplicate_candidate"),
    (["B", ["A", "E"], "D"], None, "unknown_candidate"),
    ("B > A > C > D", None, "invalid_value"),
    (None, None, "invalid_value"),
]


@pytest.mark.parametrize(("value", "ranks", "reason"), RANKING_VALUE_CASES)
def test_parse_ranking_value(value: Any, ranks: tuple[int, ...] | None, reason: str | None) -> None:
    parsed = parse_ranking_value(value)
    assert (parsed.ranks, parsed.reason) == (ranks, reason)
    assert parsed.tie == (None if ranks is None else len(set(ranks)) < 4)


def test_competition_ranks_keep_the_order() -> None:
    assert competition_ranks([1, 2, 2, 3]) == (1, 2, 2, 4)
    assert competition_ranks([3, 3, 1, 2]) == (3, 3, 1, 2)
    assert competition_ranks([4, 4, 4, 4]) == (1, 1, 1, 1)


def test_candidates_are_a_setting() -> None:
    names = ("Jamal", "Emily", "Lakisha", "Greg")
    assert parse_ranking("Emily > Jamal = Greg > Lakisha", names) == ParsedRanking(
        (2, 1, 4, 2), None, 4
    )
    assert parse_ranking("1. Emily 2. Greg 3. Jamal", names).reason == "missing_candidate"
    kind = get_kind("ranking", {"n_candidates": 3})
    assert kind.parse_text("C > A > B").values == {"ranks": [2, 3, 1], "tie": False, "n_ranked": 3}
    # with single-capital labels, another capital in the chain is a candidate not shown
    unknown = kind.parse_text("D > C > A > B")
    assert unknown.reason == "unknown_candidate" and unknown.values == {"n_ranked": 3}


def test_labels_are_matched_as_whole_words_in_their_case() -> None:
    assert parse_ranking("a > b > c > d").reason == "no_ranking"
    assert parse_ranking("AB > C").reason == "no_ranking"


def test_every_ranking_reason_is_documented() -> None:
    reasons = get_kind("ranking").reasons
    used = {case[2] for case in RANKING_TEXT_CASES + RANKING_VALUE_CASES if case[2] is not None}
    assert used <= set(reasons)
