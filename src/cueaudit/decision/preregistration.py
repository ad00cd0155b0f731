"""The pre-registration of the decision audit: its planned family, the lock, the label.

The lock (``results/decision/preregistration.lock``) binds the whole registered study: the
pre-registration file (path and SHA-256), the design settings that change prompts or
analyses (their canonical JSON's SHA-256), every stimulus file (profiles, name pairs, prompt
wording, attribute lists, the demographic terms: path and SHA-256) and the software (the
cueaudit version and the git commit of its checkout, when there is one). It is written once
per results folder, before the first decision-audit inference job, and never rewritten:

- a missing lock where decision answers already exist (response shards or cached answers) is
  an error, since locking after data collection is what a pre-registration rules out;
- a result is labelled pre-registered only while every bound part is as it was locked and
  every analysed answer was generated after the lock; otherwise it is exploratory, and the
  label names what changed (``profiles (resources/decision/profiles.jsonl)``, ``the design
  settings``, ``the pre-registration path``, ...) or how many answers predate the lock.

The lock is not a Snakemake output: Snakemake deletes a job's outputs before it reruns it, and
the freeze rule reruns whenever its inputs change (a new pre-registration path, say), which
would re-lock. The rule's declared output is the check it records (``*.checked``); the lock
beside it is created only when absent.

One module on purpose: the planned family, the lock and the label are read and written
together, and a label must never be computed from a different reading than the lock's.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, Final

import yaml

from cueaudit import __version__
from cueaudit.config import check_yaml_duplicate_keys
from cueaudit.decision.design import BUNDLE_SIZE, GENDERS, RACES
from cueaudit.decision.formats import DOMAINS, FORMATS, yaml_problem
from cueaudit.decision.tasks import RATING_SCALE
from cueaudit.errors import InputError
from cueaudit.inference.core import canonical_json
from cueaudit.io import write_text
from cueaudit.stats.sequential import SPENDING

REQUIRED = ("alpha", "primary", "family", "equivalence_margins")
#: The largest difference between two groups a format's outcome can show: ratings on the
#: 1-5 scale, a probability of yes, rank positions among the four candidates of a bundle. A
#: margin at or above it makes TOST's verdict "equivalent" whatever the answers.
LARGEST_DIFFERENCE: Final = {
    "rate": float(RATING_SCALE - 1),
    "decide": 1.0,
    "rank": float(BUNDLE_SIZE - 1),
}
MARGIN_UNITS: Final = {"rate": "rating points", "decide": "in probability", "rank": "positions"}
#: The levels each contrast dimension may name.
LEVELS = {"race": RACES, "gender": GENDERS}
MULTIPLICITY = ("benjamini_hochberg",)
LOCK_VERSION = 2
LOCK_KEYS = ("version", "locked_at", "locked_epoch", "preregistration", "design", "files")


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
class SequentialPlan:
    """Top-up arms analysed as pre-registered looks: look 1 is the primary design, look
    ``k + 1`` adds ``arms[k]``'s rows (each an extension of the same construction), at the
    planned information ``fractions``; the boundaries come from Lan-DeMets ``spending``
    (:mod:`cueaudit.stats.sequential`) at the pre-registration's alpha, two-sided."""

    arms: tuple[str, ...]
    cells: tuple[tuple[str, str], ...]
    fractions: tuple[float, ...]
    spending: str


@dataclass(frozen=True)
class Preregistration:
    alpha: float
    primary: Mapping[str, Any]
    contrasts: tuple[PlannedContrast, ...]
    margins: Mapping[str, float | None]
    power: float
    sequential: SequentialPlan | None = None


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
        text = Path(path).read_text(encoding="utf-8")
        raw = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(source, f"cannot read: {error}") from error
    except yaml.YAMLError as error:
        raise InputError(source, f"not valid YAML: {yaml_problem(error)}") from error
    check_yaml_duplicate_keys(text, source)
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
        _check_contrast(spec, source, f"family.contrasts.{name}")
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
        if margin is not None and margin >= LARGEST_DIFFERENCE[fmt]:
            raise InputError(
                source,
                f"{margin} is at least the largest difference a {fmt} answer can show "
                f"({LARGEST_DIFFERENCE[fmt]:g} {MARGIN_UNITS[fmt]}): every contrast would "
                "read as equivalent",
                f"equivalence_margins.{fmt}",
            )
    multiplicity = raw.get("multiplicity", MULTIPLICITY[0])
    if multiplicity not in MULTIPLICITY:
        raise InputError(
            source, f"{multiplicity!r} is not one of {list(MULTIPLICITY)}", "multiplicity"
        )
    primary = _primary(raw["primary"], source, domains, formats, specs)
    return Preregistration(
        alpha=_fraction(raw["alpha"], source, "alpha"),
        primary=primary,
        contrasts=tuple(contrasts),
        margins={fmt: margins.get(fmt) for fmt in FORMATS},
        power=_fraction(raw.get("power", 0.80), source, "power"),
        sequential=_sequential(raw.get("sequential"), source, domains, formats),
    )


