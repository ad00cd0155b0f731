"""Decision-audit stimuli: the neutral profiles, the FairFund aid stimuli and the checks that
keep profiles and irrelevant attributes free of demographic cues.

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

**The demographic check** (:func:`check_profile_texts`, :func:`check_attribute_list`) flags,
in titles and texts: a pronoun or honorific, a term of ``demographic_terms.txt``, a configured
audit-cue string, and any first or last name of the given name lists. Names and terms match
whole words case-insensitively, with one exception, the *common-word rule*: a name that is also an
ordinary English word (:data:`COMMON_WORD_NAMES`, e.g. Young, Long, White, Black, Brown, Rice,
Park, Battle, Will; extend it with ``common_words``) counts only when it is capitalised and not
at the start of a sentence. So "a quiet street near the park" and "Long waits ..." pass, while
"… referred by Park …" is rejected. A sentence-initial proper name slips through this rule;
the list is kept short and explicit so that the gap stays small and visible, rather than
guessed from a dictionary that also holds most names. The honorifics Mr, Mrs, Ms, Miss and Mx
match only as written (capitalised), so the degree "MS" and "ms" (milliseconds) pass.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import polars as pl

from cueaudit.cues.name_pairs import NAME_PAIR_SCHEMA
from cueaudit.decision.formats import PROFILE_DOMAINS, PromptResources, title_variant_texts
from cueaudit.errors import InputError
from cueaudit.io import read_bytes_checked, read_csv_records, read_jsonl

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

PRONOUNS: Final = ("he", "she", "him", "her", "his", "hers", "himself", "herself")
HONORIFICS: Final = ("Mr", "Mrs", "Ms", "Miss", "Mx")
# Names that are also ordinary English words: these count only when capitalised mid-sentence.
_COMMON_WORDS: Final = """
    young long white black brown green gray grey rice park sun king hill wood woods bell
    hall ward price banks battle cook baker mason hunter carpenter fisher miller walker
    porter turner mark will bill art rose hope faith grace joy may june april summer dawn
    chase case page love cross rich strong sharp short small little golden stone field
    fields moss lane bush berry bond jean van ken lee guy sue pat penny ruby amber crystal
    jade iris ivy holly daisy violet heather olive hazel sterling grant frank earnest royal
    noble major best early wise hardy friend house rivers branch lamb fox wolf swift rush
