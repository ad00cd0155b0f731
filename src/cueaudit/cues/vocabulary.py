"""Vocabulary of the cue resources: the groups names and descriptors are tagged with."""

from __future__ import annotations

from typing import Final

RACES: Final = ("Black", "White")
GENDERS: Final = ("male", "female")

NO_CUE: Final = "none"
NAME_SOURCES: Final = ("rosenman", "elder_hayes", "tzioumis")


def name_cue(source: str) -> str:
    """Cue condition id of a name list, e.g. ``name_rosenman``."""
    return f"name_{source}"
