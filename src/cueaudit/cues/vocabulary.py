"""Vocabulary of the cue resources: the groups names and descriptors are tagged with."""

from __future__ import annotations

from typing import Final

RACES: Final = ("Black", "White")
GENDERS: Final = ("male", "female")

NO_CUE: Final = "none"
NAME_SOURCES: Final = ("rosenman", "elder_hayes", "tzioumis")
DIALOG_SOURCES: Final = ("cad", "prism")
