"""Run a decision analysis row (cueaudit.decision.analysis.registry) on frames in memory, as
its workflow rule runs it: frames as Parquet, tables as CSV + Markdown."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from cueaudit.decision.analysis.frames import AnalysisFrames
from cueaudit.decision.analysis.inputs import FRAMES
from cueaudit.decision.analysis.registry import ANALYSES, Analysis, run_analysis


def table_paths(analysis: Analysis, folder: Path) -> dict[str, str]:
    """Where the rule writes each table of ``analysis`` (and its Markdown), under ``folder``."""
    out = {}
    for table in analysis.tables:
        out[table] = str(folder / f"decision_{table}.csv")
        out[f"{table}_md"] = str(folder / f"decision_{table}.md")
    return out


def run_on_frames(
    name: str,
    frames: AnalysisFrames,
    folder: Path,
    *,
    params: Mapping[str, Any] | None = None,
    files: Mapping[str, Any] | None = None,
    threads: int = 1,
    analyses: Mapping[str, Analysis] = ANALYSES,
) -> tuple[dict[str, pl.DataFrame], dict[str, str]]:
    """The tables of analysis ``name`` on ``frames`` and where they were written."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for frame in FRAMES:
        paths[frame] = str(folder / f"{frame}.parquet")
        getattr(frames, frame).write_parquet(paths[frame])
    out = table_paths(analyses[name], folder)
    tables = run_analysis(
        name,
        files={**paths, **(files or {})},
        params=params or {},
        out=out,
        threads=threads,
        analyses=analyses,
    )
    return tables, out
