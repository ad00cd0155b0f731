"""The bad-input battery's machinery: one case is some input files, a call, and the exact
message the call must raise; every case runs beside a ``results/`` folder that must not change.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cueaudit.errors import InputError

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Where:
    """The case's folders: ``inputs`` holds its files, ``results`` is the output folder."""

    inputs: Path
    results: Path

    def __truediv__(self, name: str) -> Path:
        return self.inputs / name


@dataclass(frozen=True)
class Case:
    """``call`` must raise ``error`` with exactly ``message`` ({in}: the input folder,
    {results}: the output folder) and leave every file under ``results/`` as it was."""

    id: str
    call: Callable[[Where], object]
    message: str
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    error: type[Exception] = InputError
    #: files already under results/ when the call runs (a folder: the value ``FOLDER``)
    results: Mapping[str, str | bytes] = field(default_factory=dict)


FOLDER = b"<a folder>"


def params(cases: list[Case]) -> list[object]:
    ids = [c.id for c in cases]
    assert len(set(ids)) == len(ids), "case ids must be unique"
    return [pytest.param(c, id=c.id) for c in cases]


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden and temporary ones too) with its content hash."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def seeded_results(root: Path) -> Path:
    """An output folder holding earlier outputs, as a rerun finds it."""
    results = root / "results"
    for name, data in {
        "outcomes/healthcare/old.parquet": b"PAR1 earlier outcome",
        "decision/preregistration.lock.other": b"{}\n",
        "cues/names.parquet": b"PAR1 earlier names",
    }.items():
        (results / name).parent.mkdir(parents=True, exist_ok=True)
        (results / name).write_bytes(data)
    return results


def run_case(case: Case, tmp_path: Path) -> None:
    where = Where(tmp_path / "in", seeded_results(tmp_path))
    where.inputs.mkdir()
    for name, content in case.files.items():
        path = where.inputs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    for name, content in case.results.items():
        path = where.results / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content == FOLDER:
            path.mkdir()
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    before = snapshot(where.results)
    with pytest.raises(case.error) as info:
        case.call(where)
    expected = case.message.replace("{in}", str(where.inputs)).replace(
        "{results}", str(where.results)
    )
    assert str(info.value) == expected, f"\n got: {info.value}\nwant: {expected}"
    assert snapshot(where.results) == before, "a failed call changed results/"
