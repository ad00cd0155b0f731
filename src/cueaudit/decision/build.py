"""The decision audit's prompt tables from its resource files: load, check, build, write.

Every profile passes the demographic-signal check against the configured name pairs before
any table is written, and every table's row count must equal the design's expected count, per
cue type (:func:`cueaudit.decision.design_settings.expected_counts_by_cue`). A design with the aid
domain adds FairFund-Bench's appeals (:mod:`cueaudit.decision.aid`), read from
``fairfund_stimuli_path``; they hold their names by construction and are not checked. A design
with the ``first_name`` cue reads its names from ``first_names_path`` (and the profiles must
hold none of the names drawn); one with the ``dialect`` cue translates the aid appeals with the
translator of ``dialect`` (:mod:`cueaudit.decision.cue_signals`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from cueaudit.cues.lookalikes import fold_text
from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.decision import cue_signals as cue_types
from cueaudit.decision.aid import with_aid
from cueaudit.decision.demographic_checks import (
    check_attribute_list,
    check_profile_texts,
    check_wordings,
)
from cueaudit.decision.design_settings import DesignSettings, expected_counts_by_cue
from cueaudit.decision.formats import AID_DOMAIN, load_prompt_resources
from cueaudit.decision.profiles import load_profiles, tier_counts
from cueaudit.decision.prompts import build_decision_prompts
from cueaudit.decision.tasks import arm_task
from cueaudit.errors import InputError
from cueaudit.io import write_parquet

log = logging.getLogger(__name__)


def design_tier_counts(
    *,
    profiles_path: str | Path,
    profiles_format: str,
    strip_suffixes: Sequence[str],
    name_pairs_path: str | Path,
    designs: Mapping[str, Mapping[str, Any]],
    fairfund_stimuli_path: str | Path | None = None,
) -> dict[str, dict[str, int]]:
    """The tier counts the prompt builder sees (the profile file's, and the aid domain's when
    an arm runs it), for the counts printed before anything runs."""
    profiles = load_profiles(profiles_path, profiles_format, strip_suffixes)  # type: ignore[arg-type]
    domains = {d for design in designs.values() for d in DesignSettings.of(design).domains}
    if AID_DOMAIN in domains:
        pairs = load_name_pairs(name_pairs_path)
        profiles, _ = with_aid(profiles, pairs, fairfund_stimuli_path, sorted(domains))
    return tier_counts(profiles)


def write_decision_prompts(
    *,
    profiles_path: str | Path,
    profiles_format: str,
    strip_suffixes: Sequence[str],
    audit_cues: Sequence[str],
    name_pairs_path: str | Path,
    hobbies_path: str | Path,
    neighbourhoods_path: str | Path,
    terms_path: str | Path,
    designs: Mapping[str, Mapping[str, Any]],
    out_paths: Mapping[str, str | Path],
    allowed_phrases: Sequence[str] = (),
    fairfund_stimuli_path: str | Path | None = None,
    first_names_path: str | Path | None = None,
    dialect: Mapping[str, Any] | None = None,
) -> dict[str, int]:
    """Write each task's prompt table to ``out_paths[task]`` for every arm's design
    (``designs``: arm -> design settings; tasks named by :func:`arm_task`); returns the row
    counts. Profiles, both attribute lists and the title-line wordings of paraphrase-matched
    bundles pass the demographic check first."""
    profiles = load_profiles(profiles_path, profiles_format, strip_suffixes)  # type: ignore[arg-type]
    pairs = load_name_pairs(name_pairs_path)
    settings = [DesignSettings.of(design) for design in designs.values()]
    cues = {cue for arm in settings for cue in arm.cues}
    wordings = {arm.prompts: load_prompt_resources(arm.prompts) for arm in settings}
    listed = cue_types.first_name_list(cues, first_names_path or cue_types.DEFAULT_FIRST_NAMES)
    names = [*pairs["first"].to_list(), *pairs["last"].to_list(), *_drawn(listed, designs)]
    check = {
        "names": names,
        "terms_path": terms_path,
        "audit_cues": audit_cues,
        "allowed": allowed_phrases,
    }
    for prompts, wording in wordings.items():  # before the profile check, which would blame one
        _check_labels(names, name_pairs_path, prompts, wording.candidate_labels)
    check_profile_texts(profiles, **check)
    hobbies = check_attribute_list(hobbies_path, **check)
    neighbourhoods = check_attribute_list(neighbourhoods_path, **check)
    for wording in wordings.values():
        check_wordings(wording, **check)
    domains = {d for arm in settings for d in arm.domains}
    profiles, appeals = with_aid(profiles, pairs, fairfund_stimuli_path, sorted(domains))
    translated = None
    if cue_types.DIALECT in cues:
        translated = cue_types.translate_appeals(profiles, dialect or {})
    resources = cue_types.CueResources(listed, translated)
    files = {
        "names": name_pairs_path,
        "hobby values": hobbies_path,
        "neighbourhood values": neighbourhoods_path,
        "profiles": profiles_path,
    }
    tables = {}
    tiers = tier_counts(profiles)
    source = str(profiles_path)
    if appeals is not None:
        source = f"{profiles_path} and {fairfund_stimuli_path} (the aid domain)"
    for arm, design in designs.items():
        # the tier rule's error names the file itself; the design's errors name theirs here
        by_cue = expected_counts_by_cue(design, tiers, profiles_file=source)
        try:
            built = build_decision_prompts(
                profiles,
                pairs,
                hobbies,
                neighbourhoods,
                design,
                arm,
                profiles_file=source,
                appeals=appeals,
                cue_resources=resources,
            )
        except InputError as error:
            raise _naming_the_file(error, files) from error
        wrong = {}
        for cue, counts in by_cue.items():
            for task, n in counts.items():
                table = built[arm_task(task, arm)]
                rows = table.filter(pl.col("cue") == cue).height
                if rows != n:
                    name = arm_task(task, arm)
                    wrong[name if len(by_cue) == 1 else f"{name} ({cue})"] = (rows, n)
        if wrong:
            raise InputError(
                f"decision design ({arm})",
                f"row counts (built, expected) differ: {wrong}" + _count_cause(pairs, design),
            )
        tables.update(built)
    missing = sorted(set(out_paths) - set(tables))
    if missing:
        raise InputError("decision design", f"no table built for tasks {missing}", "tasks")
    for task, path in out_paths.items():
        write_parquet(tables[task], path)
        log.info("%s: %d prompts", task, tables[task].height)
    return {task: tables[task].height for task in out_paths}


def _drawn(listed: pl.DataFrame | None, designs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The first names the designs with the first_name cue draw (no profile may hold one)."""
    if listed is None:
        return []
    drawn: set[str] = set()
    for design in designs.values():
        cfg = DesignSettings.of(design)
        if cue_types.FIRST_NAME in cfg.cues:
            names = cue_types.first_names_of(listed, cfg.names_per_cell, cfg.seed)
            drawn |= set(names["name"].to_list())
    return sorted(drawn)


