"""Base prompts of one advice task (healthcare, salary or legal), loaded and validated."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from cueaudit.errors import InputError
from cueaudit.names import read_csv_records

BASE_PROMPT_COLUMNS = ("base_id", "task", "text")


def load_base_prompts(path: str | Path, task: str) -> pl.DataFrame:
    """Load a base-prompt CSV (columns ``base_id`` and ``text``; others are ignored).

    Returns columns ``base_id, task, text`` in file order. Raises InputError naming the file,
    field and line for an empty ``base_id`` or ``text`` or a repeated ``base_id``.
    """
    src = str(path)
    if not task.strip():
        raise InputError(src, "task name is empty", field="task")
    ids: list[str] = []
    texts: list[str] = []
    first_line: dict[str, int] = {}
    for line, rec in read_csv_records(path, ("base_id", "text")):
        base_id, text = rec["base_id"], rec["text"]
        if not base_id:
            raise InputError(src, f"line {line}: empty base_id", field="base_id")
        if base_id in first_line:
            raise InputError(
                src,
                f"line {line}: duplicate base_id {base_id!r} (first at line {first_line[base_id]})",
                field="base_id",
            )
        if not text:
            raise InputError(src, f"line {line}: empty text for {base_id!r}", field="text")
        first_line[base_id] = line
        ids.append(base_id)
        texts.append(text)
    return pl.DataFrame(
        {"base_id": ids, "task": [task] * len(ids), "text": texts},
        schema={col: pl.String for col in BASE_PROMPT_COLUMNS},
    )
