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

from cueaudit.decision.formats import yaml_problem
from cueaudit.errors import InputError
from cueaudit.io import write_text

FORMATS = ("rate", "decide", "rank")
DOMAINS = ("hiring", "lending", "triage")
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
    """The planned family of a pre-registration file, checked field by field.

    Raises InputError naming the file and the key (``family.contrasts.<name>.focal``) for a
    missing or unreadable file, bad YAML, a missing key, a value of the wrong type, an unknown
    domain or format, or an alpha, power or margin out of range.
    """
    source = str(path)
    if not Path(path).is_file():
        raise InputError(source, "file not found")
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(source, f"cannot read: {error}") from error
    except yaml.YAMLError as error:
        raise InputError(source, f"not valid YAML: {yaml_problem(error)}") from error
    if not isinstance(raw, Mapping):
        raise InputError(source, "expected a mapping at the top level")
    for key in REQUIRED:
        if key not in raw:
            raise InputError(source, f"missing key '{key}'", key)
    family = _mapping(raw["family"], source, "family", ("domains", "formats", "contrasts"))
    domains = _names(family["domains"], source, "family.domains", DOMAINS, "domain")
    formats = _names(family["formats"], source, "family.formats", FORMATS, "format")
    planned = _mapping(family["contrasts"], source, "family.contrasts")
    if not planned:
        raise InputError(source, "no planned contrasts", "family.contrasts")
    specs = {
        str(name): _mapping(spec, source, f"family.contrasts.{name}", CONTRAST_KEYS)
        for name, spec in planned.items()
    }
    for name, spec in specs.items():
        for key in CONTRAST_KEYS:
            if not isinstance(spec[key], str) or not spec[key]:
                raise InputError(
                    source,
                    f"expected a non-empty string, got {spec[key]!r}",
                    f"family.contrasts.{name}.{key}",
                )
    contrasts = [
        PlannedContrast(domain, fmt, name, spec["dimension"], spec["focal"], spec["reference"])
        for domain in domains
        for fmt in formats
        for name, spec in specs.items()
    ]
    margins = _mapping(raw["equivalence_margins"], source, "equivalence_margins")
    unknown = sorted(set(margins) - set(FORMATS))
    if unknown:
        raise InputError(source, f"margins for unknown formats {unknown}", "equivalence_margins")
    for fmt, margin in margins.items():
        if margin is not None and not (_is_number(margin) and margin > 0):
            raise InputError(
                source, f"a positive number or null, got {margin!r}", f"equivalence_margins.{fmt}"
            )
    return Preregistration(
        alpha=_fraction(raw["alpha"], source, "alpha"),
        primary=_mapping(raw["primary"], source, "primary"),
        contrasts=tuple(contrasts),
        margins={fmt: margins.get(fmt) for fmt in FORMATS},
        power=_fraction(raw.get("power", 0.80), source, "power"),
    )


CONTRAST_KEYS = ("dimension", "focal", "reference")


def _mapping(value: Any, source: str, key: str, required: tuple[str, ...] = ()) -> Mapping:
    if not isinstance(value, Mapping):
        raise InputError(source, f"expected a mapping, got {value!r}", key)
    for name in required:
        if name not in value:
            raise InputError(source, f"missing key '{name}'", key)
    return value


def _names(value: Any, source: str, key: str, known: tuple[str, ...], noun: str) -> list[str]:
    if not isinstance(value, list) or not value:
        raise InputError(source, f"expected a non-empty list, got {value!r}", key)
    for name in value:
        if name not in known:
            raise InputError(source, f"unknown {noun} {name!r} (known: {', '.join(known)})", key)
    return list(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fraction(value: Any, source: str, key: str) -> float:
    if not _is_number(value) or not 0 < value < 1:
        raise InputError(source, f"a number between 0 and 1, got {value!r}", key)
    return float(value)


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
