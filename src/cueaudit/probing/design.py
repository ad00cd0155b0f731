"""The probing study's size, from the config and its input files alone (before any job):
prompts per task, per model x seed and in requests, checked against
``probing.expected_prompts``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cueaudit.config import RACE_PREDICTION, race_prediction_runs, seeds_of
from cueaudit.cues.dialog.clusters import GROUPS
from cueaudit.cues.explicit import explicit_descriptors
from cueaudit.cues.names import load_name_lists, read_csv_records, sample_names
from cueaudit.errors import InputError
from cueaudit.probing.expansion import expected_prompt_count


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
    from cueaudit.probing.base_prompts import load_base_prompts

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


def name_count(names: Mapping[str, Any], base: Path) -> tuple[int, str | None]:
    """Name cues, with a note when the count is nominal (names derived by a job)."""
    if names.get("use") == "derived":
        derive = names.get("derive") or {}
        sources = [s for s in ("rosenman", "elder_hayes", "tzioumis") if s in derive]
        per_group = names.get("per_group") or derive.get("top_n", 50)
        return len(sources) * len(GROUPS) * per_group, "derived names: nominal count per subgroup"
    lists = load_name_lists([base / path for path in names["lists"].values()])
    return sample_names(lists, names.get("per_group"), names.get("sample_seed", 0)).height, None


def cue_variant_count(config: Mapping[str, Any], base: Path) -> tuple[int | None, str | None]:
    """Cue variants crossed with every base prompt (the no-cue baseline included), with a
    note when the count is nominal, or unknown before the resources are built."""
    cues = config["cues"]
    try:
        n_names, note = name_count(cues["names"], base)
    except InputError as error:  # the prepare_names job reports it
        return None, f"names not counted: {error}"
    explicit = cues.get("explicit")
    n_explicit = explicit_descriptors(explicit["categories"]).height if explicit else 0
    n_dialect = 1 if cues.get("dialect") is not None else 0
    dialog = cues.get("dialog") or {}
    sources = [source for source in ("cad", "prism") if source in dialog]
    n_clusters = dialog.get("n_clusters", 50)
    if sources and n_clusters is None:
        return None, "cues.dialog.n_clusters is null: every cluster, counted when built"
    clusters = len(sources) * (n_clusters or 0)
    return expected_prompt_count(1, n_names, n_explicit, n_dialect, clusters), note


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
