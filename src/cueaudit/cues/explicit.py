"""Explicit demographic descriptors (Appendix A.4), built compositionally.

Race surface forms map to canonical races; nationality ("American") is added only where the
race form does not already imply it. The five categories give 10 + 5 + 2 + 2 + 4 = 23
distinct descriptors, used as ``[MEMORY: User is <descriptor>]``. The explicit cue type's
variants, count and preparation are here too (its row is in :mod:`cueaudit.cues.registry`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import polars as pl

from cueaudit.cues.cue_type import CueType, VariantCount, variant_rows
from cueaudit.cues.vocabulary import GENDERS
from cueaudit.errors import InputError

# (surface form, canonical race, whether the form already implies American nationality)
RACE_FORMS: Final = (
    ("Black", "Black", False),
    ("Black American", "Black", True),
    ("African American", "Black", True),
    ("White", "White", False),
    ("White American", "White", True),
)
NATIONALITY: Final = "American"
EXPLICIT_CATEGORIES: Final = (
    "race_gender",
    "race",
    "gender",
    "nationality_gender",
    "nationality_race_gender",
)


def _with_article(phrase: str) -> str:
    return f"{'an' if phrase[0].lower() in 'aeiou' else 'a'} {phrase}"


def _category_rows(category: str) -> list[tuple[str, str | None, str | None]]:
    """(descriptor, race, gender) rows of one category."""
    if category == "race_gender":
        return [
            (_with_article(f"{form} {gender}"), race, gender)
            for form, race, _ in RACE_FORMS
            for gender in GENDERS
        ]
    if category == "race":
        return [(form, race, None) for form, race, _ in RACE_FORMS]
    if category == "gender":
        return [(_with_article(gender), None, gender) for gender in GENDERS]
    if category == "nationality_gender":
        return [(_with_article(f"{NATIONALITY} {gender}"), None, gender) for gender in GENDERS]
    if category == "nationality_race_gender":
        return [
            (_with_article(f"{NATIONALITY} {form} {gender}"), race, gender)
            for form, race, implies_nationality in RACE_FORMS
            if not implies_nationality
            for gender in GENDERS
        ]
    raise AssertionError(category)  # pragma: no cover - guarded by explicit_descriptors


def explicit_descriptors(categories: Sequence[str] | None = None) -> pl.DataFrame:
    """Explicit descriptors with columns ``descriptor, category, race, gender``.

    ``categories`` selects and orders categories (default: all of EXPLICIT_CATEGORIES).
    race is null for gender-only descriptors, gender is null for race-only ones. Duplicate
    descriptors are kept once (first category wins).
    """
    if isinstance(categories, str):
        raise InputError("explicit cue categories", "expected a list, not a string", "categories")
    chosen = EXPLICIT_CATEGORIES if categories is None else tuple(categories)
    unknown = [c for c in chosen if c not in EXPLICIT_CATEGORIES]
    if unknown:
        raise InputError(
            "explicit cue categories",
            f"unknown category {unknown[0]!r}; expected one of {list(EXPLICIT_CATEGORIES)}",
            field="categories",
        )
    records: dict[str, tuple[str, str | None, str | None]] = {}
    for category in dict.fromkeys(chosen):
        for descriptor, race, gender in _category_rows(category):
            records.setdefault(descriptor, (category, race, gender))
    return pl.DataFrame(
        [(d, *rest) for d, rest in records.items()],
        schema={
            "descriptor": pl.String,
            "category": pl.String,
            "race": pl.String,
            "gender": pl.String,
        },
        orient="row",
    )


def race_gender_descriptor(race: str, gender: str) -> str:
    """The ``race_gender`` descriptor of a race and gender in the race's own form ("a Black
    female", "a White male"); a race the descriptors have no form for ("Hispanic", "Asian":
    Appendix A.4 has Black and White only) is worded the same way ("a Hispanic female", "an
    Asian male"). Gender is ``female`` or ``male``."""
    if gender not in GENDERS:
        raise InputError("explicit descriptor", f"gender {gender!r} is not one of {GENDERS}")
    if not race or not race.strip():
        raise InputError("explicit descriptor", "an empty race", "race")
    descriptors = explicit_descriptors(["race_gender"])
    own = descriptors.filter(
        (pl.col("race") == race)
        & (pl.col("gender") == gender)
        & (pl.col("descriptor") == _with_article(f"{race} {gender}"))
    )
    return own["descriptor"][0] if own.height else _with_article(f"{race} {gender}")


def prepare_explicit(block: Mapping[str, Any]) -> pl.DataFrame:
    """The descriptors of ``cues.explicit`` (its ``categories``; default: all)."""
    return explicit_descriptors(block.get("categories"))


def explicit_variants(cue_type: CueType[pl.DataFrame], explicit: pl.DataFrame) -> pl.DataFrame:
    """Descriptors (descriptor, category, race, gender) as cue-variant rows."""
    return variant_rows(cue_type, explicit, source=pl.col("category"), value=pl.col("descriptor"))


def explicit_variant_count(
    cue_type: CueType[pl.DataFrame], block: Mapping[str, Any], base: Path
) -> VariantCount:
    return prepare_explicit(block).height, None