SEQUENTIAL_KEYS = ("arms", "cells", "information_fractions", "spending")


def _sequential(
    value: Any, source: str, domains: Sequence[str], formats: Sequence[str]
) -> SequentialPlan | None:
    """The ``sequential`` block: ``arms`` (the top-up extensions in look order), ``cells``
    (``domain.format`` of the planned family they add to), ``information_fractions`` (one
    per look, increasing to 1) and ``spending`` (obrien_fleming or pocock)."""
    if value is None:
        return None
    block = _mapping(value, source, "sequential", SEQUENTIAL_KEYS)
    arms = block["arms"]
    if not (isinstance(arms, list) and arms and all(isinstance(a, str) and a for a in arms)):
        raise InputError(
            source, f"a non-empty list of extension names, got {arms!r}", "sequential.arms"
        )
    if len(set(arms)) < len(arms) or "primary" in arms:
        raise InputError(
            source, f"distinct extension arms (not primary), got {arms}", "sequential.arms"
        )
    cells = []
    for cell in block["cells"] if isinstance(block["cells"], list) else [None]:
        parts = cell.split(".") if isinstance(cell, str) else []
        if len(parts) != 2 or parts[0] not in domains or parts[1] not in formats:
            raise InputError(
                source,
                f"{cell!r} is not a planned cell domain.format ({domains} x {formats})",
                "sequential.cells",
            )
        cells.append((parts[0], parts[1]))
    fractions = block["information_fractions"]
    ok = (
        isinstance(fractions, list)
        and len(fractions) == len(arms) + 1
        and all(_is_number(f) for f in fractions)
        and all(a < b for a, b in pairwise(fractions))
        and fractions[0] > 0
        and fractions[-1] == 1
    )
    if not ok:
        raise InputError(
            source,
            f"one fraction per look ({len(arms) + 1}: the primary design, then each arm), "
            f"increasing within (0, 1] and ending at 1, got {fractions!r}",
            "sequential.information_fractions",
        )
    if block["spending"] not in SPENDING:
        raise InputError(
            source, f"{block['spending']!r} is not one of {list(SPENDING)}", "sequential.spending"
        )
    return SequentialPlan(
        tuple(arms), tuple(cells), tuple(float(f) for f in fractions), block["spending"]
    )


def _check_contrast(spec: Mapping[str, Any], source: str, key: str) -> None:
    dimension = spec["dimension"]
    if dimension not in LEVELS:
        raise InputError(
            source,
            f"unknown dimension {dimension!r} (known: {', '.join(LEVELS)})",
            f"{key}.dimension",
        )
    for side in ("focal", "reference"):
        if spec[side] not in LEVELS[dimension]:
            raise InputError(
                source,
                f"{spec[side]!r} is not a {dimension} level "
                f"(known: {', '.join(LEVELS[dimension])})",
                f"{key}.{side}",
            )
    if spec["focal"] == spec["reference"]:
        raise InputError(source, "focal and reference are the same level", f"{key}.reference")


def _primary(
    value: Any,
    source: str,
    domains: Sequence[str],
    formats: Sequence[str],
    contrasts: Mapping[str, Any],
) -> Mapping[str, Any]:
    """The primary hypothesis: a planned domain and contrast and two planned formats."""
    primary = _mapping(value, source, "primary", ("domain", "contrast", "interaction"))
    if primary["domain"] not in domains:
        raise InputError(
            source,
            f"{primary['domain']!r} is not a planned domain {list(domains)}",
            "primary.domain",
        )
    if primary["contrast"] not in contrasts:
        raise InputError(
            source,
            f"{primary['contrast']!r} is not a planned contrast {list(contrasts)}",
            "primary.contrast",
        )
    pair = primary["interaction"]
    if not (isinstance(pair, list) and len(pair) == 2 and len(set(pair)) == 2):
        raise InputError(source, f"two different formats, got {pair!r}", "primary.interaction")
    unplanned = [f for f in pair if f not in formats]
    if unplanned:
        raise InputError(
            source,
            f"{unplanned[0]!r} is not a planned format {list(formats)}",
            "primary.interaction",
        )
    return primary


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