def _count_cause(pairs: Any, design: Mapping[str, Any]) -> str:
    """Why a table is short: a race x gender cell with fewer name pairs than the design
    crosses (a tier with fewer profiles is refused by the tier rule before)."""
    cfg = DesignSettings.of(design)
    for (race, gender), cell in pairs.group_by("race", "gender"):
        if cell.height < cfg.names_per_cell:
            return (
                f": {race}/{gender} has {cell.height} name pairs, names_per_cell asks for "
                f"{cfg.names_per_cell}"
            )
    return ""


def _naming_the_file(error: InputError, files: Mapping[str, str | Path]) -> InputError:
    """A design error about the stimuli (too few hobbies, one profile of a tier) named by the
    file that holds them."""
    text = f"{error.source}: {error.message}"
    for what, path in files.items():
        if what in text:
            return InputError(str(path), f"{error.message} (the design needs more)", error.field)
    return error


def _check_labels(
    names: Sequence[str], name_pairs_path: str | Path, prompts: str, candidate_labels: Sequence[str]
) -> None:
    """A name equal to a candidate label ("A") would read as a label in every ranking."""
    labels = {fold_text(label).casefold() for label in candidate_labels}
    clash = sorted({n for n in names if fold_text(n).casefold() in labels})
    if clash:
        raise InputError(
            str(name_pairs_path),
            f"the name {clash[0]!r} is also a candidate label of {prompts}: rename the pair "
            "or the labels",
            "first",
        )
