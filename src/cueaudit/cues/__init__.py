"""Cue resources shared by the studies, and the registry of cue types built on them."""

from cueaudit.cues.cue_type import CueCondition, CueRegistry, CueType
from cueaudit.cues.registry import REGISTRY

__all__ = ["REGISTRY", "CueCondition", "CueRegistry", "CueType"]
