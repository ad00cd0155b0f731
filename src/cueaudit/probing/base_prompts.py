"""Base prompts of one advice task (healthcare, salary or legal), loaded and validated."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl

from cueaudit.cues.names import cue_template_text
from cueaudit.errors import InputError
from cueaudit.io import read_csv_records

BASE_PROMPT_COLUMNS = ("base_id", "task", "text")


def _is_kearney_file(path: str | Path) -> bool:
    try:
        with open(path, encoding="utf-8-sig") as handle:
            header = [c.strip() for c in handle.readline().split(",")]
    except (OSError, UnicodeDecodeError):
        return False
    return "prompts" in header and "text" not in header


def load_base_prompts(path: str | Path, task: str, limit: int | None = None) -> pl.DataFrame:
    """Load a base-prompt CSV (columns ``base_id`` and ``text``; others are ignored), or a
    Kearney et al. corpus CSV (a ``prompts`` column; see load_kearney_prompts).

    Returns columns ``base_id, task, text`` in file order, the first ``limit`` rows when
    given (the whole file is checked). Raises InputError naming the file,
    field and line for an empty ``base_id`` or ``text``, a repeated ``base_id``, a text that
    repeats another row's (prompt uids hash the text, so the two rows would share every uid)
    or a text holding cue-template text such as ``USER:`` (it would put a cue into the
    no-cue baseline).
    """
    src = str(path)
    if not task.strip():
        raise InputError(src, "task name is empty", field="task")
    if _is_kearney_file(path):
        prompts = load_kearney_prompts(path, task)
        return prompts if limit is None else prompts.head(limit)
    ids: list[str] = []
    texts: list[str] = []
    first_line: dict[str, int] = {}
    first_of_text: dict[str, tuple[str, int]] = {}
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
        if text in first_of_text:
            other, other_line = first_of_text[text]
            raise InputError(
                src,
                f"line {line}: the text of base_id {base_id!r} repeats that of base_id "
                f"{other!r} (line {other_line}); both would get the same prompt uids",
                field="text",
            )
        _check_no_cue_text(text, src, "text", line, base_id)
        first_line[base_id] = line
        first_of_text[text] = (base_id, line)
        ids.append(base_id)
        texts.append(text)
    prompts = pl.DataFrame(
        {"base_id": ids, "task": [task] * len(ids), "text": texts},
        schema={col: pl.String for col in BASE_PROMPT_COLUMNS},
    )
    return prompts if limit is None else prompts.head(limit)


def load_task_base_prompts(tasks: Mapping[str, tuple[str, int | None]]) -> pl.DataFrame:
    """The base prompts of every task (task -> its base-prompt CSV and ``limit``), in task
    order: what the dialect translator translates."""
    return pl.concat(
        [load_base_prompts(path, task, limit) for task, (path, limit) in tasks.items()]
    )


def _check_no_cue_text(text: str, src: str, field: str, line: int, base_id: str) -> None:
    tag = cue_template_text(text)
    if tag is not None:
        raise InputError(
            src,
            f"line {line}: the text of {base_id!r} contains the cue template text {tag!r}; "
            "a base prompt must not carry a cue (it would contaminate the no-cue baseline)",
            field=field,
        )


#: Kearney et al. (2025) corpus files: ``data/{domain}_prompts.csv`` (legal and medical also
#: come in model-specific ``{domain}_llama_prompts.csv`` / ``{domain}_qwen_prompts.csv``).
KEARNEY_TYPO = ("additonal", "additional")


def load_kearney_prompts(path: str | Path, task: str, id_prefix: str | None = None) -> pl.DataFrame:
    """Base prompts from a Kearney et al. corpus CSV (one ``prompts`` column per domain file).

    The authors' typo "additonal" is fixed; ids are ``{prefix}-{row:05d}`` in file order
    (prefix: the task). Empty prompts are rejected; exact duplicates are kept once.
    """
    src = str(path)
    prefix = id_prefix or task
    ids: list[str] = []
    texts: list[str] = []
    seen: set[str] = set()
    for line, rec in read_csv_records(path, ("prompts",)):
        text = rec["prompts"].replace(*KEARNEY_TYPO)
        if not text:
            raise InputError(src, f"line {line}: empty prompt", field="prompts")
        if text in seen:
            continue
        seen.add(text)
        _check_no_cue_text(text, src, "prompts", line, f"{prefix}-{len(ids) + 1:05d}")
        ids.append(f"{prefix}-{len(ids) + 1:05d}")
        texts.append(text)
    return pl.DataFrame(
        {"base_id": ids, "task": [task] * len(ids), "text": texts},
        schema={col: pl.String for col in BASE_PROMPT_COLUMNS},
    )
