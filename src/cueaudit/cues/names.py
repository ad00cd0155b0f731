"""First-name lists (Appendix A.1): loading, validation and deterministic sampling, and the
name cue type's variants, count and loading (its row is in :mod:`cueaudit.cues.registry`)."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from cueaudit.cues.cue_type import CueType, VariantCount, concat_parquet, variant_rows
from cueaudit.cues.vocabulary import CUE_TAGS, GENDERS, NAME_LIST_RACES
from cueaudit.errors import InputError
from cueaudit.io import read_csv_records, safe_component

NAME_COLUMNS = ("name", "race", "gender", "source")
GROUP_COLUMNS = ("source", "race", "gender")

_RACE_BY_LOWER = {race.lower(): race for race in NAME_LIST_RACES}

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
                src,
                f"line {line}: race {race_raw!r} is not one of {list(NAME_LIST_RACES)}",
                field="race",
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


def name_variants(cue_type: CueType[pl.DataFrame], names: pl.DataFrame) -> pl.DataFrame:
    """Names (name, race, gender, source) as cue-variant rows."""
    return variant_rows(cue_type, names, source=pl.col("source"), value=pl.col("name"))


def load_sampled_names(
    files: Sequence[str], settings: Mapping[str, Any], task: str
) -> pl.DataFrame:
    """The prepared names, sampled by ``per_group`` and ``sample_seed`` (:func:`sample_names`)."""
    return sample_names(
        concat_parquet(files), settings.get("per_group"), settings.get("sample_seed", 0)
    )


def name_variant_count(
    cue_type: CueType[pl.DataFrame], block: Mapping[str, Any], base: Path
) -> VariantCount:
    """Names ``cues.names`` gives: the published lists sampled, or for derived names the
    nominal ``per_group`` (else ``top_n``) per source and subgroup."""
    if block.get("use") == "derived":
        derive = block.get("derive") or {}
        sources = [source for source in cue_type.sources if source in derive]
        per_group = block.get("per_group") or derive.get("top_n", 50)
        count = len(sources) * len(NAME_LIST_RACES) * len(GENDERS) * per_group
        return count, "derived names: nominal count per subgroup"
    lists = load_name_lists([base / path for path in block["lists"].values()])
    return sample_names(lists, block.get("per_group"), block.get("sample_seed", 0)).height, None
