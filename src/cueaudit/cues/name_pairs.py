"""First + last name pairs for four race groups × two genders (the decision audit's names).

The default list, ``resources/names/elder_hayes_pairs.csv``, holds the 40 pairs that FairFund-
Bench (Lukk, arXiv 2607.28934) took from Elder & Hayes (2023), "Signaling Race, Ethnicity, and
Gender with Names", *Journal of Politics* 85(2): five validated pairs per race (Black, White,
Hispanic, Asian) × gender cell, ``name_rank`` 1–5 as in FairFund's ``stimuli.csv``. They were
read once from that file's ``race, gender, name_rank, first, last, full_name`` columns with
:func:`pairs_from_stimuli`; names are facts, and no FairFund text was copied. Gender is stored
lower-case (``female``/``male``) to match the project's name vocabulary; FairFund writes
``Female``/``Male``. ``pair_id`` is ``{race}-{gender}-{name_rank}`` in lower case.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import polars as pl

from cueaudit.cues.vocabulary import GENDERS, RACES
from cueaudit.errors import InputError, few
from cueaudit.io import read_csv_records

#: Elder & Hayes's pairs signal every race of the vocabulary.
PAIR_RACES: Final = RACES
NAME_PAIR_SCHEMA: Final = {
    "pair_id": pl.String,
    "race": pl.String,
    "gender": pl.String,
    "name_rank": pl.Int64,
    "first": pl.String,
    "last": pl.String,
    "full_name": pl.String,
    "source": pl.String,
}
ELDER_HAYES_SOURCE: Final = "elder_hayes_2023"
#: The longest first, last or full name accepted (the shipped pairs' longest full name is 19).
MAX_NAME_CHARS: Final = 60


def pair_id(race: str, gender: str, rank: int) -> str:
    return f"{race.lower()}-{gender.lower()}-{rank}"


def load_name_pairs(
    path: str | Path,
    *,
    races: Sequence[str] = PAIR_RACES,
    pairs_per_cell: int | None = 5,
) -> pl.DataFrame:
    """Load and validate a name-pair CSV with the columns of :data:`NAME_PAIR_SCHEMA`.

    Race is matched to ``races`` and gender to male/female in any case. Each row needs a
    non-empty first and last name, ``full_name`` equal to ``"{first} {last}"``, a positive
    integer ``name_rank`` and a source; pair ids, full names and (race, gender, name_rank)
    are unique. With ``pairs_per_cell`` set, every race × gender cell has exactly that many
    pairs ranked 1..n. Raises InputError naming the file, line and field.
    """
    src = str(path)
    race_by_lower = {race.lower(): race for race in races}
    rows: list[dict[str, object]] = []
    seen: dict[tuple[str, object], int] = {}
    for line, rec in read_csv_records(path, tuple(NAME_PAIR_SCHEMA)):

        def fail(message: str, field: str, line: int = line) -> InputError:
            return InputError(src, f"line {line}: {message}", field=field)

        race = race_by_lower.get(rec["race"].lower())
        if race is None:
            raise fail(f"race {rec['race']!r} is not one of {list(races)}", "race")
        gender = rec["gender"].lower()
        if gender not in GENDERS:
            raise fail(f"gender {rec['gender']!r} is not one of {list(GENDERS)}", "gender")
        try:
            rank = int(rec["name_rank"])
        except ValueError:
            raise fail(f"name_rank {rec['name_rank']!r} is not an integer", "name_rank") from None
        if rank < 1:
            raise fail(f"name_rank must be positive, got {rank}", "name_rank")
        for field in ("pair_id", "first", "last", "source"):
            if not rec[field]:
                raise fail(f"empty {field}", field)
        for field in ("first", "last", "full_name"):
            if len(rec[field]) > MAX_NAME_CHARS:
                raise fail(
                    f"{field} is {len(rec[field])} characters long, {rec[field][:40]!r}...: a "
                    f"name is at most {MAX_NAME_CHARS} (a longer one would carry text into "
                    "every prompt)",
                    field,
                )
            control = [c for c in rec[field] if unicodedata.category(c)[0] == "C"]
            if control:
                raise fail(
                    f"{field} {rec[field]!r} holds a control character ({control[0]!r}): a "
                    "name would break the prompt's lines",
                    field,
                )
        if rec["full_name"] != f"{rec['first']} {rec['last']}":
            raise fail(f"{rec['full_name']!r} is not first and last joined by a space", "full_name")
        keys = {
            "pair_id": rec["pair_id"],
            "full_name": rec["full_name"].casefold(),
            "name_rank": (race, gender, rank),
        }
        for field, key in keys.items():
            if (field, key) in seen:
                raise fail(f"duplicate {key!r} (first at line {seen[field, key]})", field)
            seen[field, key] = line
        rows.append({**rec, "race": race, "gender": gender, "name_rank": rank})
    frame = pl.DataFrame(
        [{c: row[c] for c in NAME_PAIR_SCHEMA} for row in rows], schema=NAME_PAIR_SCHEMA
    )
    if pairs_per_cell is not None:
        _check_cells(frame, src, races, pairs_per_cell)
    return frame.sort("race", "gender", "name_rank")


def _check_cells(frame: pl.DataFrame, src: str, races: Sequence[str], per_cell: int) -> None:
    expected = list(range(1, per_cell + 1))
    for race in races:
        for gender in GENDERS:
            ranks = sorted(
                frame.filter((pl.col("race") == race) & (pl.col("gender") == gender))[
                    "name_rank"
                ].to_list()
            )
            if ranks != expected:
                raise InputError(
                    src,
                    f"cell {race}/{gender} has name ranks {few(ranks)}, expected {expected}",
                    field="name_rank",
                )


def pairs_from_stimuli(stimuli: pl.DataFrame, source: str = ELDER_HAYES_SOURCE) -> pl.DataFrame:
    """The distinct name pairs of a FairFund-style stimulus table, in :data:`NAME_PAIR_SCHEMA`.

    Raises InputError when one (race, gender, name_rank) carries two different names.
    """
    cols = ["race", "gender", "name_rank", "first", "last", "full_name"]
    pairs = stimuli.select(cols).unique().sort("race", "gender", "name_rank")
    clash = pairs.filter(pl.struct("race", "gender", "name_rank").is_duplicated())
    if clash.height:
        row = clash.row(0, named=True)
        raise InputError(
            "stimuli", f"two names for {row['race']}/{row['gender']}/{row['name_rank']}", "first"
        )
    pairs = pairs.with_columns(
        pl.col("gender").str.to_lowercase(), pl.col("name_rank").cast(pl.Int64)
    )
    ids = [pair_id(r, g, n) for r, g, n in pairs.select(cols[:3]).iter_rows()]
    return pairs.select(
        pl.Series("pair_id", ids, dtype=pl.String), *cols, pl.lit(source).alias("source")
    )
