"""Decision-audit stimuli: the neutral profiles and the lists of irrelevant attributes and
demographic terms. FairFund's aid stimuli are read by :mod:`cueaudit.decision.fairfund`; the
check that keeps profiles and attributes free of demographic cues is
:mod:`cueaudit.decision.demographic_checks`.

Profiles are read from a configured path in one of two formats:

* ``cueaudit`` (``resources/decision/profiles.jsonl``, authored for this project): one JSON
  object a line with ``profile_id, domain, tier, title, text, source``.
* ``agentfairbench`` (AgentFairBench v1 ``public_dev.jsonl``, CC-BY-4.0, never copied into the
  repository): ``id → profile_id``, ``content → text``, ``difficulty`` clear-yes / borderline /
  clear-no → ``tier`` with underscores, ``source = "agentfairbench"``; its
  ``content_sha256_16`` is checked against the content when present.

Configured ``strip_suffixes`` (e.g. AgentFairBench's "(Synthetic teaching vignette, not real
PHI.)", which itself reads as an audit cue) are removed from the end of each text together
with the whitespace around them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import polars as pl

from cueaudit.decision.formats import PROFILE_DOMAINS
from cueaudit.errors import InputError
from cueaudit.io import read_bytes_checked, read_jsonl

#: The quality tiers of a profile, best first.
TIERS: Final = ("clear_yes", "borderline", "clear_no")
PROFILE_SCHEMA: Final = {
    "profile_id": pl.String,
    "domain": pl.String,
    "tier": pl.String,
    "title": pl.String,
    "text": pl.String,
    "source": pl.String,
}
AUTHORED_SOURCE: Final = "cueaudit-authored"
AFB_SUFFIX: Final = "(Synthetic teaching vignette, not real PHI.)"

ProfileFormat = Literal["cueaudit", "agentfairbench"]
# format → (input field for each PROFILE_SCHEMA column; None: a constant)
_FIELDS: Final[dict[str, dict[str, str | None]]] = {
    "cueaudit": {c: c for c in PROFILE_SCHEMA},
    "agentfairbench": {
        "profile_id": "id",
        "domain": "domain",
        "tier": "difficulty",
        "title": "title",
        "text": "content",
        "source": None,
    },
}

# a profile file holds the profile domains (the aid domain's profiles are FairFund's appeals)
_DOMAIN_VALUES: Final = {d: d for d in PROFILE_DOMAINS}
# the value each format writes → the tier
_TIER_VALUES: Final = {
    "cueaudit": {t: t for t in TIERS},
    "agentfairbench": {t.replace("_", "-"): t for t in TIERS},
}


def _strip_suffixes(text: str, suffixes: Sequence[str]) -> str:
    text = text.strip()
    changed = True
    while changed:
        changed = False
        for suffix in suffixes:
            if suffix and text.endswith(suffix):
                text = text[: -len(suffix)].rstrip()
                changed = True
    return text


def load_profiles(
    path: str | Path,
    format: ProfileFormat = "cueaudit",
    strip_suffixes: Sequence[str] = (),
) -> pl.DataFrame:
    """Profiles in :data:`PROFILE_SCHEMA`, in file order.

    Raises InputError naming the file, line and field for bad JSON, a missing or non-string
    field, an unknown domain or tier, a duplicate id, a text left empty after stripping, or
    (AgentFairBench) a content hash that does not match.
    """
    if format not in _FIELDS:
        raise InputError(str(path), f"unknown profile format {format!r}", field="format")
    fields = _FIELDS[format]
    src = str(path)
    rows: list[dict[str, str]] = []
    seen: dict[str, int] = {}
    for line, record in read_jsonl(path):
        row: dict[str, str] = {}
        for column, key in fields.items():
            if key is None:
                row[column] = format
                continue
            value = record.get(key)
            if not isinstance(value, str) or not value.strip():
                what = "missing" if value is None else f"not a non-empty string ({value!r})"
                raise InputError(src, f"line {line}: {what}", field=key)
            row[column] = value.strip()
        if format == "agentfairbench":
            _check_hash(record, src, line)
        for column, allowed in (("domain", _DOMAIN_VALUES), ("tier", _TIER_VALUES[format])):
            if row[column] not in allowed:
                raise InputError(
                    src,
                    f"line {line}: {row[column]!r} is not one of {list(allowed)}",
                    field=fields[column],
                )
            row[column] = allowed[row[column]]
        row["text"] = _strip_suffixes(row["text"], strip_suffixes)
        if not row["text"]:
            raise InputError(src, f"line {line}: text is empty after stripping", fields["text"])
        pid = row["profile_id"]
        if pid in seen:
            raise InputError(
                src,
                f"line {line}: duplicate id {pid!r} (first at line {seen[pid]})",
                fields["profile_id"],
            )
        seen[pid] = line
        rows.append(row)
    return pl.DataFrame(rows, schema=PROFILE_SCHEMA)


def _check_hash(record: Mapping[str, Any], src: str, line: int) -> None:
    expected = record.get("content_sha256_16")
    if expected is None:
        return
    actual = hashlib.sha256(str(record["content"]).encode("utf-8")).hexdigest()[: len(expected)]
    if not isinstance(expected, str) or actual != expected:
        raise InputError(
            src, f"line {line}: content hash {expected!r} != {actual!r}", "content_sha256_16"
        )


def tier_counts(profiles: pl.DataFrame) -> dict[str, dict[str, int]]:
    """``{domain: {tier: n}}`` with every domain and tier of the frame (zeros included)."""
    out = {d: dict.fromkeys(TIERS, 0) for d in profiles["domain"].unique().sort()}
    for domain, tier, n in profiles.group_by("domain", "tier").len().iter_rows():
        out[domain][tier] = n
    return out


def read_list(path: str | Path) -> list[tuple[int, str]]:
    """``(line, entry)`` of a one-entry-a-line file; ``#`` starts a comment; no duplicates."""
    src = str(path)
    entries: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(read_bytes_checked(path).splitlines(), start=1):
        entry = " ".join(raw.split("#", 1)[0].split())
        if not entry:
            continue
        key = entry.casefold()
        if key in seen:
            raise InputError(src, f"line {number}: duplicate {entry!r} (first at line {seen[key]})")
        seen[key] = number
        entries.append((number, entry))
    if not entries:
        raise InputError(src, "no entries (only comments or blank lines)")
    return entries


def load_attribute_list(path: str | Path) -> list[str]:
    """An irrelevant-attribute list (``hobbies.txt``, ``neighbourhoods.txt``) in file order."""
    return [entry for _, entry in read_list(path)]


def load_terms(path: str | Path) -> list[str]:
    """The gendered and racialised terms of ``demographic_terms.txt``."""
    return [entry for _, entry in read_list(path)]
