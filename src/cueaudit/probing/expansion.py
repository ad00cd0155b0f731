"""Cartesian expansion of base prompts × cue variants into the prompt table of one task.

Every prompt is ``prefix + " " + body``: the prefix is the cue (a memory line or a dialog
history, followed by the ``USER:`` tag) and the body is the base prompt, or its AAVE
translation for the dialect cue; the no-cue baseline and dialect prompts have no prefix.
The cue variants come from the cue types of :mod:`cueaudit.cues.registry`.

The table stores the two parts, not the text (:data:`cueaudit.prompts.TEXT_PARTS`): the
``prefix`` column holds the cue prefix with its separating space ("" when none) and ``body``
the body, both Categorical, so each of the few thousand distinct parts is stored once while
the paper's design has about five million prompts per task. Each prompt's Flesch–Kincaid
grade is combined from the counts of its two distinct components.

The expansion iterates the cue registry: each cue type's prepared resource is loaded, turned
into its variants and worded by the study's templates (:mod:`cueaudit.probing.templates`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import polars as pl

from cueaudit.cues import REGISTRY, CueRegistry
from cueaudit.cues.cue_type import CUE_COLUMNS
from cueaudit.cues.vocabulary import NO_CUE
from cueaudit.errors import InputError
from cueaudit.probing import readability
from cueaudit.probing.base_prompts import load_base_prompts
from cueaudit.probing.templates import TEMPLATES, prefix_expr, template_of
from cueaudit.prompts import check_unique_uids, stable_uid

PROMPT_SCHEMA: Final = {
    "prompt_uid": pl.String,
    "task": pl.String,
    "base_id": pl.String,
    "cue": pl.String,
    "cue_type": pl.String,
    "cue_source": pl.String,
    "race": pl.String,
    "gender": pl.String,
    "cue_value": pl.String,
    "prefix": pl.Categorical(),
    "body": pl.Categorical(),
    "fk_grade": pl.Float64,
}


#: A cue variant as the expansion takes it: the cue type's row (:data:`CUE_COLUMNS`) with its
#: ``cue_text`` worded into the prompt's ``prefix`` (None: no prefix).
VARIANT_COLUMNS: Final = tuple("prefix" if c == "cue_text" else c for c in CUE_COLUMNS)


def cue_variants(
    names: pl.DataFrame | None = None,
    explicit: pl.DataFrame | None = None,
    *,
    dialect: str | None = None,
    dialog: pl.DataFrame | None = None,
    registry: CueRegistry = REGISTRY,
    templates: Mapping[str, str] = TEMPLATES,
    **resources: pl.DataFrame | str | None,
) -> pl.DataFrame:
    """One row per cue variant (:data:`VARIANT_COLUMNS`): the no-cue baseline, then every
    registered cue type whose resource is given (not None, not an empty frame), in registry
    order, its value worded by ``templates`` (cue kind -> template; default Table 2's).

    Each type takes its loaded resource under its ``config_key``: ``names`` has columns name,
    race, gender, source; ``explicit`` descriptor, category, race, gender; ``dialect`` is
    the translator id of the AAVE variant; ``dialog`` has cluster_id, source, race, gender,
    prefix (see cueaudit.cues.dialog.clusters). Further registered types take theirs as
    further keywords.
    """
    given = {"names": names, "explicit": explicit, "dialect": dialect, "dialog": dialog}
    return _cue_variants({**given, **resources}, registry, templates)


def _check_known(keys: Sequence[str], registry: CueRegistry) -> None:
    unknown = sorted(set(keys) - {t.config_key for t in registry})
    if unknown:
        raise TypeError(f"cue_variants: no registered cue type takes {unknown}")


def _cue_variants(
    given: Mapping[str, pl.DataFrame | str | None],
    registry: CueRegistry,
    templates: Mapping[str, str],
) -> pl.DataFrame:
    _check_known([key for key, value in given.items() if value is not None], registry)
    schema = pl.Schema(dict.fromkeys(VARIANT_COLUMNS, pl.String))
    baseline = [NO_CUE, NO_CUE, None, None, None, None, None, "base", None]
    parts = [pl.DataFrame([baseline], schema=schema, orient="row")]
    for cue_type in registry:
        resource = given.get(cue_type.config_key)
        if resource is None or (isinstance(resource, pl.DataFrame) and resource.is_empty()):
            continue
        rows = cue_type.variants(cue_type, resource)
        if tuple(rows.columns) != CUE_COLUMNS:
            raise ValueError(
                f"cue type {cue_type.kind!r}: variants have columns {rows.columns}, "
                f"not {list(CUE_COLUMNS)}"
            )
        prefix = prefix_expr(template_of(cue_type, templates), pl.col("cue_text"))
        parts.append(rows.with_columns(cue_text=prefix).rename({"cue_text": "prefix"}))
    return pl.concat([p.cast(schema) for p in parts])


def prompt_uid(
    task: str, base_text: str, cue: str, cue_value: str | None, variant: str | None = None
) -> str:
    """Stable id of a cued prompt: a hash of the task, the base prompt text and the cue
    (``variant`` separates the four members of a dialog cluster, which share a value)."""
    parts = (task, base_text, cue, cue_value) + ((variant,) if variant is not None else ())
    return stable_uid(*parts)


def expand_prompts(
    base_prompts: pl.DataFrame,
    cues: pl.DataFrame,
    task: str,
    translations: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Every base prompt under every cue variant; rows ordered by cue then base prompt.

    The table is normalised (:data:`cueaudit.prompts.TEXT_PARTS`): each row holds codes into
    the distinct prefixes and bodies, so a task of millions of prompts stores each text once;
    ``cueaudit.prompts.text_expr`` assembles a row's text. ``translations`` (base_id, text)
    supplies the body of dialect variants. Raises InputError when two rows would share a
    ``prompt_uid``.
    """
    base = base_prompts.select("base_id", base_text="text")
    if translations is not None:
        base = base.join(
            translations.select("base_id", dialect_text="text"),
            on="base_id",
            how="left",
            maintain_order="left",
        )
    else:
        base = base.with_columns(dialect_text=pl.lit(None, pl.String))
    dialect_rows = cues["body"] == "dialect"
    if dialect_rows.any():
        untranslated = base.filter(pl.col("dialect_text").is_null())["base_id"].to_list()
        if untranslated:
            raise InputError(
                "dialect translations", f"no translation for {untranslated[:3]}", "base_id"
            )
    n_base, n_cues = base.height, cues.height
    base_texts = base["base_text"].to_list()
    # Bodies: the base texts, then (when a cue uses them) their translations.
    bodies = base_texts + (base["dialect_text"].to_list() if dialect_rows.any() else [])
    body_offset = np.where(dialect_rows.to_numpy(), n_base, 0)
    cue_prefixes = cues["prefix"].to_list()
    prefix_parts = ["" if p is None else f"{p} " for p in cue_prefixes]

    cue_rows = np.repeat(np.arange(n_cues), n_base)
    base_rows = np.tile(np.arange(n_base), n_cues)
    body_rows = base_rows + body_offset[cue_rows]
    prefix_counts = [readability.EMPTY if p is None else readability.count(p) for p in cue_prefixes]
    body_counts = [readability.count(b) for b in bodies]
    grades = np.empty((n_cues, n_base))
    for offset in np.unique(body_offset):
        cued = np.flatnonzero(body_offset == offset)
        grades[cued] = readability.outer_grades(
            [prefix_counts[i] for i in cued], body_counts[offset : offset + n_base]
        )
    uids = _uids(task, base_texts, cues)
    design = cues.select("cue", "cue_type", "cue_source", "race", "gender", "cue_value")
    table = pl.DataFrame(
        {
            "prompt_uid": uids,
            "task": pl.repeat(task, n_base * n_cues, dtype=pl.String, eager=True),
            "base_id": base["base_id"].gather(base_rows),
            **design.gather(cue_rows).to_dict(),
            "prefix": pl.Series(prefix_parts, dtype=pl.Categorical).gather(cue_rows),
            "body": pl.Series(bodies, dtype=pl.Categorical).gather(body_rows),
            "fk_grade": pl.Series(grades.ravel(), dtype=pl.Float64),
        }
    ).cast(pl.Schema(PROMPT_SCHEMA))
    if table["prompt_uid"].n_unique() < table.height:
        check_unique_uids(table, f"prompt table of task {task!r}", UID_COLUMNS)
    return table


def _uids(task: str, base_texts: Sequence[str], cues: pl.DataFrame) -> pl.Series:
    """:func:`prompt_uid` of every (cue, base prompt) row, cue-major: the hash of the shared
    leading parts (task, base text) is computed once per base prompt and copied per cue."""
    heads = [hashlib.sha256(f"{task}\x1f{text}\x1f".encode()) for text in base_texts]
    chunks = [pl.Series([], dtype=pl.String)]
    digests: list[bytes] = []
    append = digests.append
    for cue, value, variant in cues.select("cue", "cue_value", "uid_variant").iter_rows():
        tail = f"{cue}\x1f{value or ''}" + ("" if variant is None else f"\x1f{variant}")
        tail_bytes = tail.encode()
        for head in heads:
            h = head.copy()
            h.update(tail_bytes)
            append(h.digest())
        if len(digests) >= _UID_CHUNK:
            chunks.append(_hex20(digests))
            digests.clear()
    chunks.append(_hex20(digests))
    return pl.concat(chunks).alias("prompt_uid")


_UID_CHUNK: Final = 1 << 18
#: The columns that say which prompt a repeated uid belongs to.
UID_COLUMNS: Final = ("task", "base_id", "cue", "cue_value")


def _hex20(digests: list[bytes]) -> pl.Series:
    return pl.Series(digests, dtype=pl.Binary).bin.encode("hex").str.slice(0, 20)


def expected_prompt_count(n_base: int, variant_counts: Mapping[str, int]) -> int:
    """Rows of a task's prompt table: base prompts × (the no-cue baseline + the variants of
    every cue type, by config key: :attr:`cueaudit.cues.CueType.count`)."""
    return n_base * (1 + sum(variant_counts.values()))


def build_prompt_table(
    *,
    base_prompts_path: str,
    task: str,
    cue_files: Mapping[str, Sequence[str]],
    cue_settings: Mapping[str, Mapping[str, Any]] | None = None,
    limit: int | None = None,
    registry: CueRegistry = REGISTRY,
) -> pl.DataFrame:
    """The prompt table of one task from its base prompts and the prepared cue resources.

    ``cue_files`` maps a cue type's config key to the files of its prepared resource
    (:meth:`cueaudit.cues.CueType.resource_files`) and ``cue_settings`` to the keys of its
    block its loading reads (:attr:`cueaudit.cues.CueType.load_keys`); a type without files
    is left out.
    """
    _check_known(list(cue_files), registry)
    base = load_base_prompts(base_prompts_path, task, limit)
    settings = cue_settings or {}
    given: dict[str, Any] = {}
    translations = None
    for cue_type in registry:
        files = cue_files.get(cue_type.config_key)
        if not files:
            continue
        given[cue_type.config_key] = cue_type.load(
            files, settings.get(cue_type.config_key, {}), task
        )
        if cue_type.bodies is not None:
            translations = cue_type.bodies(files, task)
    cues = _cue_variants(given, registry, TEMPLATES)
    return expand_prompts(base, cues, task, translations)
