"""How the probing study words a cue in front of a prompt: Table 2's templates.

Each template has one ``{value}`` (what the cue variant shows: a name, a descriptor, a dialog
history) and ends with ``" {prompt}"``. A newline separates the memory line from the USER tag
and a space the tag from the prompt, so words never fuse across the joins (readability counts
stay additive). A cue type the study has no template for is worded by the type's
``default_template``; the dialect cue has none (its body carries the cue).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import polars as pl

from cueaudit.cues.cue_type import CueType, check_template

NAME_TEMPLATE: Final = "[MEMORY: User name is {value}]\nUSER: {prompt}"
EXPLICIT_TEMPLATE: Final = "[MEMORY: User is {value}]\nUSER: {prompt}"
DIALOG_TEMPLATE: Final = "{value}\nUSER: {prompt}"

#: Cue kind -> Table 2's template.
TEMPLATES: Final[Mapping[str, str]] = {
    kind: check_template(kind, template)
    for kind, template in (
        ("name", NAME_TEMPLATE),
        ("explicit", EXPLICIT_TEMPLATE),
        ("dialog", DIALOG_TEMPLATE),
    )
}


def template_of(cue_type: CueType[Any], templates: Mapping[str, str]) -> str | None:
    """The wording of ``cue_type``: ``templates[kind]``, else the type's default (None: the
    cue has no prefix, which only a type whose body carries the cue may have)."""
    template = templates.get(cue_type.kind, cue_type.default_template)
    if template is None:
        if cue_type.body == "base":
            raise ValueError(
                f"cue type {cue_type.kind!r}: no template shows its value in the prompt "
                "(give its row a default_template)"
            )
        return None
    return check_template(cue_type.kind, template)


def prefix_expr(template: str | None, cue_text: pl.Expr) -> pl.Expr:
    """The template up to the prompt with ``cue_text`` as its value (None without a template).

    The expansion puts the prompt after the prefix and one space, so that space is not part
    of the prefix.
    """
    if template is None:
        return pl.lit(None, pl.String)
    before, after = template.removesuffix(" {prompt}").split("{value}")
    return pl.lit(before) + cue_text + pl.lit(after)
