"""The probing study's size, from the config and its input files alone (before any job):
prompts per task, per model x seed and in requests, checked against
``probing.expected_prompts``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cueaudit.config import seeds_of
from cueaudit.cues import REGISTRY
from cueaudit.errors import InputError
from cueaudit.io import read_csv_records
from cueaudit.probing.base_prompts import load_base_prompts
from cueaudit.probing.expansion import expected_prompt_count
from cueaudit.probing.race_prediction import TASK as RACE_PREDICTION
from cueaudit.probing.study import race_prediction_runs


@dataclass(frozen=True)
class TaskSize:
    """One advice task: base prompts x cue variants (None when unknown before running)."""

    task: str
    base_prompts: int | None
    cue_variants: int | None
    notes: tuple[str, ...] = ()

    @property
    def prompts(self) -> int | None:
        if self.base_prompts is None or self.cue_variants is None:
            return None
        return self.base_prompts * self.cue_variants


def _rows(path: Path) -> int:
    return len(read_csv_records(path, ()))


def base_prompt_count(task: str, spec: Mapping[str, Any], base: Path) -> int:
    """Base prompts of one task: the rows of its base-prompt file, or of its augmentation
    (templates x every combination of components, or its ``total``), cut by ``limit``."""
    if "augment" in spec:
        augment = spec["augment"]
        count = augment.get("total")
        if count is None:
            count = _rows(base / augment["templates"])
            for path in augment.get("components", {}).values():
                count *= _rows(base / path)
    else:
        count = load_base_prompts(base / spec["base_prompts"], task).height
    limit = spec.get("limit")
    return count if limit is None else min(count, limit)


def cue_variant_count(config: Mapping[str, Any], base: Path) -> tuple[int | None, str | None]:
    """Cue variants crossed with every base prompt (the no-cue baseline included): the
    variants of every registered cue type whose block is in ``cues:``, with a note when the
    count is nominal, or unknown before the resources are built."""
    counts: dict[str, int] = {}
    notes = []
    for cue_type in REGISTRY:
        block = config["cues"].get(cue_type.config_key)
        if block is None:
            continue
        try:
            count, note = cue_type.count(cue_type, block, base)
        except InputError as error:  # the job that prepares the resource reports it
            return None, f"{cue_type.config_key} not counted: {error}"
        if count is None:
            return None, note
        counts[cue_type.config_key] = count
        notes += [note] if note else []
    return expected_prompt_count(1, counts), "; ".join(notes) or None


def task_sizes(config: Mapping[str, Any], base_dir: str | Path = ".") -> list[TaskSize]:
    """The size of every advice task. A resource file that cannot be read leaves its count
    unknown (with a note): the job that reads it reports the problem."""
    base = Path(base_dir)
    variants, note = cue_variant_count(config, base)
    sizes = []
    for task, spec in config["probing"]["tasks"].items():
        notes = [note] if note else []
        try:
            n_base: int | None = base_prompt_count(task, spec, base)
        except InputError as error:
            n_base = None
            notes.append(f"base prompts not counted: {error}")
        sizes.append(TaskSize(task, n_base, variants, tuple(notes)))
    return sizes


def _runs_text(runs: Mapping[str, list[int]]) -> str:
    return ", ".join(
        f"{model} seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"
        for model, seeds in runs.items()
    )


def _n(count: int | None) -> str:
    return "unknown" if count is None else str(count)


def _times(count: int | None, runs: int) -> int | None:
    return None if count is None else count * runs


def _sum(counts: list[int | None]) -> int | None:
    return None if None in counts else sum(c for c in counts if c is not None)


def probing_size(config: Mapping[str, Any], base_dir: str | Path = ".") -> str:
    """Lines describing the design's size; raises InputError when ``probing.expected_prompts``
    differs from the advice prompts per model x seed (or cannot be checked)."""
    sizes = task_sizes(config, base_dir)
    probing = config["probing"]
    lines = [
        f"probing task {size.task}: {_n(size.prompts)} prompts ({_n(size.base_prompts)} base "
        f"prompts x {_n(size.cue_variants)} cue variants)"
        + "".join(f" [{note}]" for note in size.notes)
        for size in sizes
    ]
    per_run = _sum([size.prompts for size in sizes])
    runs = {model: seeds_of(config, model) for model in config["models"]}
    n_runs = sum(len(seeds) for seeds in runs.values())
    total = _times(per_run, n_runs)
    lines.append(
        f"probing study: {_n(per_run)} prompts per model x seed; {n_runs} model x seed runs "
        f"({_runs_text(runs)}): {_n(total)} requests"
    )
    predicted = race_prediction_runs(config)
    if predicted:
        chosen = set(probing["race_prediction"].get("tasks") or probing["tasks"])
        per_prediction = _sum([size.prompts for size in sizes if size.task in chosen])
        n_predictions = sum(len(seeds) for seeds in predicted.values())
        requests = _times(per_prediction, n_predictions)
        lines.append(
            f"probing {RACE_PREDICTION}: {_n(per_prediction)} prompts per model x seed; "
            f"{n_predictions} model x seed runs ({_runs_text(predicted)}): {_n(requests)} requests"
        )
        total = None if total is None or requests is None else total + requests
    lines.append(f"probing study in total: {_n(total)} requests")
    expected = probing.get("expected_prompts")
    if expected is not None and expected != per_run:
        found = "cannot be counted before running" if per_run is None else f"has {per_run}"
        raise InputError(
            "config",
            "\n".join(lines) + f"\nconfig key probing.expected_prompts: {expected} prompts per "
            f"model x seed, but the design {found}",
        )
    return "\n".join(lines)
