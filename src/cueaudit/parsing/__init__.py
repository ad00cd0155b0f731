"""Reading model answers into outcomes: one registry of outcome kinds for both studies.

- :mod:`~cueaudit.parsing.kinds`: the registry (``binary``, ``usd``, ``label``, ``race``,
  ``rating``, ``ranking``), each kind's answer spec, columns, parsers and null reasons;
- :mod:`~cueaudit.parsing.responses`: response shards to outcome tables;
- :mod:`~cueaudit.parsing.text`: the probing study's free-text parsers;
- :mod:`~cueaudit.parsing.rating`, :mod:`~cueaudit.parsing.ranking`: the decision study's;
- :mod:`~cueaudit.parsing.structured`: JSON answers and tool arguments.
"""

from cueaudit.parsing.kinds import (
    KINDS,
    NO,
    NULL_REASONS,
    YES,
    OutcomeKind,
    Parsed,
    answer_spec,
    get_kind,
)
from cueaudit.parsing.ranking import ParsedRanking, parse_ranking, parse_ranking_value
from cueaudit.parsing.rating import parse_rating, parse_rating_value
from cueaudit.parsing.responses import (
    COMMON_COLUMNS,
    outcome_schema,
    parse_response_files,
    parse_responses,
)
from cueaudit.parsing.text import (
    RACE_LABELS,
    REASONS,
    ParsedAnswer,
    ParsedLabel,
    parse_answers,
    parse_binary,
    parse_label,
    parse_race,
    parse_race_answers,
    parse_usd,
)

__all__ = [
    "COMMON_COLUMNS",
    "KINDS",
    "NO",
    "NULL_REASONS",
    "RACE_LABELS",
    "REASONS",
    "YES",
    "OutcomeKind",
    "Parsed",
    "ParsedAnswer",
    "ParsedLabel",
    "ParsedRanking",
    "answer_spec",
    "get_kind",
    "outcome_schema",
    "parse_answers",
    "parse_binary",
    "parse_label",
    "parse_race",
    "parse_race_answers",
    "parse_ranking",
    "parse_ranking_value",
    "parse_rating",
    "parse_rating_value",
    "parse_response_files",
    "parse_responses",
    "parse_usd",
]
