"""The README's marked snippets ("Audit your own model") and Snakemake's dry-run job table.

A snippet is a fenced block between ``<!-- snippet: KIND NAME -->`` and ``<!-- /snippet -->``:
``file NAME`` is a file the reader writes (a config, a CSV), ``dry-run NAME`` what
``snakemake --configfile NAME -n`` prints: its command after ``$``, lines of the output
verbatim, the job table's rows (``rule count``; ``...`` stands for the rows left out) and its
total.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

_SNIPPET = re.compile(
    r"<!-- snippet: (?P<kind>[a-z-]+) (?P<name>\S+) -->\n"
    r"```[a-z]*\n(?P<body>.*?)```\n"
    r"<!-- /snippet -->",
    re.DOTALL,
)
_MARKER = re.compile(r"<!-- /?snippet\b")
_JOB_ROW = re.compile(r"^(?P<rule>[A-Za-z_][A-Za-z0-9_]*)\s+(?P<count>\d+)$")
KINDS = ("file", "dry-run")


@dataclass(frozen=True)
class DryRun:
    """A dry run as the README shows it."""

    command: list[str]
    lines: list[str]
    jobs: dict[str, int]
    total: int
    elided: bool


def snippets(text: str) -> dict[tuple[str, str], str]:
    """(kind, name) -> the body of each marked snippet of ``text``; a marker that opens no
    well-formed snippet, an unknown kind or a name given twice is an error."""
    found: dict[tuple[str, str], str] = {}
    for match in _SNIPPET.finditer(text):
        key = (match["kind"], match["name"])
        if match["kind"] not in KINDS:
            raise ValueError(f"snippet {key}: unknown kind (one of {KINDS})")
        if key in found:
            raise ValueError(f"snippet {key} given twice")
        found[key] = match["body"]
    if len(_MARKER.findall(text)) != 2 * len(found):
        raise ValueError("a snippet marker without its fenced block or its <!-- /snippet -->")
    return found


def readme_snippets() -> dict[tuple[str, str], str]:
    return snippets(README.read_text(encoding="utf-8"))


def parse_dry_run(body: str) -> DryRun:
    """The command, verbatim output lines, job rows and total of a ``dry-run`` snippet."""
    first, *rest = body.splitlines()
    if not first.startswith("$ snakemake "):
        raise ValueError(f"a dry run starts with '$ snakemake ...', not {first!r}")
    command = shlex.split(first.removeprefix("$ "))[1:]
    lines: list[str] = []
    jobs: dict[str, int] = {}
    total: int | None = None
    elided = False
    in_table = False
    for line in rest:
        stripped = line.strip()
        if re.fullmatch(r"job\s+count", stripped):
            in_table = True
        elif stripped == "...":
            elided = True
        elif in_table and (row := _JOB_ROW.match(stripped)):
            if row["rule"] == "total":
                total = int(row["count"])
            else:
                jobs[row["rule"]] = int(row["count"])
        elif stripped:
            lines.append(line)
    if total is None:
        raise ValueError("a dry run shows its job table's total")
    return DryRun(command, lines, jobs, total, elided)


def job_table(output: str) -> tuple[dict[str, int], int]:
    """The rules and counts of the first job table in Snakemake's output, and its total."""
    start = output.index("Job stats:")
    jobs: dict[str, int] = {}
    for line in output[start:].splitlines()[3:]:
        row = _JOB_ROW.match(line.strip())
        if row is None:
            break
        if row["rule"] == "total":
            return jobs, int(row["count"])
        jobs[row["rule"]] = int(row["count"])
    raise ValueError("Snakemake's job table has no total")


def render_dry_run(command: list[str], lines: list[str], jobs: dict[str, int], total: int) -> str:
    """A dry-run snippet body with the whole job table, laid out as Snakemake prints it (the
    message of a test that finds the README's out of date)."""
    width = max(len(rule) for rule in [*jobs, "total"])
    rows = [f"{rule:<{width}}  {count:>7}" for rule, count in [*jobs.items(), ("total", total)]]
    header = f"{'job':<{width}}  {'count':>7}"
    return "\n".join(["$ snakemake " + shlex.join(command), *lines, header, *rows]) + "\n"
