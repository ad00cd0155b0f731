"""Translate base prompts sentence by sentence through the cache, and audit the results."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import polars as pl

from cueaudit.cues.dialect.cache import TranslationCache
from cueaudit.cues.dialect.translators import Translator, make_translator
from cueaudit.io import write_csv, write_parquet

log = logging.getLogger(__name__)

#: Answer-format instructions ("Respond with either 'Yes' or 'No' ...") stay in SAE by default.
DEFAULT_INSTRUCTION_PATTERN: Final = r"^Respond with\b"
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])(\s+)(?=[\"'“‘(\[]?[A-Z0-9])")
_NUMERAL_RE = re.compile(r"\d+(?:[.,]\d+)*")

TRANSLATION_SCHEMA: Final = {
    "task": pl.String,
    "base_id": pl.String,
    "source_text": pl.String,
    "text": pl.String,
    "translator": pl.String,
    "model": pl.String,
    "template_hash": pl.String,
    "rules": pl.List(pl.String),
    "n_sentences": pl.Int64,
    "n_cached": pl.Int64,
}


def split_sentences(text: str) -> list[str]:
    """Sentences and the whitespace between them, alternating; ``"".join`` gives ``text``."""
    return _SENTENCE_SPLIT_RE.split(text)


def translate_texts(
    texts: Sequence[str],
    translator: Translator,
    cache: TranslationCache,
    *,
    keep_instruction: bool = True,
    instruction_pattern: str = DEFAULT_INSTRUCTION_PATTERN,
) -> list[tuple[str, tuple[str, ...], int, int]]:
    """Translate each text: ``(translation, rules fired, sentences, sentences from cache)``.

    Only sentences missing from the cache reach the translator (once each, in one batch).
    """
    keep = re.compile(instruction_pattern) if keep_instruction else None
    pieces = [split_sentences(t) for t in texts]
    wanted = list(
        dict.fromkeys(
            s for parts in pieces for s in parts[::2] if s.strip() and not (keep and keep.search(s))
        )
    )
    found = cache.get_many(translator.name, translator.model, translator.template_hash, wanted)
    missing = [s for s in wanted if s not in found]
    if missing:
        log.info(
            "translating %d new sentences with %s/%s",
            len(missing),
            translator.name,
            translator.model,
        )
        results = translator.translate_batch(missing)
        cache.put_many(
            translator.name,
            translator.model,
            translator.template_hash,
            [(s, out, rules) for s, (out, rules) in zip(missing, results, strict=True)],
        )
        fresh = dict(zip(missing, results, strict=True))
    else:
        fresh = {}
    out: list[tuple[str, tuple[str, ...], int, int]] = []
    for parts in pieces:
        rebuilt: list[str] = []
        fired: list[str] = []
        n_sentences = n_cached = 0
        for i, part in enumerate(parts):
            if i % 2 or (part not in found and part not in fresh):
                rebuilt.append(part)
                continue
            n_sentences += 1
            n_cached += part in found
            text, rules = found.get(part) or fresh[part]
            rebuilt.append(text)
            fired.extend(rules)
        out.append(("".join(rebuilt), tuple(dict.fromkeys(fired)), n_sentences, n_cached))
    return out


def translate_prompts(
    base: pl.DataFrame,
    translator: Translator,
    cache: TranslationCache,
    *,
    keep_instruction: bool = True,
    instruction_pattern: str = DEFAULT_INSTRUCTION_PATTERN,
) -> pl.DataFrame:
    """Translations of base prompts (columns task, base_id, text) in TRANSLATION_SCHEMA."""
    results = translate_texts(
        base["text"].to_list(),
        translator,
        cache,
        keep_instruction=keep_instruction,
        instruction_pattern=instruction_pattern,
    )
    return pl.DataFrame(
        {
            "task": base["task"],
            "base_id": base["base_id"],
            "source_text": base["text"],
            "text": [r[0] for r in results],
            "translator": [translator.name] * base.height,
            "model": [translator.model] * base.height,
            "template_hash": [translator.template_hash] * base.height,
            "rules": [list(r[1]) for r in results],
            "n_sentences": [r[2] for r in results],
            "n_cached": [r[3] for r in results],
        },
        schema=TRANSLATION_SCHEMA,
    )


def _instruction(text: str, pattern: str) -> str | None:
    matcher = re.compile(pattern)
    hits = [s for s in split_sentences(text)[::2] if matcher.search(s)]
    return hits[-1] if hits else None


def audit_translations(
    translations: pl.DataFrame,
    *,
    min_length_ratio: float = 0.7,
    max_length_ratio: float = 1.4,
    instruction_pattern: str = DEFAULT_INSTRUCTION_PATTERN,
) -> pl.DataFrame:
    """One row per translated prompt with its checks and a ``flagged`` verdict.

    numerals_preserved: the same digit sequences in the same order; length_ratio: characters
    out / in; unchanged: the translation equals the source; instruction_preserved: the
    source's answer-format instruction appears verbatim in the translation (true when the
    source has none).
    """
    rows: list[dict[str, Any]] = []
    for rec in translations.iter_rows(named=True):
        src, out = rec["source_text"], rec["text"]
        ratio = len(out) / len(src) if src else 0.0
        instruction = _instruction(src, instruction_pattern)
        checks = {
            "numerals_preserved": _NUMERAL_RE.findall(src) == _NUMERAL_RE.findall(out),
            "length_ratio": ratio,
            "unchanged": out == src,
            "instruction_preserved": instruction is None or instruction in out,
        }
        reasons = [
            name
            for name, bad in (
                ("numerals_changed", not checks["numerals_preserved"]),
                ("length_ratio", not min_length_ratio <= ratio <= max_length_ratio),
                ("unchanged", checks["unchanged"]),
                ("instruction_changed", not checks["instruction_preserved"]),
            )
            if bad
        ]
        rows.append(
            {
                "task": rec["task"],
                "base_id": rec["base_id"],
                "translator": rec["translator"],
                "model": rec["model"],
                **checks,
                "rules": ",".join(rec["rules"]),
                "flagged": bool(reasons),
                "flag_reasons": ",".join(reasons),
                "source_text": src,
                "text": out,
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "task": pl.String,
            "base_id": pl.String,
            "translator": pl.String,
            "model": pl.String,
            "numerals_preserved": pl.Boolean,
            "length_ratio": pl.Float64,
            "unchanged": pl.Boolean,
            "instruction_preserved": pl.Boolean,
            "rules": pl.String,
            "flagged": pl.Boolean,
            "flag_reasons": pl.String,
            "source_text": pl.String,
            "text": pl.String,
        },
    )


def audit_summary(audit: pl.DataFrame) -> pl.DataFrame:
    """Counts per task: prompts, flagged, and each failed check."""
    return (
        audit.group_by("task", maintain_order=True)
        .agg(
            n_prompts=pl.len(),
            n_flagged=pl.col("flagged").sum(),
            numerals_changed=(~pl.col("numerals_preserved")).sum(),
            unchanged=pl.col("unchanged").sum(),
            instruction_changed=(~pl.col("instruction_preserved")).sum(),
            length_ratio_out_of_range=pl.col("flag_reasons").str.contains("length_ratio").sum(),
            mean_length_ratio=pl.col("length_ratio").mean(),
        )
        .sort("task")
    )


def run_dialect_translation(
    base: pl.DataFrame,
    spec: Mapping[str, Any],
    *,
    translations_path: str | Path,
    audit_path: str | Path,
    flagged_path: str | Path,
) -> pl.DataFrame:
    """The ``translate_dialect`` rule: translate the base prompts ``base`` (task, base_id,
    text) with the translator of ``spec`` (``cues.dialect``), write the translations and the
    audit."""
    translator = make_translator(spec)
    pattern = spec.get("instruction_pattern", DEFAULT_INSTRUCTION_PATTERN)
    with TranslationCache(spec.get("cache", "cache/dialect_translations.sqlite")) as cache:
        translations = translate_prompts(
            base,
            translator,
            cache,
            keep_instruction=spec.get("keep_instruction", True),
            instruction_pattern=pattern,
        )
    audit_spec = spec.get("audit") or {}
    audit = audit_translations(
        translations,
        min_length_ratio=audit_spec.get("min_length_ratio", 0.7),
        max_length_ratio=audit_spec.get("max_length_ratio", 1.4),
        instruction_pattern=pattern,
    )
    write_parquet(translations, translations_path)
    write_csv(audit.drop("source_text", "text"), audit_path)
    write_csv(audit.filter(pl.col("flagged")), flagged_path)
    return audit
