"""The decision audit's prompt tables from its resource files: load, check, build, write.

Every profile passes the demographic-signal check against the configured name pairs before
any table is written, and every table's row count must equal the design's expected count.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.decision.profiles import check_profiles, load_attribute_list, load_profiles
from cueaudit.decision.prompts import arm_task, build_decision_prompts, expected_counts
from cueaudit.errors import InputError
from cueaudit.io import write_parquet

log = logging.getLogger(__name__)


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
) -> dict[str, int]:
    """Write each task's prompt table to ``out_paths[task]`` for every arm's design
    (``designs``: arm -> design settings; tasks named by :func:`arm_task`); returns the row
    counts."""
    profiles = load_profiles(profiles_path, profiles_format, strip_suffixes)  # type: ignore[arg-type]
    pairs = load_name_pairs(name_pairs_path)
    hobbies = load_attribute_list(hobbies_path)
    neighbourhoods = load_attribute_list(neighbourhoods_path)
    names = [*pairs["first"].to_list(), *pairs["last"].to_list()]
    check_profiles(profiles, names=names, terms_path=terms_path, audit_cues=audit_cues)
    tables = {}
    for arm, design in designs.items():
        built = build_decision_prompts(profiles, pairs, hobbies, neighbourhoods, design, arm)
        expected = {arm_task(t, arm): n for t, n in expected_counts(design).items()}
        wrong = {t: (built[t].height, n) for t, n in expected.items() if built[t].height != n}
        if wrong:
            raise InputError(f"decision design ({arm})", f"row counts differ: {wrong}")
        tables.update(built)
    missing = sorted(set(out_paths) - set(tables))
    if missing:
        raise InputError("decision design", f"no table built for tasks {missing}", "tasks")
    for task, path in out_paths.items():
        write_parquet(tables[task], path)
        log.info("%s: %d prompts", task, tables[task].height)
    return {task: tables[task].height for task in out_paths}
