"""Shared pieces of the dialog loaders: the dialog table, the prefix format and field checks."""

from __future__ import annotations

from collections.abc import Sequence
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
