"""First-name lists (Appendix A.1): loading, validation and deterministic sampling."""

from __future__ import annotations

import csv
import hashlib
import io
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

import polars as pl

from cueaudit.cues.dialog.common import format_prefix
from cueaudit.cues.registry import DIALOG_TEMPLATE, EXPLICIT_TEMPLATE, NAME_TEMPLATE
from cueaudit.cues.vocabulary import GENDERS, RACES
from cueaudit.errors import InputError
from cueaudit.io import safe_component

NAME_COLUMNS = ("name", "race", "gender", "source")
GROUP_COLUMNS = ("source", "race", "gender")

_RACE_BY_LOWER = {race.lower(): race for race in RACES}

#: The tags of the cue prefixes (``[MEMORY: ...]``, ``USER:``, ``MODEL:``), read off the
#: templates so a new tag is caught too. A cue value or base prompt holding one would forge
#: a cue (or a dialog turn) inside the prompt.
CUE_TAGS: Final = tuple(
    sorted(
        set(
            re.findall(
                r"\b([A-Z]{3,}):",
                " ".join(
                    (NAME_TEMPLATE, EXPLICIT_TEMPLATE, DIALOG_TEMPLATE, format_prefix([("", "")]))
                ),
            )
        )
    )
)
_CUE_TAG = re.compile(rf"\b({'|'.join(CUE_TAGS)})\s*:")


def cue_template_text(text: str) -> str | None:
    """The first cue-template tag in ``text`` (e.g. ``'USER:'``), or None."""
    match = _CUE_TAG.search(text)
    return match.group(0) if match else None


def _control_character(text: str) -> str | None:
    for char in text:
        if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            return char
    return None


def check_cue_value(value: str, src: str, field: str, line: int | str) -> None:
    """Reject a cue value (a name, a descriptor) that would break out of its template:
    line breaks and other control characters, brackets or braces, or a cue tag. ``line``
    is a line number or a phrase such as ``"row 3"``."""
    where = f"line {line}" if isinstance(line, int) else line
    char = _control_character(value)
    if char is not None:
        raise InputError(src, f"{where}: {value!r} contains the control character {char!r}", field)
    bracket = next((c for c in value if c in "[]{}"), None)
    if bracket is not None:
        raise InputError(
            src,
            f"{where}: {value!r} contains {bracket!r}, which would break out of the cue "
            "template '[MEMORY: ...]'",
            field,
        )
    tag = cue_template_text(value)
    if tag is not None:
        raise InputError(src, f"{where}: {value!r} contains the cue template text {tag!r}", field)


def read_csv_records(path: str | Path, required: Sequence[str]) -> list[tuple[int, dict[str, str]]]:
    """Read a UTF-8 CSV file as ``(line number, row)`` pairs with whitespace-stripped values.

    Raises InputError, naming the file (and field or line), when the file is missing or empty,
    is not UTF-8, is not well-formed CSV, lacks a required column or has no data rows.
    """
    path = Path(path)
    src = str(path)
    if not path.is_file():
        raise InputError(src, "file not found")
    raw = path.read_bytes()
    if not raw.strip():
        raise InputError(src, "file is empty")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(src, f"not valid UTF-8 at line {line} (byte {exc.start})") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [col.strip() for col in next(reader)]
        missing = [col for col in required if col not in header]
        if missing:
            raise InputError(src, f"required column missing (header is {header})", field=missing[0])
        dupes = sorted({col for col in header if header.count(col) > 1})
        if dupes:
            raise InputError(src, "column appears more than once in the header", field=dupes[0])
        records: list[tuple[int, dict[str, str]]] = []
        start = reader.line_num + 1  # a record's first line (a quoted field may span lines)
        for row in reader:
            line, start = start, reader.line_num + 1
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise InputError(
                    src,
                    f"line {line}: {len(row)} fields, header has {len(header)}",
                )
            records.append(
                (
                    line,
                    {col: cell.strip() for col, cell in zip(header, row, strict=True)},
                )
            )
    except csv.Error as exc:
        raise InputError(src, f"malformed CSV at line {reader.line_num}: {exc}") from None
    if not records:
        raise InputError(src, "no data rows below the header")
    return records


