"""Community Alignment dataset (CAD; Zhang et al. 2025): the wide CSV, one row per
conversation with up to four turns of four candidate responses each.

Kept: US annotators (``annotator_country`` "united states", any case), ethnicity ``White`` or
``Black or African American``, gender ``male``/``female``; each turn's preferred label
(``response_a``, ``A``, ``Response A`` …) is resolved to its response text. Clusters group
conversations that share the pre-generated first turn (prompt and the four responses) and have
the same number of turns (Appendix A.3: dialogs in a cluster are matched on the number of
turns; later turns follow each annotator's own choices, so only the first one is shared).
"""

from __future__ import annotations

import csv
import hashlib
import io
import logging
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Final

import polars as pl

from cueaudit.cues.dialog.common import dialog_frame, format_prefix
from cueaudit.errors import InputError
from cueaudit.io import read_bytes_checked

log = logging.getLogger(__name__)

FILE_NAMES: Final = (
    "community_alignment.csv",
    "filtered_community_alignment.csv",
    "full_community_alignment.csv",
)
TURNS: Final = ("first", "second", "third", "fourth")
REQUIRED: Final = (
    "conversation_id",
    "annotator_id",
    "first_turn_prompt",
    *(f"first_turn_response_{x}" for x in "abcd"),
    "first_turn_preferred_response",
    "annotator_gender",
    "annotator_ethnicity",
    "annotator_country",
    "is_pregenerated_first_prompt",
)
RACES: Final = {"white": "White", "black or african american": "Black"}
GENDERS: Final = ("male", "female")
_TRUE: Final = {"true", "1", "yes"}
_FALSE: Final = {"false", "0", "no", ""}


def find_cad_file(folder_or_file: str | Path) -> Path:
    """The CSV itself, or the first of FILE_NAMES inside a folder."""
    path = Path(folder_or_file)
    if path.is_dir():
        for name in FILE_NAMES:
            if (path / name).is_file():
                return path / name
        raise InputError(str(path), f"none of {list(FILE_NAMES)} in this folder")
    return path


def preferred_letter(label: str) -> str | None:
    """``response_a`` / ``A`` / ``Response A`` / ``a`` → ``a``; anything else → None."""
    text = label.strip().lower().replace("response", "").strip(" _:-")
    return text if text in ("a", "b", "c", "d") else None


def _bool(value: str, src: str, line: int, name: str) -> bool:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise InputError(src, f"line {line}: expected true/false, got {value!r}", field=name)


def load_cad(path: str | Path, language: str = "en") -> pl.DataFrame:
    """One dialog per kept conversation in DIALOG_SCHEMA.

    ``cluster_key`` is a hash of (assigned_lang, first_turn_prompt, first_turn_response_a..d,
    number of turns) for pre-generated first prompts, and null for user-initiated ones (never
    clustered).
    """
    path = find_cad_file(path)
    src = str(path)
    text = read_bytes_checked(path)
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames or []
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(src, f"required column missing (header has {len(header)})", missing[0])
    rows: list[dict[str, Any]] = []
    excluded: Counter[str] = Counter()
    n_rows = 0
    try:
        start = reader.line_num + 1  # below the header
        for rec in reader:
            n_rows += 1
            # The line the record starts on (line_num is where it ends: fields span lines).
            line, start = start, reader.line_num + 1
            if None in rec:
                raise InputError(src, f"line {line}: more fields than the header")
            if None in rec.values():  # DictReader fills a short row's last columns with None
                given = sum(v is not None for v in rec.values())
                raise InputError(src, f"line {line}: {given} fields, header has {len(header)}")
            lang = (rec.get("assigned_lang") or language).strip()
            country = (rec["annotator_country"] or "").strip().lower()
            race = RACES.get((rec["annotator_ethnicity"] or "").strip().lower())
            gender = (rec["annotator_gender"] or "").strip().lower()
            pregenerated = _bool(
                rec["is_pregenerated_first_prompt"], src, line, "is_pregenerated_first_prompt"
            )
            if lang != language or country != "united states":
                excluded["not_us"] += 1
                continue
            if race is None:
                excluded["other_ethnicity"] += 1
                continue
            if gender not in GENDERS:
                excluded["other_gender"] += 1
                continue
            turns = _turns(rec, header)
            if turns is None:
                excluded["missing_chosen_response"] += 1
                continue
            key = None
            if pregenerated:
                parts = [lang, rec["first_turn_prompt"]]
                parts += [rec[f"first_turn_response_{x}"] for x in "abcd"]
                parts.append(str(len(turns)))
                key = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]
            rows.append(
                {
                    "source": "cad",
                    "dialog_id": rec["conversation_id"].strip(),
                    "annotator_id": rec["annotator_id"].strip(),
                    "race": race,
                    "gender": gender,
                    "n_turns": len(turns),
                    "cluster_key": key,
                    "prefix": format_prefix(turns),
                }
            )
    except csv.Error as exc:
        raise InputError(src, f"malformed CSV at line {reader.line_num}: {exc}") from None
    if n_rows == 0:
        raise InputError(src, "no data rows below the header")
    log.info("CAD: %d dialogs kept of %d rows; excluded %s", len(rows), n_rows, dict(excluded))
    return dialog_frame(rows)


def _turns(rec: dict[str, str], header: list[str]) -> list[tuple[str, str]] | None:
    """(prompt, preferred response) per turn; None when a present turn has no preferred
    response or a turn is missing in the middle of the conversation."""
    turns: list[tuple[str, str]] = []
    ended = False
    for turn in TURNS:
        prompt = rec.get(f"{turn}_turn_prompt") or ""
        if not prompt.strip():
            ended = True
            continue
        if ended:
            return None  # a gap: a later turn after a missing one
        letter = preferred_letter(rec.get(f"{turn}_turn_preferred_response") or "")
        column = f"{turn}_turn_response_{letter}"
        response = rec.get(column) if letter else None
        if not response or column not in header:
            return None
        turns.append((prompt, response))
    return turns or None
