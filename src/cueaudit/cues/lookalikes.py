"""Look-alike characters folded to the letters they imitate, before any check of a text for a
demographic signal (:func:`fold`).

A group noun, a name or a candidate label written with a Cyrillic or Greek letter (``Аfrican``
with U+0410), in full-width forms (``Ｂｌａｃｋ``), with a ligature, an accent or an invisible
character (``Jam<U+200B>al``) reads as the word to a model but not to a pattern of the lists.
:func:`fold` maps each character that is not ASCII to the ASCII it is confusable with:

1. NFKC (compatibility forms: full-width letters, ligatures, superscripts);
2. Unicode TR 39's confusable prototype (ICU's ``SpoofChecker.getSkeleton``: Cyrillic ``а`` is
   ``a``, Greek ``Η`` is ``H``; invisible default-ignorable characters are dropped);
3. combining marks dropped (``é`` is ``e``).

A character whose result is still not ASCII is kept as written; ASCII is never changed, so
``rn`` stays apart from ``m`` and ``I`` from ``l`` (TR 39's skeleton would merge them, and the
lists are written in ASCII). The check reads the folded text, the prompt keeps the original,
and a finding names the original token (:attr:`Folded.original`).

What folding cannot catch is the user's judgement: a name that is not in the configured lists,
a transliteration (``Dzhamal``), an institution or place that codes race (a historically
Black college), a misspelling. ICU (PyICU) is used rather than a copied table because it
carries the Unicode Consortium's confusables data, versioned with ICU.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass
from typing import Final

import icu

#: ICU's skeleton type for mixed-script confusables (TR 39's single skeleton).
_ANY_CASE: Final = 0


@functools.cache
def _checker() -> icu.SpoofChecker:
    return icu.SpoofChecker()


@functools.cache
def fold_character(char: str) -> str:
    """What one character folds to: itself when ASCII, else its ASCII look-alike (possibly
    empty for an invisible character, or several letters for a ligature), else itself."""
    if char.isascii():
        return char
    out = []
    for part in unicodedata.normalize("NFKC", char):
        if part.isascii():
            out.append(part)
            continue
        skeleton = _checker().getSkeleton(_ANY_CASE, part)
        bare = "".join(
            c for c in unicodedata.normalize("NFD", skeleton) if not unicodedata.combining(c)
        )
        out.append(bare if bare.isascii() else part)
    return "".join(out)


@dataclass(frozen=True)
class Folded:
    """A text folded for checking, with the original index of each folded character."""

    text: str
    source: str
    offsets: tuple[int, ...]

    def original(self, start: int, end: int) -> str:
        """The original text behind the folded span ``[start, end)``."""
        if start >= end:
            return ""
        return self.source[self.offsets[start] : self.offsets[end - 1] + 1]


def fold(text: str) -> Folded:
    """``text`` with every look-alike character folded (see the module docstring)."""
    if text.isascii():
        return Folded(text, text, tuple(range(len(text))))
    chars: list[str] = []
    offsets: list[int] = []
    for index, char in enumerate(text):
        folded = fold_character(char)
        chars.append(folded)
        offsets.extend([index] * len(folded))
    return Folded("".join(chars), text, tuple(offsets))


def fold_text(text: str) -> str:
    """The folded text alone (for comparing two strings, e.g. a name and a label)."""
    return fold(text).text