def load_name_list(path: str | Path) -> pl.DataFrame:
    """Load one name list CSV with columns ``name, race, gender, source``.

    Race must be Black or White and gender male or female (any case; stored as ``Black``/
    ``White`` and lower-case ``male``/``female``). Names must be non-empty and each
    (name, race, gender) may appear once. Extra columns are dropped.
    """
    src = str(path)
    rows: dict[str, list[str]] = {col: [] for col in NAME_COLUMNS}
    seen: dict[tuple[str, str, str], int] = {}
    for line, rec in read_csv_records(path, NAME_COLUMNS):
        name, race_raw, gender_raw, source = (rec[col] for col in NAME_COLUMNS)
        if not name:
            raise InputError(src, f"line {line}: empty name", field="name")
        check_cue_value(name, src, "name", line)
        race = _RACE_BY_LOWER.get(race_raw.lower())
        if race is None:
            raise InputError(
                src, f"line {line}: race {race_raw!r} is not one of {list(RACES)}", field="race"
            )
        gender = gender_raw.lower()
        if gender not in GENDERS:
            raise InputError(
                src,
                f"line {line}: gender {gender_raw!r} is not one of {list(GENDERS)}",
                field="gender",
            )
        if not source:
            raise InputError(src, f"line {line}: empty source", field="source")
        safe_component(source, "source", src, line)
        key = (name, race, gender)
        if key in seen:
            raise InputError(
                src,
                f"line {line}: duplicate row {key} (first at line {seen[key]})",
                field="name",
            )
        seen[key] = line
        for col, value in zip(NAME_COLUMNS, (name, race, gender, source), strict=True):
            rows[col].append(value)
    return pl.DataFrame(rows, schema={col: pl.String for col in NAME_COLUMNS})


def load_name_lists(paths: Iterable[str | Path]) -> pl.DataFrame:
    """Load and concatenate name lists; each file holds one source and sources are distinct."""
    frames: list[pl.DataFrame] = []
    file_of_source: dict[str, str] = {}
    for path in paths:
        frame = load_name_list(path)
        sources = frame["source"].unique(maintain_order=True).to_list()
        if len(sources) != 1:
            raise InputError(
                str(path), f"one source per file expected, found {sources}", field="source"
            )
        if sources[0] in file_of_source:
            raise InputError(
                str(path),
                f"source {sources[0]!r} is also used by {file_of_source[sources[0]]}",
                field="source",
            )
        file_of_source[sources[0]] = str(path)
        frames.append(frame)
    if not frames:
        raise InputError("name lists", "no name list files given")
    return pl.concat(frames, how="vertical")


def _sample_key(seed: int, source: str, race: str, gender: str, name: str) -> bytes:
    return hashlib.blake2b(
        f"{seed}\x1f{source}\x1f{race}\x1f{gender}\x1f{name}".encode(), digest_size=8
    ).digest()


def sample_names(names: pl.DataFrame, per_group: int | None, seed: int) -> pl.DataFrame:
    """Deterministically pick ``per_group`` names per (source, race, gender); None keeps all.

    Each name gets a pseudo-random rank from a hash of (seed, group, name) and the lowest
    ranks are kept (ties broken by name), so the result does not depend on row order and
    adding or removing a name changes at most one pick of that name's own subgroup.
    The result is sorted by source, race, gender and name.
    """
    missing = [col for col in NAME_COLUMNS if col not in names.columns]
    if missing:
        raise InputError("name table", "required column missing", field=missing[0])
    ordered = names.select(NAME_COLUMNS).sort([*GROUP_COLUMNS, "name"])
    if per_group is None:
        return ordered
    if per_group < 1:
        raise InputError(
            "name sampling", f"must be a positive integer, got {per_group}", "per_group"
        )
    picked: list[pl.DataFrame] = []
    for (source, race, gender), group in ordered.group_by(GROUP_COLUMNS, maintain_order=True):
        if group.height < per_group:
            raise InputError(
                "name sampling",
                f"asks for {per_group} names but {source}/{race}/{gender} has only {group.height}",
                field="per_group",
            )
        keys = [
            _sample_key(seed, str(source), str(race), str(gender), name)
            for name in group["name"].to_list()
        ]
        order = sorted(range(group.height), key=lambda i: (keys[i], i))[:per_group]
        picked.append(group[sorted(order)])
    return pl.concat(picked, how="vertical") if picked else ordered


def names_from_derived(path: str | Path) -> pl.DataFrame:
    """The name table (``name, race, gender, source``) of derived lists (derive_names)."""
    frame = pl.read_parquet(path)
    missing = [col for col in NAME_COLUMNS if col not in frame.columns]
    if missing:
        raise InputError(str(path), "required column missing", field=missing[0])
    if frame.height == 0:
        raise InputError(str(path), "no derived names")
    frame = frame.select(NAME_COLUMNS).cast(dict.fromkeys(NAME_COLUMNS, pl.String))
    for row, (name, source) in enumerate(frame.select("name", "source").iter_rows(), start=1):
        check_cue_value(name or "", str(path), "name", f"row {row}")
        safe_component(source, "source", str(path), f"row {row}")
    return frame
