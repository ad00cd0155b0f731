"""Cue resources shared by the studies, and the registry of cue types built on them."""

from cueaudit.cues.registry import REGISTRY, CueCondition, CueRegistry, CueType

__all__ = ["REGISTRY", "CueCondition", "CueRegistry", "CueType"]
