"""Result tables as files: a CSV and a Markdown copy of it beside it, for every study."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from cueaudit.io import write_csv, write_text


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
            return f"{value:.3e}"
        return f"{value:.4f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(frame: pl.DataFrame, title: str | None = None) -> str:
    """A GitHub-flavoured Markdown table of ``frame`` (floats to 4 decimals, nulls blank)."""
    lines = [f"## {title}", ""] if title else []
    lines.append("| " + " | ".join(frame.columns) + " |")
    lines.append("|" + "|".join("---" for _ in frame.columns) + "|")
    for row in frame.iter_rows():
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    if frame.is_empty():
        lines.append("")
        lines.append("_No rows._")
    return "\n".join(lines) + "\n"


def write_markdown(frame: pl.DataFrame, path: str | Path, title: str | None = None) -> None:
    write_text(to_markdown(frame, title), path)


def write_table(frame: pl.DataFrame, out: str | Path, title: str | None = None) -> None:
    """Write ``frame`` as CSV at ``out`` and as Markdown beside it (same name, ``.md``)."""
    write_csv(frame, out)
    write_markdown(frame, Path(out).with_suffix(".md"), title)
