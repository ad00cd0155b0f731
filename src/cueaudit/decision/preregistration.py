"""The pre-registration of the decision audit: its planned family, the lock, the label.

The lock (``results/decision/preregistration.lock``) records the file's SHA-256 and the time
it was frozen, before the first decision-audit inference job. It is written once and never
rewritten: a result is labelled pre-registered only while the file still hashes to the locked
value, so an edit after data collection demotes every result to exploratory instead of
silently re-registering.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cueaudit.errors import InputError
from cueaudit.io import write_text

FORMATS = ("rate", "decide", "rank")
REQUIRED = ("alpha", "primary", "family", "equivalence_margins")


@dataclass(frozen=True)
class PlannedContrast:
    domain: str
    format: str
    contrast: str
    dimension: str
    focal: str
    reference: str

    @property
    def id(self) -> str:
        return f"{self.domain}.{self.format}.{self.contrast}"


@dataclass(frozen=True)
class Preregistration:
    alpha: float
    primary: Mapping[str, Any]
    contrasts: tuple[PlannedContrast, ...]
    margins: Mapping[str, float | None]
    power: float


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_preregistration(path: str | Path) -> Preregistration:
    """The planned family of a pre-registration file, checked field by field."""
    source = str(path)
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise InputError(source, f"not valid YAML: {error}") from error
    if not isinstance(raw, Mapping):
        raise InputError(source, "expected a mapping at the top level")
    for key in REQUIRED:
        if key not in raw:
            raise InputError(source, f"missing key '{key}'", key)
    family = raw["family"]
    contrasts = []
    for domain in family["domains"]:
        for fmt in family["formats"]:
            if fmt not in FORMATS:
                raise InputError(source, f"unknown format {fmt!r} (known: {FORMATS})", "family")
            for name, spec in family["contrasts"].items():
                contrasts.append(
                    PlannedContrast(
                        domain, fmt, name, spec["dimension"], spec["focal"], spec["reference"]
                    )
                )
    margins = raw["equivalence_margins"]
    unknown = sorted(set(margins) - set(FORMATS))
    if unknown:
        raise InputError(source, f"margins for unknown formats {unknown}", "equivalence_margins")
    return Preregistration(
        alpha=float(raw["alpha"]),
        primary=raw["primary"],
        contrasts=tuple(contrasts),
        margins={fmt: margins.get(fmt) for fmt in FORMATS},
        power=float(raw.get("power", 0.80)),
    )


def freeze(path: str | Path, lock_path: str | Path) -> dict[str, Any]:
    """Write the lock of ``path`` once; an existing lock is kept as it is and returned."""
    lock = Path(lock_path)
    if lock.exists():
        existing: dict[str, Any] = json.loads(lock.read_text(encoding="utf-8"))
        return existing
    load_preregistration(path)  # a malformed file is never locked
    record = {
        "file": str(path),
        "sha256": file_sha256(path),
        "locked_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_text(json.dumps(record, indent=2) + "\n", lock)
    return record


@dataclass(frozen=True)
class Status:
    pre_registered: bool
    reason: str


def status(path: str | Path, lock_path: str | Path) -> Status:
    """Whether results may be labelled pre-registered: the file still has the locked hash."""
    lock = Path(lock_path)
    if not lock.exists():
        return Status(False, f"no lock at {lock}: the pre-registration was never frozen")
    record = json.loads(lock.read_text(encoding="utf-8"))
    current = file_sha256(path)
    if current != record["sha256"]:
        return Status(
            False,
            f"{path} changed after it was locked at {record['locked_at']} "
            f"(sha256 {record['sha256'][:12]}… locked, {current[:12]}… now): "
            "results are exploratory",
        )
    return Status(True, f"locked at {record['locked_at']} (sha256 {record['sha256'][:12]}…)")