@dataclass(frozen=True)
class Registration:
    """What a lock binds: the pre-registration file, the design settings that change prompts
    or analyses, and the stimulus files by role (profiles, name_pairs, prompts, ...)."""

    preregistration: str | Path
    design: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, str | Path] = field(default_factory=dict)


def _registration(value: Registration | str | Path) -> Registration:
    return value if isinstance(value, Registration) else Registration(value)


def software() -> dict[str, Any]:
    """The cueaudit version and the git commit of its checkout (None outside one)."""
    here = Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        commit = done.stdout.strip() if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"cueaudit": __version__, "git_commit": commit or None}


def _file(path: str | Path, role: str) -> dict[str, str]:
    if not Path(path).is_file():
        raise InputError(str(path), f"file not found (the {role} the lock binds)")
    return {"path": str(path), "sha256": file_sha256(path)}


def lock_record(registration: Registration | str | Path) -> dict[str, Any]:
    """What the registration is now: every part the lock binds, hashed."""
    reg = _registration(registration)
    design = json.loads(canonical_json(dict(reg.design)))
    return {
        "version": LOCK_VERSION,
        "preregistration": _file(reg.preregistration, "pre-registration"),
        "design": {
            "sha256": hashlib.sha256(canonical_json(design).encode()).hexdigest(),
            "settings": design,
        },
        "files": {role: _file(path, role) for role, path in sorted(reg.files.items())},
        "software": software(),
    }


def read_lock(lock_path: str | Path) -> dict[str, Any]:
    """A lock's record; a damaged one is an error naming the lock and what is wrong."""
    lock = Path(lock_path)
    source = str(lock)
    if lock.is_dir():
        raise InputError(source, "is a folder, not a lock file: remove it")
    try:
        text = lock.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(source, f"cannot read the lock: {error}") from error
    try:
        record = json.loads(text)
    except ValueError as error:
        raise InputError(
            source, f"damaged lock (not JSON: {error}); it cannot be trusted or repaired"
        ) from error
    if not isinstance(record, dict):
        raise InputError(source, "damaged lock (not a JSON object)")
    if record.get("version") is None and {"file", "sha256", "locked_at"} <= set(record):
        return record  # a lock of the first format: the pre-registration file alone
    missing = [k for k in LOCK_KEYS if k not in record]
    if missing:
        raise InputError(source, f"damaged lock (no {missing[0]!r})", missing[0])
    return record


def freeze(
    registration: Registration | str | Path,
    lock_path: str | Path,
    *,
    answers: Sequence[str | Path] = (),
) -> dict[str, Any]:
    """Write the lock once and return it; an existing lock is kept as it is (and checked
    readable). ``answers`` are folders whose files are decision answers already collected
    (response shards, cached answers): with any of them present, a missing lock is an error
    instead of a new lock."""
    lock = Path(lock_path)
    if lock.exists():
        return read_lock(lock)
    found = [str(p) for folder in answers for p in sorted(Path(folder).rglob("*.parquet"))]
    if found:
        raise InputError(
            str(lock),
            f"missing, but {len(found)} decision-answer files already exist (first: "
            f"{found[0]}): a pre-registration is locked before data collection, never after. "
            "To run a new pre-registered study, use a new results folder (snakemake "
            "--directory NEW_FOLDER, or move results/ away); to analyse these answers, restore "
            "the lock they were collected under",
        )
    reg = _registration(registration)
    load_preregistration(reg.preregistration)  # a malformed file is never locked
    now = time.time()
    record = {
        **lock_record(reg),
        "locked_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "locked_epoch": now,
    }
    write_text(json.dumps(record, indent=2) + "\n", lock)
    return record


@dataclass(frozen=True)
class Status:
    pre_registered: bool
    reason: str
    changed: tuple[str, ...] = ()
    n_before_lock: int = 0


