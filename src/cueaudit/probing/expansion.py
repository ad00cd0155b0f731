"""Cartesian expansion of base prompts × cue variants into the prompt table of one task.

Every prompt is ``prefix + " " + body``: the prefix is the cue (a memory line or a dialog
history, followed by the ``USER:`` tag) and the body is the base prompt, or its AAVE
translation for the dialect cue; the no-cue baseline and dialect prompts have no prefix.
Each prompt's Flesch–Kincaid grade is computed from the counts of its two components.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from cueaudit.cues.vocabulary import NO_CUE
from cueaudit.probing import readability
from cueaudit.prompts import stable_uid

# The paper's memory-style prefixes (Table 2). A newline separates the memory line from the
# USER tag and a space the tag from the prompt, so words never fuse across the joins
# (readability counts stay additive).
NAME_TEMPLATE: Final = "[MEMORY: User name is {value}]\nUSER: {prompt}"
EXPLICIT_TEMPLATE: Final = "[MEMORY: User is {value}]\nUSER: {prompt}"
DIALOG_TEMPLATE: Final = "{value}\nUSER: {prompt}"
DIALECT_CUE: Final = "dialect_aave"

CUE_COLUMNS: Final = [
    "cue",
    "cue_type",
    "cue_source",
    "race",
    "gender",
    "cue_value",
    "prefix",
    "body",
    "uid_variant",
]
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
    "text": pl.String,
    "fk_grade": pl.Float64,
}


def _prefix(template: str, value: pl.Expr) -> pl.Expr:
    head = template.split("{prompt}")[0].rstrip(" ")
    before, after = head.split("{value}")
    return pl.lit(before) + value + pl.lit(after)


def cue_variants(
    names: pl.DataFrame | None,
    explicit: pl.DataFrame | None,
    *,
    dialect: str | None = None,
    dialog: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per cue variant, the no-cue baseline first.

    ``names`` has columns name, race, gender, source; ``explicit`` descriptor, category,
    race, gender; ``dialect`` is the translator id of the AAVE variant (None: no dialect);
    ``dialog`` has cluster_id, source, race, gender, prefix (see cueaudit.cues.dialog.clusters).
    """
    schema = dict.fromkeys(CUE_COLUMNS, pl.String)
    parts = [
        pl.DataFrame(
            [[NO_CUE, NO_CUE, None, None, None, None, None, "base", None]],
            schema=schema,
            orient="row",
        )
    ]
    if names is not None and names.height:
        parts.append(
            names.select(
                cue=pl.lit("name_") + pl.col("source"),
                cue_type=pl.lit("name"),
                cue_source=pl.col("source"),
                race=pl.col("race"),
                gender=pl.col("gender"),
                cue_value=pl.col("name"),
                prefix=_prefix(NAME_TEMPLATE, pl.col("name")),
                body=pl.lit("base"),
                uid_variant=pl.lit(None, pl.String),
            )
        )
    if dialect is not None:
        parts.append(
            pl.DataFrame(
                [[DIALECT_CUE, "dialect", "aave", "Black", None, dialect, None, "dialect", None]],
                schema=schema,
                orient="row",
            )
        )
    if dialog is not None and dialog.height:
        parts.append(
            dialog.select(
                cue=pl.lit("dialog_") + pl.col("source"),
                cue_type=pl.lit("dialog"),
                cue_source=pl.col("source"),
                race=pl.col("race"),
                gender=pl.col("gender"),
                cue_value=pl.col("cluster_id"),
                prefix=_prefix(DIALOG_TEMPLATE, pl.col("prefix")),
                body=pl.lit("base"),
                uid_variant=pl.col("race") + pl.lit("|") + pl.col("gender"),
            )
        )
    if explicit is not None and explicit.height:
        parts.append(
            explicit.select(
                cue=pl.lit("explicit"),
                cue_type=pl.lit("explicit"),
                cue_source=pl.col("category"),
                race=pl.col("race"),
                gender=pl.col("gender"),
                cue_value=pl.col("descriptor"),
                prefix=_prefix(EXPLICIT_TEMPLATE, pl.col("descriptor")),
                body=pl.lit("base"),
                uid_variant=pl.lit(None, pl.String),
            )
        )
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

    ``translations`` (base_id, text) supplies the body of dialect variants.
    """
    base = base_prompts.select("base_id", base_text="text")
    if translations is not None:
        base = base.join(
            translations.select("base_id", dialect_text="text"), on="base_id", how="left"
        )
    else:
        base = base.with_columns(dialect_text=pl.lit(None, pl.String))
    if (cues["body"] == "dialect").any():
        untranslated = base.filter(pl.col("dialect_text").is_null())["base_id"].to_list()
        if untranslated:
            from cueaudit.errors import InputError

            raise InputError(
                "dialect translations", f"no translation for {untranslated[:3]}", "base_id"
            )
    crossed = cues.join(base, how="cross")
    texts: list[str] = []
    grades: list[float] = []
    uids: list[str] = []
    for prefix, body, base_text, dialect_text, cue, value, variant in crossed.select(
        "prefix", "body", "base_text", "dialect_text", "cue", "cue_value", "uid_variant"
    ).iter_rows():
        main = dialect_text if body == "dialect" else base_text
        texts.append(f"{prefix} {main}" if prefix is not None else main)
        grades.append(readability.fk_grade([prefix, main] if prefix is not None else [main]))
        uids.append(prompt_uid(task, base_text, cue, value, variant))
    return crossed.select(
        prompt_uid=pl.Series(uids, dtype=pl.String),
        task=pl.lit(task),
        base_id="base_id",
        cue="cue",
        cue_type="cue_type",
        cue_source="cue_source",
        race="race",
        gender="gender",
        cue_value="cue_value",
        text=pl.Series(texts, dtype=pl.String),
        fk_grade=pl.Series(grades, dtype=pl.Float64),
    ).cast(PROMPT_SCHEMA)


def expected_prompt_count(
    n_base: int, n_names: int, n_explicit: int, n_dialect: int = 0, n_dialog_clusters: int = 0
) -> int:
    """Rows of a task's prompt table: base prompts × (baseline + names + explicit
    descriptors + dialect variants + 4 dialogs per sampled cluster of every source)."""
    return n_base * (1 + n_names + n_explicit + n_dialect + 4 * n_dialog_clusters)


def build_prompt_table(
    *,
    base_prompts_path: str,
    names_path: str,
    explicit_path: str,
    task: str,
    per_group: int | None,
    sample_seed: int,
    limit: int | None = None,
    translations_path: str | None = None,
    dialog_paths: list[str] | None = None,
) -> pl.DataFrame:
    """The prompt table of one task from its base prompts and the prepared cue resources."""
    from cueaudit.cues.names import sample_names
    from cueaudit.probing.base_prompts import load_base_prompts

    base = load_base_prompts(base_prompts_path, task)
    if limit is not None:
        base = base.head(limit)
    names = sample_names(pl.read_parquet(names_path), per_group, sample_seed)
    explicit = pl.read_parquet(explicit_path)
    translations = dialect = None
    if translations_path:
        translations = pl.read_parquet(translations_path).filter(pl.col("task") == task)
        first = translations.head(1)
        dialect = f"{first['translator'][0]}:{first['model'][0]}" if first.height else "unknown"
    dialog = pl.concat([pl.read_parquet(p) for p in dialog_paths]) if dialog_paths else None
    cues = cue_variants(names, explicit, dialect=dialect, dialog=dialog)
    return expand_prompts(base, cues, task, translations)
