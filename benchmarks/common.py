"""What every benchmark records about its run, and where it writes its JSON.

``begin_results()`` at the start (``smoke`` and ``run_info()``: commit, date, CPUs, load),
``write_results()`` at the end (adds what is missing, ``load_after`` included),
``write_with_table()`` for a benchmark whose README block renders its JSON,
``default_out()`` for ``--out``: a ``--smoke`` run writes under the temp folder, so it never
overwrites the committed ``benchmarks/results``.
``footer()`` is the line under every table of benchmarks/README.md.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks/results"
SMOKE_DIR = "cueaudit-benchmarks-smoke"


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages (empty where the OS has none)."""
    try:
        return [float(x) for x in os.getloadavg()]
    except OSError:
        return []


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def commit() -> str:
    """The checkout's short commit, ``-dirty`` if tracked files changed; ``unknown`` outside
    a git checkout."""
    head = _git("rev-parse", "--short", "HEAD")
    if not head or not head.strip():
        return "unknown"
    status = _git("status", "--porcelain", "--untracked-files=no") or ""
    return head.strip() + ("-dirty" if status.strip() else "")


def run_info() -> dict[str, Any]:
    return {
        "commit": commit(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "load_average": load_average(),
    }


def begin_results(smoke: bool) -> dict[str, Any]:
    """The first keys of a benchmark's results: ``smoke`` and the run's info, its load as
    ``load_before``."""
    info = run_info()
    return {"smoke": smoke, **{k: v for k, v in info.items() if k != "load_average"}} | {
        "load_before": info["load_average"]
    }


def default_out(name: str, smoke: bool) -> Path:
    """``benchmarks/results/<name>.json``; a smoke run's under the temp folder instead."""
    if smoke:
        return Path(tempfile.gettempdir()) / SMOKE_DIR / f"{name}.json"
    return RESULTS / f"{name}.json"


def write_results(path: Path, results: dict[str, Any]) -> None:
    """Write ``results`` as JSON, with the commit, the date and ``load_after`` if missing."""
    info = run_info()
    results.setdefault("commit", info["commit"])
    results.setdefault("date", info["date"])
    results.setdefault("load_after", info["load_average"])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")


def write_with_table(
    path: Path, results: dict[str, Any], render: Callable[[dict[str, Any]], str]
) -> None:
    """:func:`write_results`, then ``render(results)`` (the README's Markdown table) printed
    and written beside the JSON as ``.md``."""
    write_results(path, results)
    text = render(results)
    print(text)
    Path(path).with_suffix(".md").write_text(text)
    print(f"wrote {path}")


# -- the README's line under a table -----------------------------------------------------------

#: Where JSON written before this format kept its load (first key found wins).
_LOAD_KEYS = (
    ("load_before", "load_after"),
    ("load_average_before", "load_average_after"),
    ("load_average_start", "load_average_end"),
    ("load_start", "load_end"),
)


def _one_minute(value: Any) -> float | None:
    """The 1-minute load of a list, a float or an ``uptime``-like string."""
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list | tuple):
        return float(value[0]) if value else None
    if isinstance(value, str):
        text = value.rsplit("load average:", 1)[-1].replace(",", " ")
        for token in text.split():
            try:
                return float(token)
            except ValueError:
                continue
    return None


def footer(results: dict[str, Any]) -> str:
    """``Measured at commit abc1234, load average 0.5 → 1.2, 2026-12-02.``"""
    who = results.get("commit")
    parts = [f"Measured at commit {who}" if who else "Measured (commit not recorded)"]
    for before_key, after_key in _LOAD_KEYS:
        if before_key in results or after_key in results:
            before = _one_minute(results.get(before_key))
            after = _one_minute(results.get(after_key))
            parts.append(f"load average {_load(before)} → {_load(after)}")
            break
    date = results.get("date")
    parts.append(str(date)[:10] if date else "date not recorded")
    line = ", ".join(parts) + "."
    if results.get("smoke"):
        line += " A smoke run: its numbers mean nothing."
    return line


def _load(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"
