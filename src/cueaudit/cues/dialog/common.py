"""Shared pieces of the dialog loaders: the dialog table, prefix format and JSONL reading."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import polars as pl

from cueaudit.errors import InputError

DIALOG_SCHEMA: Final = {
    "source": pl.String,
    "dialog_id": pl.String,
    "annotator_id": pl.String,
    "race": pl.String,
    "gender": pl.String,
    "n_turns": pl.Int64,
    "cluster_key": pl.String,
    "prefix": pl.String,
}


def format_prefix(turns: Sequence[tuple[str, str]]) -> str:
    """``USER: ...`` / ``MODEL: ...`` lines of the user turns and preferred model turns."""
    return "\n".join(f"USER: {user}\nMODEL: {model}" for user, model in turns)


def read_bytes_checked(path: str | Path) -> str:
    """File text (UTF-8), or InputError naming the file for missing, empty or bad encoding."""
    path = Path(path)
    if not path.is_file():
        raise InputError(str(path), "file not found")
    raw = path.read_bytes()
    if not raw.strip():
        raise InputError(str(path), "file is empty")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(str(path), f"not valid UTF-8 at line {line} (byte {exc.start})") from None


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` of a JSON Lines file; each line must be a JSON object."""
    src = str(path)
    for number, line in enumerate(read_bytes_checked(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(src, f"line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise InputError(src, f"line {number}: expected a JSON object")
        yield number, record


def field(
    record: dict[str, Any],
    key: str,
    kind: type | tuple[type, ...],
    src: str,
    line: int,
    *,
    nullable: bool = False,
) -> Any:
    """``record[key]`` checked for presence and type; dotted keys reach into nested dicts."""
    value: Any = record
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise InputError(src, f"line {line}: missing", field=key)
        value = value[part]
    if value is None and nullable:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise InputError(
            src, f"line {line}: expected {names}, got {type(value).__name__}", field=key
        )
    return value


def dialog_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=DIALOG_SCHEMA)
