"""Vocabulary of the cue resources: the groups names and descriptors are tagged with, the
no-cue condition and the tags that mark a cue inside a prompt."""

from __future__ import annotations

from typing import Final

#: Every race a cue may signal, in the order tables list them. Each cue type says which of
#: them it signals (its ``races``, and its decision use's).
RACES: Final = ("Black", "White", "Hispanic", "Asian")
#: The races of the published first-name lists (Rosenman, Elder & Hayes, Tzioumis): the
#: probing study's name cues signal these two.
NAME_LIST_RACES: Final = ("Black", "White")
GENDERS: Final = ("male", "female")

NO_CUE: Final = "none"

#: The tags of cue prefixes (``[MEMORY: ...]``, ``USER:``, ``MODEL:``). A cue value or base
#: prompt holding one would forge a cue (or a dialog turn) inside the prompt, so they are
#: refused there; a cue template with a tag not listed here is refused
#: (:func:`cueaudit.cues.cue_type.check_template`), so a new tag is caught too.
CUE_TAGS: Final = ("MEMORY", "MODEL", "USER")
