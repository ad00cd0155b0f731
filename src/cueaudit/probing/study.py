"""The probing study as the shared stages see it: its config checks, input files, inference
tasks, views and parse-rate grouping (:class:`cueaudit.study.Study`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from cueaudit.config import seeds_of, unknown_models
from cueaudit.probing.race_prediction import TASK as RACE_PREDICTION
from cueaudit.probing.views import PARSE_RATES, database_views
from cueaudit.study import InferenceTasks, Study

#: The labels of the race-prediction task's forced choice (Appendix C.1.1).
RACE_LABELS: Final = ("Black", "White", "Unknown")
#: Why the yes/no tasks need option scores under ``binary_outcome: probability``, and the
#: setting that does without them (the InferenceTasks contract's ``needs_scores``).
PROBABILITY_OUTCOME: Final = {
    "because": "probing.analysis.binary_outcome: probability",
    "instead": "probing.analysis.binary_outcome: answer",
}


def race_prediction_runs(config: Mapping[str, Any]) -> dict[str, list[int]]:
    """Model -> seeds of the race-prediction task: ``probing.race_prediction.models``
    (default: all) with each model's seeds, restricted to ``probing.race_prediction.seeds``
    when given. Empty when the task is off."""
    spec = config["probing"].get("race_prediction") or {}
    if not spec.get("enabled"):
        return {}
    only = spec.get("seeds")
    runs = {}
    for model in spec.get("models") or list(config["models"]):
        runs[model] = [s for s in seeds_of(config, model) if only is None or s in only]
    return runs


def regression_seeds(config: Mapping[str, Any]) -> dict[str, int]:
    """Model -> the one seed whose responses enter Tables 5-7 (one response per prompt, as
    the paper): ``probing.analysis.regression_seed``, else each model's first race-prediction
    seed."""
    chosen = (config["probing"].get("analysis") or {}).get("regression_seed")
    return {
        model: seeds[0] if chosen is None else chosen
        for model, seeds in race_prediction_runs(config).items()
        if seeds
    }


def inference_tasks(config: Mapping[str, Any]) -> InferenceTasks:
    """The advice tasks, then the derived race-prediction task when it is enabled."""
    probing = config["probing"]
    tasks: dict[str, dict[str, Any]] = {
        task: {
            "outcome": spec["outcome"],
            "answer": {},
            "max_new_tokens": spec["max_new_tokens"],
            "shards": spec["shards"],
            "shards_key": f"probing.tasks.{task}.shards",
        }
        for task, spec in probing["tasks"].items()
    }
    if (probing.get("analysis") or {}).get("binary_outcome") == "probability":
        for task in tasks.values():
            if task["outcome"] == "binary":  # the analyses read P(Yes), an option score
                task["needs_scores"] = PROBABILITY_OUTCOME
    spec = probing.get("race_prediction") or {}
    if spec.get("enabled"):
        task = tasks[RACE_PREDICTION] = {
            "outcome": "race",
            "answer": {"labels": list(RACE_LABELS)},
            "max_new_tokens": spec["max_new_tokens"],
            "shards": spec["shards"],
            "shards_key": "probing.race_prediction.shards",
        }
        for key in ("models", "seeds"):
            if spec.get(key):
                task[key] = spec[key]
    return tasks


def problems(config: Mapping[str, Any]) -> Iterator[str]:
    tasks = config["probing"]["tasks"]
    for task in tasks:
        if task == RACE_PREDICTION:
            yield (
                f"config key probing.tasks.{task}: the name is reserved for the race-prediction "
                "task (set it up under probing.race_prediction)"
            )
    for task in config["probing"]["race_prediction"]["tasks"]:
        if task not in tasks:
            yield (
                f"config key probing.race_prediction.tasks: unknown task '{task}' "
                f"(probing.tasks has: {', '.join(sorted(tasks))})"
            )
    if "names" not in config["cues"]:
        yield "config key cues.names: required by the probing study (the name cues)"
    yield from _race_prediction_problems(config)


def _race_prediction_problems(config: Mapping[str, Any]) -> Iterator[str]:
    spec = config["probing"]["race_prediction"]
    unknown = list(
        unknown_models(config, "probing.race_prediction.models", spec.get("models") or [])
    )
    if unknown:
        yield from unknown
        return
    if not spec["enabled"]:
        return
    runs = race_prediction_runs(config)
    for seed in spec.get("seeds") or []:
        if not any(seed in seeds_of(config, model) for model in runs):
            yield (
                f"config key probing.race_prediction.seeds: seed {seed} is not a seed of any "
                f"race-prediction model ({', '.join(runs)})"
            )
    for model, seeds in runs.items():
        if not seeds:
            yield (
                f"config key probing.race_prediction.seeds: model {model!r} runs none of them "
                f"(its seeds: {seeds_of(config, model)})"
            )
    chosen = config["probing"]["analysis"].get("regression_seed")
    for model, seeds in runs.items():
        if chosen is not None and seeds and chosen not in seeds:
            yield (
                f"config key probing.analysis.regression_seed: {chosen} has no race predictions "
                f"of model {model!r} (its race-prediction seeds: {seeds})"
            )


def resource_paths(config: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Every advice task's base-prompt file, augmentation templates and component files."""
    for task, spec in config["probing"]["tasks"].items():
        if "base_prompts" in spec:
            yield f"probing.tasks.{task}.base_prompts", spec["base_prompts"]
        augment = spec.get("augment") or {}
        if "templates" in augment:
            yield f"probing.tasks.{task}.augment.templates", augment["templates"]
        for name, path in (augment.get("components") or {}).items():
            yield f"probing.tasks.{task}.augment.components.{name}", path


STUDY: Final = Study(
    name="probing",
    title="Probing study (Tonneau et al. 2026, Demographic Probing of Large Language Models "
    "Lacks Construct Validity)",
    schema="probing.schema.yaml",
    inference_tasks=inference_tasks,
    problems=problems,
    resource_paths=resource_paths,
    database_views=database_views,
    parse_rates=PARSE_RATES,
)