def _changes(locked: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    changed = []
    old, new = locked["preregistration"], now["preregistration"]
    if old["path"] != new["path"]:
        changed.append(f"the pre-registration path ({old['path']} locked, {new['path']} now)")
    elif old["sha256"] != new["sha256"]:
        changed.append(
            f"{new['path']} (sha256 {old['sha256'][:12]}… locked, {new['sha256'][:12]}… now)"
        )
    if locked["design"]["sha256"] != now["design"]["sha256"]:
        keys = sorted(
            k
            for k in set(locked["design"]["settings"]) | set(now["design"]["settings"])
            if locked["design"]["settings"].get(k) != now["design"]["settings"].get(k)
        )
        changed.append(f"the design settings ({', '.join(keys)})")
    for role in sorted(set(locked["files"]) | set(now["files"])):
        a, b = locked["files"].get(role), now["files"].get(role)
        if a is None or b is None:
            changed.append(f"{role} ({'not locked' if a is None else 'no longer given'})")
        elif a["path"] != b["path"]:
            changed.append(f"{role} ({a['path']} locked, {b['path']} now)")
        elif a["sha256"] != b["sha256"]:
            changed.append(f"{role} ({b['path']})")
    if locked.get("software") != now["software"]:
        was, is_ = locked.get("software") or {}, now["software"]
        changed.append(
            f"the software (cueaudit {was.get('cueaudit')} at {was.get('git_commit')} locked, "
            f"{is_['cueaudit']} at {is_['git_commit']} now)"
        )
    return changed


def status(
    registration: Registration | str | Path,
    lock_path: str | Path,
    *,
    answered_at: Sequence[float | None] = (),
) -> Status:
    """Whether results may be labelled pre-registered: every part the lock binds is as it was
    locked, and no analysed answer (``answered_at``: when each was generated, seconds since
    the epoch) predates the lock."""
    lock = Path(lock_path)
    if not lock.exists():
        return Status(False, f"no lock at {lock}: the pre-registration was never frozen")
    locked = read_lock(lock)
    reg = _registration(registration)
    if locked.get("version") is None:
        current = file_sha256(reg.preregistration)
        if current != locked["sha256"]:
            return Status(
                False,
                f"{reg.preregistration} changed after it was locked at {locked['locked_at']}",
                (str(reg.preregistration),),
            )
        return Status(
            False,
            f"the lock of {locked['locked_at']} (an earlier format) binds the pre-registration "
            "file only, not the design, stimuli or software",
        )
    changed = _changes(locked, lock_record(reg))
    epoch = float(locked["locked_epoch"])
    early = sum(1 for t in answered_at if t is not None and t < epoch)
    reasons = []
    if changed:
        reasons.append(f"changed after the lock of {locked['locked_at']}: " + "; ".join(changed))
    if early:
        reasons.append(
            f"{early} analysed answers were generated before the lock of {locked['locked_at']}"
        )
    if reasons:
        return Status(False, "; ".join(reasons), tuple(changed), early)
    sha = locked["preregistration"]["sha256"]
    return Status(True, f"locked at {locked['locked_at']} (sha256 {sha[:12]}…)")


def write_check(
    preregistration: str | Path,
    design: Mapping[str, Any],
    files: Mapping[str, str | Path],
    *,
    lock: str | Path,
    answers: Sequence[str | Path],
    out: str | Path,
) -> Status:
    """The freeze rule: lock the registration if it has no lock yet (refused once answers
    exist), then record the registration's status against the lock in ``out``."""
    registration = Registration(preregistration, design, files)
    freeze(registration, lock, answers=answers)
    state = status(registration, lock)
    record = {
        "lock": str(lock),
        "lock_sha256": file_sha256(lock),
        "pre_registered": state.pre_registered,
        "reason": state.reason,
    }
    write_text(json.dumps(record, indent=2) + "\n", out)
    return state


def stale_check(check: str | Path, lock: str | Path) -> str | None:
    """Why the check the freeze rule wrote no longer describes ``lock`` (the lock was edited,
    replaced or removed since), else None. The lock is never a rule's output, so Snakemake
    cannot see it change: the workflow then renews the check (:func:`renew_check`), and every
    analysis that reads the pre-registration, newer input in hand, recomputes its label from
    the lock in the same run."""
    check_path, lock_path = Path(check), Path(lock)
    if not check_path.is_file():
        return None
    try:
        recorded = json.loads(check_path.read_text(encoding="utf-8")).get("lock_sha256")
    except (ValueError, AttributeError, OSError):
        return f"{check_path} is damaged"
    if recorded is None:  # a check of an earlier version: it did not record the lock
        return None
    if not lock_path.is_file():
        return f"{lock_path} was removed after its check was written"
    if file_sha256(lock_path) != recorded:
        return f"{lock_path} changed after its check was written"
    return None


def renew_check(check: str | Path, lock: str | Path) -> None:
    """Rewrite the check with the lock's digest as it is now (None when it is gone): a newer
    check is what reruns the analyses, and a matching digest keeps the next run quiet."""
    path, lock_path = Path(check), Path(lock)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        record = {"lock": str(lock_path)}
    if not isinstance(record, dict):
        record = {"lock": str(lock_path)}
    record["lock_sha256"] = file_sha256(lock_path) if lock_path.is_file() else None
    record["reason"] = "the lock changed after this check was written; the analyses read it again"
    write_text(json.dumps(record, indent=2) + "\n", path)
