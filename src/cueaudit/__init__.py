"""cueaudit: demographic-cue probing of language models as a rerunnable workflow."""

__version__ = "0.1.0"
