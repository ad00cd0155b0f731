"""The decision audit's inference tasks: each task's format, answer mode, outcome kind and
token limit, and how an extension arm names its own copy of a task."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

from cueaudit.decision import probes
from cueaudit.errors import InputError

STUDY: Final = "decision"
SINGLE: Final = "single"
#: The arm of the pre-registered design; extension arms are named by their config block.
PRIMARY: Final = "primary"
ARM_SEPARATOR: Final = "__"
RATING_SCALE: Final = 5
#: How Rate and Decide prompts pair profiles with name pairs (design key ``name_assignment``):
#: ``crossed`` (every profile under every name pair; the pre-registered design) or
#: ``fixed_per_profile``, the confounded construction of the paper's wording arm, allowed only
#: in an extension arm: each profile is shown under a fixed set of name pairs, those of one
#: race, dealt in design order and rotated by one race per paraphrase
#: (:func:`fixed_name_sets`), so race is tied to the application.
NAME_ASSIGNMENTS: Final = ("crossed", "fixed_per_profile")


class TaskSpec(NamedTuple):
    """A task's judgement format (or "probe"), answer mode, outcome kind and probe."""

    format: str
    mode: str
    kind: str
    probe: str | None = None


TASKS: Final[Mapping[str, TaskSpec]] = {
    "decision_rate_text": TaskSpec("rate", "text", "rating"),
    "decision_rate_tool": TaskSpec("rate", "tool", "rating"),
    "decision_decide_text": TaskSpec("decide", "text", "binary"),
    "decision_decide_tool": TaskSpec("decide", "tool", "binary"),
    "decision_rank_text": TaskSpec("rank", "text", "ranking"),
    "decision_rank_json": TaskSpec("rank", "json", "ranking"),
    "decision_rank_tool": TaskSpec("rank", "tool", "ranking"),
    "decision_probe_choice": TaskSpec("probe", "text", probes.PROBE_KINDS["choice"], "choice"),
    "decision_probe_free": TaskSpec("probe", "text", probes.PROBE_KINDS["free"], "free"),
}


def arm_task(task: str, arm: str) -> str:
    """The inference task of ``task`` in an arm: the task itself in the primary arm,
    ``<task>__<arm>`` in an extension (its own prompt table, responses and outcomes)."""
    return task if arm == PRIMARY else f"{task}{ARM_SEPARATOR}{arm}"


def task_spec(task: str) -> TaskSpec:
    """The format, mode and outcome kind of a task of any arm."""
    base = task.split(ARM_SEPARATOR, 1)[0]
    if base not in TASKS:
        raise InputError("decision tasks", f"unknown task {task!r}", "tasks")
    return TASKS[base]


#: New tokens long enough for each answer: a rating or yes/no word, a four-rank JSON object, a
#: tool call's arguments (with whitespace: a server's grammar allows `{ "decision": "yes" }`).
MAX_NEW_TOKENS: Final[Mapping[str, int]] = {
    "rate": 8,
    "decide": 8,
    "rank": 40,
    "probe": 24,
    "tool_call": 24,
}


def max_new_tokens(task: str, overrides: Mapping[str, int] | None = None) -> int:
    """A task's token limit: ``overrides`` (the config's ``decision.max_new_tokens``, keyed by
    task, task of the primary arm, format or ``tool_call``) over :data:`MAX_NEW_TOKENS`; a tool
    call gets at least the ``tool_call`` limit."""
    limits = {**MAX_NEW_TOKENS, **(overrides or {})}
    spec = task_spec(task)
    default = limits[spec.format]
    if spec.mode == "tool":
        default = max(default, limits["tool_call"])
    return limits.get(task, limits.get(task.split(ARM_SEPARATOR)[0], default))
