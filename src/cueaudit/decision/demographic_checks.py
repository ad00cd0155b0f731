"""The demographic check of the decision audit's stimuli (:func:`check_profile_texts`,
:func:`check_attribute_list`, :func:`check_wordings`) flags,
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

Texts, names, terms and phrases are compared folded (:mod:`cueaudit.cues.lookalikes`): a term
written with a Cyrillic letter, in full-width forms or with an invisible character inside is
found, and reported as written. Names outside the lists and institutions that code race are
not: that judgement stays the user's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import polars as pl

from cueaudit.cues.lookalikes import fold, fold_text
from cueaudit.decision.formats import PromptResources, title_variant_texts
from cueaudit.decision.profiles import load_terms, read_list
from cueaudit.errors import InputError

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


@dataclass(frozen=True)
class Finding:
    """One demographic cue found: where (label and field), what kind, the token as written and,
    when it is written with look-alike characters, what it reads as."""

    label: str
    field: str
    kind: str
    token: str
    reads_as: str | None = None


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
        names, terms = [fold_text(n) for n in names], [fold_text(t) for t in terms]
        cues = [fold_text(c) for c in cues if c.strip()]
        allowed = sorted((fold_text(a) for a in allowed if a.strip()), key=len, reverse=True)
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
        folded = fold(text)
        text = folded.text
        if self.allowed is not None:  # an allowed phrase is no signal, whatever it contains
            text = self.allowed.sub(lambda m: " " * len(m.group(0)), text)

        def finding(kind: str, m: re.Match[str]) -> Finding:
            written = folded.original(m.start(), m.end())
            return Finding(label, field, kind, written, None if written == m[0] else m[0])

        for kind, pattern in self.patterns:
            for m in pattern.finditer(text):
                yield finding(kind, m)
        if self.common_re is not None:
            for m in self.common_re.finditer(text):
                if m.group(0)[0].isupper() and not _sentence_start(text, m.start()):
                    yield finding("name (capitalised common word)", m)


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
    disguised = (
        f", written with look-alike characters for {first.reads_as!r}" if first.reads_as else ""
    )
    raise InputError(
        f"{what} {first.label}",
        f"contains the {first.kind} {first.token!r}{disguised}{more}",
        first.field,
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
    entries = read_list(path)
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
