"""PRISM (Kirk et al. 2024): US Black/White × male/female participants' chosen dialog paths.

``survey.jsonl`` gives each participant's ``ethnicity.simplified``, ``gender`` and
``location.reside_countryISO``; ``conversations.jsonl`` gives ``conversation_history`` where
the preferred model response of each turn has ``if_chosen`` true.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any, Final

import polars as pl

from cueaudit.cues.dialog.common import dialog_frame, field, format_prefix
from cueaudit.errors import InputError
from cueaudit.io import read_jsonl

log = logging.getLogger(__name__)

RACES: Final = {"Black": "Black", "White": "White"}
GENDERS: Final = {"Male": "male", "Female": "female"}


def load_prism_participants(path: str | Path) -> tuple[dict[str, tuple[str, str]], Counter[str]]:
    """``{user_id: (race, gender)}`` of US Black/White male/female participants, and the
    counts of participants excluded by reason."""
    src = str(path)
    kept: dict[str, tuple[str, str]] = {}
    excluded: Counter[str] = Counter()
    for line, rec in read_jsonl(path):
        user = field(rec, "user_id", str, src, line)
        country = field(rec, "location.reside_countryISO", str, src, line, nullable=True)
        ethnicity = field(rec, "ethnicity.simplified", str, src, line, nullable=True)
        gender = field(rec, "gender", str, src, line, nullable=True)
        if user in kept:
            raise InputError(src, f"line {line}: duplicate user {user!r}", field="user_id")
        if country != "USA":
            excluded["not_us"] += 1
        elif ethnicity not in RACES:
            excluded["other_ethnicity"] += 1
        elif gender not in GENDERS:
            excluded["other_gender"] += 1
        else:
            kept[user] = (RACES[ethnicity], GENDERS[gender])
    return kept, excluded


def chosen_path(history: list[Any], src: str, line: int) -> list[tuple[str, str]] | None:
    """(user, chosen model) pairs turn by turn; None if a turn lacks its chosen response."""
    users: dict[int, str] = {}
    chosen: dict[int, str] = {}
    for i, item in enumerate(history):
        if not isinstance(item, dict):
            raise InputError(src, f"line {line}: item {i} is not an object", "conversation_history")
        turn = field(item, "turn", int, src, line)
        role = field(item, "role", str, src, line)
        content = field(item, "content", str, src, line)
        if role == "user":
            users[turn] = content
        elif role == "model" and field(item, "if_chosen", bool, src, line):
            chosen[turn] = content
    turns = sorted(users)
    if not turns or turns != list(range(len(turns))) or any(t not in chosen for t in turns):
        return None
    return [(users[t], chosen[t]) for t in turns]


def load_prism(survey_path: str | Path, conversations_path: str | Path) -> pl.DataFrame:
    """One dialog per kept conversation in DIALOG_SCHEMA; ``cluster_key`` is the number of
    turns (PRISM clusters match on interaction structure)."""
    participants, excluded = load_prism_participants(survey_path)
    src = str(conversations_path)
    rows: list[dict[str, Any]] = []
    for line, rec in read_jsonl(conversations_path):
        cid = field(rec, "conversation_id", str, src, line)
        user = field(rec, "user_id", str, src, line)
        history = field(rec, "conversation_history", list, src, line)
        if user not in participants:
            excluded["conversation_of_excluded_user"] += 1
            continue
        path = chosen_path(history, src, line)
        if path is None:
            excluded["missing_chosen_response"] += 1
            continue
        race, gender = participants[user]
        rows.append(
            {
                "source": "prism",
                "dialog_id": cid,
                "annotator_id": user,
                "race": race,
                "gender": gender,
                "n_turns": len(path),
                "cluster_key": f"turns={len(path)}",
                "prefix": format_prefix(path),
            }
        )
    log.info("PRISM: %d dialogs kept; excluded %s", len(rows), dict(excluded))
    return dialog_frame(rows)
