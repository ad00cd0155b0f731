"""The probing study's contrasts and the display labels of its cue conditions."""

from __future__ import annotations

from typing import Final, Literal

from cueaudit.cues.registry import REGISTRY

Dimension = Literal["race", "gender"]
DIMENSION_GROUPS: Final[dict[str, tuple[str, str]]] = {
    # (focal group, reference group): ratios are focal / reference, as the paper's Black/White
    # and Female/Male ratios.
    "race": ("Black", "White"),
    "gender": ("female", "male"),
}

# Cue condition ids, in the order the paper's figures list them (the baseline, then by id).
CUE_LABELS: Final[dict[str, str]] = REGISTRY.labels()


def cue_label(cue: str) -> str:
    """Human-readable label of a cue condition id (unknown ids are shown as they are)."""
    return CUE_LABELS.get(cue, cue)
