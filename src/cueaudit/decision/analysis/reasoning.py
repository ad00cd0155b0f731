"""A paired arm (the reasoning rerun): the same model, prompts and seeds as a model of the
pre-registered arm with one setting changed (reasoning on), compared contrast by contrast.

An extension block with ``paired_with: <model>`` reruns prompts of the primary design on one
model entry that is ``<model>`` with reasoning enabled. Its prompts have ids of their own
(``<task>__<arm>``), so the rows of the two arms are matched by what was shown: the task, its
domain, paraphrase, seed and profile × name pair (Rate, Decide) or bundle (Rank, whose bundle
ids hash their content). Only answers analysed in both arms (:func:`cell_rows`) enter.

For every domain × format of the arm, one joint lmm of the shared rows of both arms (the
paired model's as ``reasoning = off``, the arm's as ``on``, one model level) with the
reasoning × group interaction (:func:`design_of` with ``interaction="reasoning"``): the
contrast with reasoning off, on, and their difference (on − off), each with its SE from the
joint fit. The two arms answer the same prompts, so their contrasts are not independent: the
fit shares the profile and name-pair intercepts, adds a random intercept per shared prompt
for Rate and Decide, and clusters Rank's CR2 sandwich by bundle, the unit both arms rank.
``se_independent`` is the SE of the difference had the two estimates been independent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np
import polars as pl

from cueaudit.decision.analysis.contrasts import exploratory_reason
from cueaudit.decision.analysis.design_matrix import (
    ContrastSpec,
    InteractionContrast,
    cell_rows,
    default_contrasts,
    design_of,
    interaction_contrasts,
)
from cueaudit.decision.analysis.fitters import fit_design
from cueaudit.decision.analysis.frames import PRIMARY, AnalysisFrames
from cueaudit.decision.analysis.verdicts import estimate_fields
from cueaudit.decision.analysis.wording import ESTIMATE_SCHEMA, FORMATS
from cueaudit.decision.tasks import ARM_SEPARATOR

FACTOR: Final = "reasoning"
OFF, ON = "off", "on"
#: What identifies a prompt across arms, per format (with the task's primary name, ``base``).
PAIRING_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "rate": ("base", "domain", "paraphrase", "seed", "profile_id", "pair_id"),
    "decide": ("base", "domain", "paraphrase", "seed", "profile_id", "pair_id"),
    "rank": ("base", "domain", "paraphrase", "seed", "bundle_id"),
}
PROMPT: Final = "prompt"
PAIRED_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    **dict.fromkeys(("arm", "model", "paired_with", "domain", "format", "contrast"), pl.String()),
    **dict.fromkeys(("estimate_off", "se_off", "estimate_on", "se_on"), pl.Float64()),
    **ESTIMATE_SCHEMA,
    "se_independent": pl.Float64(),
    "n_shared": pl.Int64(),
    "label": pl.String(),
}


def _keyed(rows: pl.DataFrame, fmt: str) -> pl.DataFrame:
    base = pl.col("task").str.split(ARM_SEPARATOR).list.first().alias("base")
    key = pl.concat_str(
        [pl.col(c).cast(pl.String).fill_null("") for c in PAIRING_KEYS[fmt]], separator="\x1f"
    )
    return rows.with_columns(base).with_columns(key.alias(PROMPT))


def shared_rows(
    frames: AnalysisFrames, arm: str, paired_with: str, domain: str, fmt: str
) -> pl.DataFrame:
    """The analysed rows of ``arm`` and of ``paired_with`` in the primary arm whose prompts
    both answered, with ``reasoning`` (off: the primary model's, on: the arm's), ``model``
    set to ``paired_with`` in both and the pairing key as ``prompt``."""
    on = _keyed(cell_rows(frames.arm(arm), domain, fmt), fmt)
    primary = frames.arm(PRIMARY)
    primary = dataclasses.replace(
        primary,
        judgements=primary.judgements.filter(pl.col("model") == paired_with),
        rankings=primary.rankings.filter(pl.col("model") == paired_with),
    )
    off = _keyed(cell_rows(primary, domain, fmt), fmt)
    both = set(on[PROMPT]) & set(off[PROMPT])
    shared = [
        part.filter(pl.col(PROMPT).is_in(list(both))).with_columns(
            pl.lit(level).alias(FACTOR), pl.lit(paired_with).alias("model")
        )
        for part, level in ((off, OFF), (on, ON))
    ]
    return pl.concat(shared, how="vertical_relaxed")


def paired_contrasts(
    frames: AnalysisFrames, pairs: Mapping[str, str], *, alpha: float = 0.05
) -> pl.DataFrame:
    """The REASONING_PAIRED table: for each paired arm (``pairs``: arm -> the primary-arm
    model it reruns) and each domain × format it answered, every default contrast with
    reasoning off and on and their paired difference (see the module docstring)."""
    specs = default_contrasts()
    read = interaction_contrasts(specs, FACTOR, [OFF, ON])
    records: list[dict[str, object]] = []
    for arm, paired_with in pairs.items():
        data = frames.arm(arm)
        models = sorted(
            {*data.judgements["model"].drop_nulls(), *data.rankings["model"].drop_nulls()}
        )
        reason = exploratory_reason(True, arm)
        label = f"exploratory: {reason}"
        for fmt in FORMATS:
            source = data.rankings if fmt == "rank" else data.judgements
            if fmt != "rank":
                source = source.filter(pl.col("format") == fmt)
            for domain in sorted(set(source["domain"].drop_nulls())):
                rows = shared_rows(frames, arm, paired_with, domain, fmt)
                common = {
                    "arm": arm,
                    "model": ", ".join(models),
                    "paired_with": paired_with,
                    "domain": domain,
                    "format": fmt,
                    "n_shared": rows.filter(pl.col(FACTOR) == ON)[PROMPT].n_unique(),
                    "label": label,
                }
                records += _paired(rows, fmt, specs, read, alpha, common)
    return pl.DataFrame(records, schema=dict(PAIRED_SCHEMA)).sort(
        "arm", "domain", "format", "contrast"
    )


def _paired(
    rows: pl.DataFrame,
    fmt: str,
    specs: Sequence[ContrastSpec],
    read: Mapping[tuple[str, str, str], InteractionContrast],
    alpha: float,
    common: Mapping[str, object],
) -> list[dict[str, object]]:
    design = design_of(rows, fmt, interaction=FACTOR)
    if fmt != "rank" and rows.height:
        codes = np.unique(rows[PROMPT].to_numpy(), return_inverse=True)[1]
        design = dataclasses.replace(design, groups={**design.groups, PROMPT: codes})
    fit = fit_design(design, list(read.values()))
    out = []
    for spec in specs:
        name = spec.contrast
        off, on, difference = (
            fit.estimates[read[(name, level, term)].contrast]
            for level, term in ((OFF, "within"), (ON, "within"), (ON, "difference"))
        )
        note = difference.reason
        if not rows.height:
            note = "no prompt answered by both arms"
        out.append(
            {
                **common,
                "contrast": name,
                "estimate_off": off.estimate,
                "se_off": off.se,
                "estimate_on": on.estimate,
                "se_on": on.se,
                **estimate_fields(fit, difference, alpha),
                "note": note,
                "se_independent": float(np.hypot(off.se, on.se)),
            }
        )
    return out
