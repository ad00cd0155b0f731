"""FairFund-Bench's aid stimuli (``stimuli.csv``, CC-BY-4.0): read from a configured path,
never copied into the repository, checked against its codebook's labels (the aid domain,
:mod:`cueaudit.decision.aid`, builds on them)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import polars as pl

from cueaudit.cues.name_pairs import NAME_PAIR_SCHEMA
from cueaudit.errors import InputError
from cueaudit.io import read_csv_records

FAIRFUND_SCHEMA: Final = {
    "stimulus_id": pl.String,
    "category": pl.String,
    "scenario_id": pl.String,
    "scenario_label": pl.String,
    "framing": pl.String,
    # the name columns are those of a name pair
    **{
        c: NAME_PAIR_SCHEMA[c]
        for c in ("race", "gender", "name_rank", "first", "last", "full_name")
    },
    "text": pl.String,
    "word_count": pl.Int64,
    "target_word_count": pl.Int64,
    "within_tolerance": pl.Boolean,
}
FAIRFUND_VALUES: Final = {
    "category": ("Medical", "Rent", "Education"),
    "framing": (
        "no_cause",
        "structural",
        "self_cause",
        "stigma_no_redemption",
        "stigma_redemption",
    ),
    "race": ("White", "Black", "Hispanic", "Asian"),
    "gender": ("Male", "Female"),
}
_BOOLEANS: Final = {"TRUE": True, "FALSE": False, "True": True, "False": False}


def load_fairfund_stimuli(path: str | Path) -> pl.DataFrame:
    """FairFund-Bench's ``stimuli.csv`` (CC-BY-4.0; read from a configured path, never copied)
    in :data:`FAIRFUND_SCHEMA`, labels as its codebook gives them (race ``White``…, gender
    ``Male``/``Female``).

    Raises InputError naming file, line and field for a missing column, a label outside the
    codebook, a non-integer count, a boolean other than TRUE/FALSE, a duplicate
    ``stimulus_id``, or a ``full_name`` that is not ``first last`` or is absent from the text.
    """
    src = str(path)
    ints = [c for c, t in FAIRFUND_SCHEMA.items() if t == pl.Int64]
    rows: list[dict[str, object]] = []
    seen: dict[str, int] = {}
    for line, rec in read_csv_records(path, tuple(FAIRFUND_SCHEMA)):
        row: dict[str, object] = {c: rec[c] for c in FAIRFUND_SCHEMA}
        for column, allowed in FAIRFUND_VALUES.items():
            if rec[column] not in allowed:
                raise InputError(
                    src, f"line {line}: {rec[column]!r} is not one of {list(allowed)}", column
                )
        for column in ints:
            try:
                row[column] = int(rec[column])
            except ValueError:
                raise InputError(
                    src, f"line {line}: {rec[column]!r} is not an integer", column
                ) from None
        if rec["within_tolerance"] not in _BOOLEANS:
            raise InputError(
                src,
                f"line {line}: {rec['within_tolerance']!r} is not TRUE/FALSE",
                "within_tolerance",
            )
        row["within_tolerance"] = _BOOLEANS[rec["within_tolerance"]]
        if (
            rec["full_name"] != f"{rec['first']} {rec['last']}"
            or rec["full_name"] not in rec["text"]
        ):
            raise InputError(
                src,
                f"line {line}: {rec['full_name']!r} is not first last, in the text",
                "full_name",
            )
        if rec["stimulus_id"] in seen:
            raise InputError(
                src,
                f"line {line}: duplicate {rec['stimulus_id']!r} (first at line "
                f"{seen[rec['stimulus_id']]})",
                "stimulus_id",
            )
        seen[rec["stimulus_id"]] = line
        rows.append(row)
    return pl.DataFrame(rows, schema=FAIRFUND_SCHEMA, orient="row")


# --- word lists and the demographic check ------------------------------------------------
