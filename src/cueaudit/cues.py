"""Vocabulary shared by every stage: cue conditions, groups and their display labels."""

from __future__ import annotations

from typing import Final, Literal

RACES: Final = ("Black", "White")
GENDERS: Final = ("male", "female")

Dimension = Literal["race", "gender"]
DIMENSION_GROUPS: Final[dict[str, tuple[str, str]]] = {
    # (focal group, reference group): ratios are focal / reference, as the paper's Black/White
    # and Female/Male ratios.
    "race": ("Black", "White"),
    "gender": ("female", "male"),
}

NO_CUE: Final = "none"
NAME_SOURCES: Final = ("rosenman", "elder_hayes", "tzioumis")

# Cue condition ids, in the order the paper's figures list them.
CUE_LABELS: Final[dict[str, str]] = {
    "none": "No cue",
    "dialect_aave": "Dialect (AAVE)",
    "dialog_cad": "Dialog (CAD)",
    "dialog_prism": "Dialog (PRISM)",
    "explicit": "Explicit",
    "name_elder_hayes": "Name (EH)",
    "name_rosenman": "Name (R)",
    "name_tzioumis": "Name (T)",
}


def name_cue(source: str) -> str:
    """Cue condition id of a name list, e.g. ``name_rosenman``."""
    return f"name_{source}"


def cue_label(cue: str) -> str:
    """Human-readable label of a cue condition id (unknown ids are shown as they are)."""
    return CUE_LABELS.get(cue, cue)
