"""Cues beyond names in the decision audit: the design factor ``decision.design.cues``.

Names are a thin signal with socioeconomic connotations (the paper's Future Directions), so a
design may show race and gender by other cue types beside the name pairs. The cue types are
those of the shared cue registry (:mod:`cueaudit.cues.registry`) with a decision use
(:class:`cueaudit.cues.cue_type.DecisionCue`): where a prompt shows each and the races and
genders it signals come from its row. Each listed cue type crosses the whole design (every
profile of Rate and Decide, and the ranking bundles and probes of the cue types that can fill
them), and every prompt row carries its ``cue``. The registry's rows:

``name_pair``
    the Elder & Hayes first + last name pairs (:mod:`cueaudit.cues.name_pairs`), four races x
    two genders: the pre-registered design, and the default (``cues: [name_pair]``), under
    which every prompt, id and table is what it was before the factor existed.
``first_name``
    a first name alone in the name line ("Applicant: Tyrone"), from the probing study's
    published lists (``decision.first_names``, default ``resources/names/rosenman.csv``;
    :func:`cueaudit.cues.names.load_name_list`), ``names_per_cell`` names per race x gender
    drawn by :func:`cueaudit.cues.names.sample_names` (seeded by the design's ``seed``). The
    lists hold **Black and White names only**, so this cue signals those two races: its rows
    are Black and White, its contrasts Black vs White and female vs male.
``explicit``
    a statement cue: no name ("Applicant: name not shown", the prompts file's
    ``cue_lines.unnamed_line``) and an explicit statement ("The applicant is a Black female.",
    ``cue_lines.explicit_line``) worded by the explicit descriptors of the probing study
    (:func:`cueaudit.cues.explicit.race_gender_descriptor`: Appendix A.4's form for Black and
    White, the same construction for Hispanic and Asian): four races, one descriptor per race
    x gender cell. A new statement cue is one registry row with a ``descriptor``.
``dialect``
    only where the candidate's own words are shown (the aid domain's first-person FairFund
    appeals, :data:`FIRST_PERSON_DOMAINS`): each appeal with its name taken out
    (:func:`cueaudit.decision.aid.neutral_appeal`, so that the dialect alone carries the race
    signal), once translated into AAVE (:mod:`cueaudit.cues.dialect`, race Black) and once in
    its original wording (race White: the reference level of the race contrast is Standard
    American English, not a text that signals White). No gender. The translator and its cache
    are ``decision.dialect`` (offline ``rule_based`` by default, sharing the probing study's
    SQLite cache file).

**The Latin-square bundles need four races**: rankings and probes are built for the cue types
that signal all four and both genders (:data:`BUNDLE_CUES`: name pairs and explicit
descriptors; each design
bundle shown once per cue type, with the same bundle id, so bundles pair across cue types).
A cue type that signals fewer (first name, dialect) runs Rate and Decide only. Every cue type's rows
pass the design's composition check on their own (the analyses' ``cue`` subsample).

A cue row's ``pair_id`` names the signal, not a name pair: ``first_name/<source>/<race>/
<gender>/<name>``, a statement's ``<cue>/<race>/<gender>`` (``explicit/black/female``), and
for dialect one text per profile, ``dialect/<aave|sae>/<profile id>`` (each text is one
realisation of the signal, as a name pair is, so the crossed model's name-pair intercept is
one per text). A cue row's prompt id hashes the cue as well (the default's ids stay as they were).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import polars as pl

from cueaudit.cues.cue_type import DecisionCue
from cueaudit.cues.dialect.cache import TranslationCache
from cueaudit.cues.dialect.translate import translate_texts
from cueaudit.cues.dialect.translators import make_translator
from cueaudit.cues.names import load_name_list, sample_names
from cueaudit.cues.registry import REGISTRY
from cueaudit.decision.aid import first_name_appeal, neutral_appeal
from cueaudit.decision.formats import AID_DOMAIN
from cueaudit.errors import InputError

NAME_PAIR: Final = "name_pair"
FIRST_NAME: Final = "first_name"
DIALECT: Final = "dialect"
#: Where a cue shows what only a resource built for it by name gives (the name pairs, the
#: first-name list, the aid appeals' translations): the one cue that may show it.
RESOURCED_SHOWS: Final = {"name_pair": NAME_PAIR, "first_name": FIRST_NAME, "own_words": DIALECT}


def check_decision_cues(cues: Mapping[str, DecisionCue]) -> Mapping[str, DecisionCue]:
    """``cues`` if each shows what the decision audit can build for it: a new cue type shows a
    statement; a name line or own words come from resources built for one cue each (ValueError
    naming the cue)."""
    for name, cue in cues.items():
        owner = RESOURCED_SHOWS.get(cue.shows, name)
        if owner != name:
            raise ValueError(
                f"decision cue {name!r} shows {cue.shows!r}, which only {owner!r} can (its "
                "resource is built for it): a new decision cue shows a statement"
            )
    return cues


#: The decision audit's cue types, from the shared registry, in the order their rows are built
#: (the ``cue`` column's values).
DECISION_CUES: Final = check_decision_cues(REGISTRY.decision_cues())
CUE_TYPES: Final = tuple(DECISION_CUES)
DEFAULT_CUES: Final = (NAME_PAIR,)
#: The races and genders each cue type signals (its contrasts are those among them).
CUE_RACES: Final = {name: cue.races for name, cue in DECISION_CUES.items()}
CUE_GENDERS: Final = {name: cue.genders for name, cue in DECISION_CUES.items()}
#: The cue types that fill the four-race Latin-square bundles (rankings and probes).
BUNDLE_CUES: Final = tuple(name for name, cue in DECISION_CUES.items() if cue.fills_bundles)
#: The cue types shown in a candidate's own words (the first-person domains only).
OWN_WORDS_CUES: Final = tuple(n for n, cue in DECISION_CUES.items() if cue.shows == "own_words")
#: The domains whose candidates are first-person text (the dialect cue needs one).
FIRST_PERSON_DOMAINS: Final = (AID_DOMAIN,)
DEFAULT_FIRST_NAMES: Final = "resources/names/rosenman.csv"
DEFAULT_DIALECT_CACHE: Final = "cache/dialect_translations.sqlite"
#: The two varieties of a dialect-cued appeal: (pair id stem, race).
DIALECT_VARIETIES: Final = (("dialect/aave", "Black"), ("dialect/sae", "White"))
#: What a cue shows for each signal: the name line's name (None: no name), the explicit
#: descriptor (None: no statement), ordered within a race x gender cell by ``name_rank``.
SIGNAL_SCHEMA: Final = {
    "pair_id": pl.String,
    "race": pl.String,
    "gender": pl.String,
    "name_rank": pl.Int64,
    "full_name": pl.String,
    "descriptor": pl.String,
}
TRANSLATION_SCHEMA: Final = {
    "profile_id": pl.String,
    "original": pl.String,
    "text": pl.String,
    "translator": pl.String,
}


def check_cues(value: Any, key: str = "cues") -> tuple[str, ...]:
    """The listed cue types, each once in the order given; InputError naming ``key`` for an
    empty list or an unknown cue type."""
    if not isinstance(value, list | tuple) or not value:
        raise InputError("decision settings", f"a non-empty list of: {', '.join(CUE_TYPES)}", key)
    unknown = [v for v in value if v not in CUE_TYPES]
    if unknown:
        raise InputError(
            "decision settings",
            f"unknown cue type {unknown[0]!r} (the cue registry's decision cues: "
            f"{', '.join(CUE_TYPES)})",
            key,
        )
    return tuple(dict.fromkeys(value))


def is_cue_signal(pair_id: str) -> bool:
    """Whether a ``pair_id`` names a signal of a cue type beyond name pairs (its prefix)."""
    return pair_id.startswith(tuple(f"{cue}/" for cue in CUE_TYPES[1:]))


def signals_per_profile(cue: str, names_per_cell: int) -> int:
    """The Rate / Decide rows of one profile under a cue type (per paraphrase)."""
    return DECISION_CUES[cue].signals_per_profile(names_per_cell)


def statement_signals(cue: DecisionCue) -> list[tuple[Any, ...]]:
    """One statement per race x gender cell of a statement cue (:data:`SIGNAL_SCHEMA` rows)."""
    assert cue.descriptor is not None
    return [
        (
            "/".join([cue.name, *(v for v in (race, gender) if v)]).lower(),
            race,
            gender,
            1,
            None,
            cue.descriptor(race, gender),
        )
        for race in cue.races or (None,)
        for gender in cue.genders or (None,)
    ]


@dataclass(frozen=True)
class CueResources:
    """What the cue types beyond name pairs are built from: the first-name list (``name, race,
    gender, source``; each design draws its own names from it) and the aid appeals' dialect
    translations (:data:`TRANSLATION_SCHEMA`), each None when no arm uses its cue type."""

    first_names: pl.DataFrame | None = None
    dialect: pl.DataFrame | None = None


def first_names_of(names: pl.DataFrame, names_per_cell: int, seed: int) -> pl.DataFrame:
    """``names_per_cell`` names per race x gender of a first-name list (name, race, gender,
    source), drawn by :func:`cueaudit.cues.names.sample_names` with ``seed``."""
    try:
        return sample_names(names, names_per_cell, seed)
    except InputError as error:
        raise InputError(
            "decision.first_names", f"the first_name cue {error.message}", "names_per_cell"
        ) from error


def cue_signals(
    cue: str,
    name_pairs: pl.DataFrame,
    resources: CueResources | None = None,
    *,
    names_per_cell: int = 5,
    seed: int = 0,
) -> pl.DataFrame:
    """The signals a cue type shows (:data:`SIGNAL_SCHEMA`): the name pairs themselves, the
    first names (``names_per_cell`` per race x gender drawn with ``seed``), one statement per
    race x gender, or the two dialect varieties."""
    check_cues([cue])
    shows = DECISION_CUES[cue].shows
    if shows == "name_pair":
        return name_pairs.with_columns(descriptor=pl.lit(None, pl.String)).select(
            list(SIGNAL_SCHEMA)
        )
    if shows == "first_name":
        listed = None if resources is None else resources.first_names
        if listed is None:
            raise InputError("decision prompts", "the first_name cue needs its names", "cues")
        names = first_names_of(listed, names_per_cell, seed)
        rows = [
            (
                f"first_name/{source}/{race}/{gender}/{name}".lower(),
                race,
                gender,
                rank,
                name,
                None,
            )
            for (source, race, gender), group in names.group_by(
                "source", "race", "gender", maintain_order=True
            )
            for rank, name in enumerate(group["name"], start=1)
        ]
    elif shows == "statement":
        rows = statement_signals(DECISION_CUES[cue])
    else:
        rows = [(stem, race, None, 1, None, None) for stem, race in DIALECT_VARIETIES]
    return pl.DataFrame(rows, schema=SIGNAL_SCHEMA, orient="row")


def cue_appeals(
    cue: str,
    profiles: pl.DataFrame,
    signals: pl.DataFrame,
    resources: CueResources | None = None,
) -> pl.DataFrame | None:
    """The aid appeals each signal of a cue type shows (profile_id, pair_id, text), for the
    profiles of the aid domain (their text holds :data:`~cueaudit.decision.aid.NAME_PLACEHOLDER`):
    introduced by the first name, without the name (explicit), or without it in AAVE and in
    the original wording (dialect). None when no profile is an appeal."""
    aid = profiles.filter(pl.col("domain") == AID_DOMAIN).select("profile_id", "text")
    if aid.is_empty():
        return None
    shows = DECISION_CUES[cue].shows
    if shows == "own_words":
        translated = None if resources is None else resources.dialect
        if translated is None:
            raise InputError("decision prompts", "the dialect cue needs its translations", "cues")
        missing = sorted(set(aid["profile_id"]) - set(translated["profile_id"]))
        if missing:
            raise InputError("dialect translations", f"no translation of {missing[0]}", "text")
        (aave, _), (sae, _) = DIALECT_VARIETIES
        return pl.concat(
            [
                translated.select("profile_id", pl.lit(aave).alias("pair_id"), "text"),
                translated.select("profile_id", pl.lit(sae).alias("pair_id"), text="original"),
            ]
        )
    rows = []
    for profile_id, text in aid.iter_rows():
        neutral = None if shows == "first_name" else neutral_appeal(text, profile_id)
        for pair_id, name in signals.select("pair_id", "full_name").iter_rows():
            shown = first_name_appeal(text, name) if shows == "first_name" else neutral
            rows.append((profile_id, pair_id, shown))
    schema = {"profile_id": pl.String, "pair_id": pl.String, "text": pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row")


def with_cue_ids(rows: pl.DataFrame, cue: str) -> pl.DataFrame:
    """Crossed Rate / Decide rows of a cue type with their ``cue``; a dialect text's pair id
    names its profile (one realisation of the signal per text)."""
    if DECISION_CUES[cue].shows == "own_words":
        rows = rows.with_columns(pair_id=pl.concat_str("pair_id", "profile_id", separator="/"))
    return rows.with_columns(cue=pl.lit(cue, pl.String))


def bundle_signals(bundles: pl.DataFrame, cue: str) -> pl.DataFrame:
    """Design bundles (one row per candidate, :data:`cueaudit.decision.design.BUNDLE_SCHEMA`)
    shown under a cue type that fills them (:data:`BUNDLE_CUES`): each candidate's name pair
    replaced by the cue's signal of its race and gender; the bundle ids stay the design's."""
    if cue not in BUNDLE_CUES:
        raise InputError("decision prompts", f"the {cue} cue fills no bundles", "cues")
    shown = bundles.with_columns(cue=pl.lit(cue, pl.String))
    if DECISION_CUES[cue].shows == "name_pair":
        return shown.with_columns(descriptor=pl.lit(None, pl.String))
    signals = cue_signals(cue, pl.DataFrame(schema=SIGNAL_SCHEMA))
    return shown.drop("pair_id", "full_name").join(
        signals.select("race", "gender", "pair_id", "full_name", "descriptor"),
        on=["race", "gender"],
        how="left",
        maintain_order="left",
    )


def translate_appeals(
    profiles: pl.DataFrame, spec: Mapping[str, Any], *, cache: str | Path | None = None
) -> pl.DataFrame:
    """The aid appeals without their names (:func:`~cueaudit.decision.aid.neutral_appeal`) and
    their AAVE translations (:data:`TRANSLATION_SCHEMA`) by the translator of ``spec`` (the
    config's ``decision.dialect``: ``translator``, ``model``, ``seed`` as ``cues.dialect``
    takes them), sentence by sentence through the translation cache (``cache``, default
    ``spec["cache"]``; ``":memory:"`` keeps none)."""
    aid = profiles.filter(pl.col("domain") == AID_DOMAIN).select("profile_id", "text")
    originals = [neutral_appeal(text, pid) for pid, text in aid.iter_rows()]
    translator = make_translator(spec)
    where = cache if cache is not None else spec.get("cache", DEFAULT_DIALECT_CACHE)
    with TranslationCache(where) as store:
        done = translate_texts(originals, translator, store, keep_instruction=False)
    return pl.DataFrame(
        {
            "profile_id": aid["profile_id"],
            "original": originals,
            "text": [text for text, *_ in done],
            "translator": [f"{translator.name}:{translator.model}"] * aid.height,
        },
        schema=TRANSLATION_SCHEMA,
    )


def first_name_list(
    cues: Collection[str], path: str | Path = DEFAULT_FIRST_NAMES
) -> pl.DataFrame | None:
    """The first-name list (:func:`cueaudit.cues.names.load_name_list`, errors naming the
    file) when ``cues`` (every arm's cue types) has ``first_name``, else None."""
    return load_name_list(path) if FIRST_NAME in cues else None


def cue_resources(
    cues: Collection[str],
    profiles: pl.DataFrame,
    *,
    first_names: str | Path = DEFAULT_FIRST_NAMES,
    dialect: Mapping[str, Any] | None = None,
    dialect_cache: str | Path | None = None,
) -> CueResources:
    """The resources ``cues`` (every arm's cue types) need: the first-name list with
    ``first_name``, the aid appeals of ``profiles`` translated (:func:`translate_appeals`)
    with ``dialect``."""
    translated = None
    if DIALECT in cues:
        translated = translate_appeals(profiles, dialect or {}, cache=dialect_cache)
    return CueResources(first_name_list(cues, first_names), translated)
