"""The contract between a study and the shared stages.

A study is one :class:`Study` object in its own package, registered in
:data:`cueaudit.studies.STUDIES`. The shared parts (configuration, inference, parsing, the
store and the workflow's shared rules) read what a study brings from that object and never
import a study or name one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cueaudit.store import ParseRateGroups, ViewBuilder

Config = Mapping[str, Any]
#: task -> {outcome, answer, max_new_tokens, shards, and optionally requires (files that must
#: exist before its first inference job), models (when not every configured model runs it),
#: seeds (the only seeds of those models it runs), needs_scores ({because, instead}: the
#: setting that makes the study's analyses read the answers' option scores, and the setting
#: that does without; a model that cannot score options is refused before any job),
#: shards_key (the config key that sets its shards, named when a run has very many)}: what
#: the shared inference and parsing rules read, and all they read.
InferenceTasks = Mapping[str, Mapping[str, Any]]


def _no_problems(config: Config) -> Iterator[str]:
    return iter(())


def _no_paths(config: Config) -> Iterator[tuple[str, str]]:
    return iter(())


def _no_views(task_outcomes: Mapping[str, str], settings: Mapping[str, Any]) -> list[ViewBuilder]:
    return []


@dataclass(frozen=True)
class Study:
    """What a study brings to the shared stages.

    ``name`` is its config block, its rule folder ``workflow/rules/<name>/`` and its target
    rule (``snakemake <name>``); the study runs when its block is in the config. ``schema`` is
    the file, beside the shared ``config.schema.yaml``, that validates the block (its
    ``$defs`` join the shared schema's). ``problems`` yields what the schema cannot say (each
    message starts with ``config key <dotted key>:``), on a config the schema already
    validated and filled with defaults. ``resource_paths`` yields (dotted key, path) of every
    input file the block names, checked to exist before any job runs. ``inference_tasks``
    gives the tasks the shared inference and parsing rules run for it. ``database_views``
    builds its DuckDB views from its tasks' outcome kinds and its view settings, and
    ``parse_rates`` says how its answers' parse rates are grouped.
    """

    name: str
    title: str
    schema: str
    inference_tasks: Callable[[Config], InferenceTasks]
    problems: Callable[[Config], Iterator[str]] = _no_problems
    resource_paths: Callable[[Config], Iterator[tuple[str, str]]] = _no_paths
    database_views: Callable[[Mapping[str, str], Mapping[str, Any]], Sequence[ViewBuilder]] = (
        _no_views
    )
    parse_rates: ParseRateGroups = field(default_factory=ParseRateGroups)

    def enabled(self, config: Config) -> bool:
        """A study runs when its block is in the config."""
        return self.name in config


def database_parts(
    studies: Mapping[str, Study],
    running: Mapping[str, Mapping[str, Any]],
    task_outcomes: Mapping[str, str],
) -> tuple[list[ViewBuilder], list[ParseRateGroups]]:
    """The views and parse-rate groups of the studies that ran, for
    :func:`cueaudit.store.build_database`. ``running`` is study -> {tasks: its task names,
    view_settings: ...}; each study's views and parse rates see only its own tasks."""
    views: list[ViewBuilder] = []
    parse_rate_groups = []
    for name, spec in running.items():
        study = studies[name]
        kinds = {task: task_outcomes[task] for task in spec["tasks"]}
        views.extend(study.database_views(kinds, spec["view_settings"]))
        parse_rate_groups.append(dataclasses.replace(study.parse_rates, tasks=tuple(spec["tasks"])))
    return views, parse_rate_groups


def enabled_studies(studies: Mapping[str, Study], config: Config) -> list[Study]:
    """The registered studies whose block is in ``config``, in registry order."""
    return [study for study in studies.values() if study.enabled(config)]