"""
COMMON_WORD_NAMES: Final = frozenset(_COMMON_WORDS.split())


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


# --- FairFund-Bench stimuli --------------------------------------------------------------

FAIRFUND_SCHEMA: Final = {
    "stimulus_id": pl.String,
    "category": pl.String,
    "scenario_id": pl.String,
    "scenario_label": pl.String,
    "framing": pl.String,
    # the name columns are those of a name pair
    **{
        c: NAME_PAIR_SCHEMA[c]
        for c in ("race", "gender", "name_rank", "first", "last", "full_name")
    },
    "text": pl.String,
    "word_count": pl.Int64,
    "target_word_count": pl.Int64,
    "within_tolerance": pl.Boolean,
}
FAIRFUND_VALUES: Final = {
    "category": ("Medical", "Rent", "Education"),
    "framing": (
        "no_cause",
        "structural",
        "self_cause",
        "stigma_no_redemption",
        "stigma_redemption",
    ),
    "race": ("White", "Black", "Hispanic", "Asian"),
    "gender": ("Male", "Female"),
}
_BOOLEANS: Final = {"TRUE": True, "FALSE": False, "True": True, "False": False}


def load_fairfund_stimuli(path: str | Path) -> pl.DataFrame:
    """FairFund-Bench's ``stimuli.csv`` (CC-BY-4.0; read from a configured path, never copied)
    in :data:`FAIRFUND_SCHEMA`, labels as its codebook gives them (race ``White``…, gender
    ``Male``/``Female``).

    Raises InputError naming file, line and field for a missing column, a label outside the
    codebook, a non-integer count, a boolean other than TRUE/FALSE, a duplicate
    ``stimulus_id``, or a ``full_name`` that is not ``first last`` or is absent from the text.
    """
    src = str(path)
    ints = [c for c, t in FAIRFUND_SCHEMA.items() if t == pl.Int64]
    rows: list[dict[str, object]] = []
    seen: dict[str, int] = {}
    for line, rec in read_csv_records(path, tuple(FAIRFUND_SCHEMA)):
        row: dict[str, object] = {c: rec[c] for c in FAIRFUND_SCHEMA}
        for column, allowed in FAIRFUND_VALUES.items():
            if rec[column] not in allowed:
                raise InputError(
                    src, f"line {line}: {rec[column]!r} is not one of {list(allowed)}", column
                )
        for column in ints:
            try:
                row[column] = int(rec[column])
            except ValueError:
                raise InputError(
                    src, f"line {line}: {rec[column]!r} is not an integer", column
                ) from None
        if rec["within_tolerance"] not in _BOOLEANS:
            raise InputError(
                src,
                f"line {line}: {rec['within_tolerance']!r} is not TRUE/FALSE",
                "within_tolerance",
            )
        row["within_tolerance"] = _BOOLEANS[rec["within_tolerance"]]
        if (
            rec["full_name"] != f"{rec['first']} {rec['last']}"
            or rec["full_name"] not in rec["text"]
        ):
            raise InputError(
                src,
                f"line {line}: {rec['full_name']!r} is not first last, in the text",
                "full_name",
            )
        if rec["stimulus_id"] in seen:
            raise InputError(
                src,
                f"line {line}: duplicate {rec['stimulus_id']!r} (first at line "
                f"{seen[rec['stimulus_id']]})",
                "stimulus_id",
            )
        seen[rec["stimulus_id"]] = line
        rows.append(row)
    return pl.DataFrame(rows, schema=FAIRFUND_SCHEMA, orient="row")


# --- word lists and the demographic check ------------------------------------------------


def _read_list(path: str | Path) -> list[tuple[int, str]]:
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
    return [entry for _, entry in _read_list(path)]


def load_terms(path: str | Path) -> list[str]:
    """The gendered and racialised terms of ``demographic_terms.txt``."""
    return [entry for _, entry in _read_list(path)]


@dataclass(frozen=True)
class Finding:
    """One demographic cue found: where (label and field), what kind, and the token as written."""

    label: str
    field: str
    kind: str
    token: str


def _phrase_pattern(phrase: str) -> str:
    """A term as a whole-word pattern; its last word also in the plural ("Asians",
    "Hispanics", "Native Americans"), a space or hyphen inside it matching either."""
    parts = [re.escape(p) for p in re.split(r"[\s\-‐]+", phrase.strip()) if p]
    plural = r"(?:e?s)?" if parts and parts[-1][-1:].isalpha() else ""
    return r"(?<!\w)" + r"[\s\-‐]+".join(parts) + plural + r"(?!\w)"


def _cue_pattern(cue: str) -> str:
    body = r"\s+".join(re.escape(p) for p in cue.split())
    start = r"(?<!\w)" if re.match(r"\w", cue.strip()) else ""
    end = r"(?!\w)" if re.search(r"\w$", cue.strip()) else ""
    return start + body + end


def _sentence_start(text: str, index: int) -> bool:
    before = text[:index].rstrip().rstrip("\"'([“‘").rstrip()
    return not before or before[-1] in ".!?:"


class _Checker:
    def __init__(
        self,
        names: Iterable[str],
        terms: Sequence[str],
        cues: Sequence[str],
        common: frozenset[str],
        allowed: Sequence[str] = (),
    ) -> None:
        cues = [c for c in cues if c.strip()]
        allowed = sorted((a for a in allowed if a.strip()), key=len, reverse=True)
        self.allowed = (
            re.compile("|".join(_cue_pattern(a) for a in allowed), re.IGNORECASE)
            if allowed
            else None
        )
        tokens = {part for name in names for part in name.split() if part}
        self.common = {t.casefold() for t in tokens if t.casefold() in common}
        plain = sorted({t.casefold() for t in tokens} - self.common, key=len, reverse=True)
        flags = re.IGNORECASE
        self.patterns: list[tuple[str, re.Pattern[str]]] = [
            ("pronoun", re.compile(r"(?<!\w)(?:" + "|".join(PRONOUNS) + r")(?!\w)", flags)),
            ("honorific", re.compile(r"(?<!\w)(?:" + "|".join(HONORIFICS) + r")(?!\w)")),
        ]
        if terms:
            joined = "|".join(_phrase_pattern(t) for t in sorted(terms, key=len, reverse=True))
            self.patterns.append(("demographic term", re.compile(joined, flags)))
        if cues:
            self.patterns.append(
                (
                    "audit cue",
                    re.compile("|".join(_cue_pattern(c) for c in cues), flags),
                )
            )
        if plain:
            joined = "|".join(re.escape(t) for t in plain)
            self.patterns.append(("name", re.compile(rf"(?<!\w)(?:{joined})(?!\w)", flags)))
        if self.common:
            joined = "|".join(re.escape(t) for t in sorted(self.common, key=len, reverse=True))
            self.common_re: re.Pattern[str] | None = re.compile(
                rf"(?<!\w)(?:{joined})(?!\w)", flags
            )
        else:
            self.common_re = None

    def find(self, label: str, field: str, text: str) -> Iterator[Finding]:
        if self.allowed is not None:  # an allowed phrase is no signal, whatever it contains
            text = self.allowed.sub(lambda m: " " * len(m.group(0)), text)
        for kind, pattern in self.patterns:
            for m in pattern.finditer(text):
                yield Finding(label, field, kind, m.group(0))
        if self.common_re is not None:
            for m in self.common_re.finditer(text):
                if m.group(0)[0].isupper() and not _sentence_start(text, m.start()):
                    yield Finding(label, field, "name (capitalised common word)", m.group(0))


def find_demographic_cues(
    texts: Iterable[tuple[str, str, str]],
    *,
    names: Iterable[str],
    terms_path: str | Path,
    audit_cues: Sequence[str] = (),
    common_words: Iterable[str] = (),
    allowed: Sequence[str] = (),
) -> list[Finding]:
    """Every cue in ``(label, field, text)`` triples, in input order (see the module docstring);
    ``allowed`` phrases (``Washington State University``) are skipped whatever they contain."""
    common = COMMON_WORD_NAMES | {w.casefold() for w in common_words}
    checker = _Checker(names, load_terms(terms_path), audit_cues, common, allowed)
    return [f for label, field, text in texts for f in checker.find(label, field, text)]


def _raise_findings(findings: Sequence[Finding], what: str) -> None:
    if not findings:
        return
    first = findings[0]
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    raise InputError(
        f"{what} {first.label}", f"contains the {first.kind} {first.token!r}{more}", first.field
    )


def _check_texts(
    texts: Sequence[tuple[str, str, str]],
    what: str,
    *,
    names: Iterable[str],
    terms_path: str | Path,
    audit_cues: Sequence[str],
    common_words: Iterable[str],
    allowed: Sequence[str],
) -> None:
    findings = find_demographic_cues(
        texts,
        names=names,
        terms_path=terms_path,
        audit_cues=audit_cues,
        common_words=common_words,
        allowed=allowed,
    )
    _raise_findings(findings, what)


def check_profile_texts(
    profiles: pl.DataFrame,
    *,
    names: Iterable[str],
    terms_path: str | Path,
    audit_cues: Sequence[str] = (),
    common_words: Iterable[str] = (),
    allowed: Sequence[str] = (),
) -> None:
    """Raise InputError naming the profile id, field and token of the first demographic cue in
    any profile's title or text (see the module docstring for what counts)."""
    texts = [
        (pid, field, value)
        for pid, title, text in profiles.select("profile_id", "title", "text").iter_rows()
        for field, value in (("title", title), ("text", text))
    ]
    _check_texts(
        texts,
        "profile",
        names=names,
        terms_path=terms_path,
        audit_cues=audit_cues,
        common_words=common_words,
        allowed=allowed,
    )


def check_attribute_list(
    path: str | Path,
    *,
    names: Iterable[str],
    terms_path: str | Path,
    audit_cues: Sequence[str] = (),
    common_words: Iterable[str] = (),
    allowed: Sequence[str] = (),
) -> list[str]:
    """Load an attribute list and apply the profile check to each entry (label ``file:line``)."""
    entries = _read_list(path)
    _check_texts(
        [(f"{path}:{line}", "entry", entry) for line, entry in entries],
        "attribute",
        names=names,
        terms_path=terms_path,
        audit_cues=audit_cues,
        common_words=common_words,
        allowed=allowed,
    )
    return [entry for _, entry in entries]


def check_wordings(resources: PromptResources, **check: Any) -> None:
    """Apply the profile check (``check``: the keyword arguments of
    :func:`find_demographic_cues`) to the title-line wordings of a prompts file, the
    paraphrase-matched bundles' one varying line, which must carry no demographic cue; each is
    labelled by its file and key."""
    _raise_findings(find_demographic_cues(title_variant_texts(resources), **check), "wording")
