"""The decision audit as the shared stages see it: its config checks, input files, arms,
inference tasks, views and parse-rate grouping (:class:`cueaudit.study.Study`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from cueaudit.config import unknown_models
from cueaudit.decision import cue_signals as cue_types
from cueaudit.decision.design_settings import (
    DesignSettings,
    arm_designs,
    expected_counts,
    listed_cues,
)
from cueaudit.decision.formats import AID_DOMAIN
from cueaudit.decision.preregistration import load_preregistration
from cueaudit.decision.prompts import task_answers
from cueaudit.decision.tasks import (
    MAX_NEW_TOKENS,
    NAME_ASSIGNMENTS,
    PRIMARY,
    TASKS,
    arm_task,
    max_new_tokens,
)
from cueaudit.decision.views import PARSE_RATES, database_views
from cueaudit.errors import InputError
from cueaudit.study import InferenceTasks, Study

#: What every decision inference job waits for: the check that the stimuli, the design and
#: the planned family still match the pre-registration lock.
PREREGISTRATION_CHECK: Final = "results/decision/preregistration.checked"
#: The planner's table (workflow/rules/decision/plan.smk); inference waits for it when
#: decision.plan.before_inference is set
PLAN_TABLE: Final = "results/tables/decision_plan.csv"
#: The stimulus files the lock binds, by role (config keys of ``decision:``; the prompt
#: wording file comes from the design).
REGISTERED_FILES: Final = (
    "profiles",
    "name_pairs",
    "hobbies",
    "neighbourhoods",
    "demographic_terms",
)


def arms(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Arm -> design: the pre-registered design, then each extension block's (the primary
    design with the block's ``design`` keys replaced)."""
    decision = config["decision"]
    extensions = decision.get("extensions", {})
    return arm_designs(decision["design"], {a: b.get("design", {}) for a, b in extensions.items()})


def arm_models(config: Mapping[str, Any], arm: str) -> list[str]:
    """The models an arm runs on: the primary design's ``decision.models`` (default: every
    configured model); an extension's own ``models`` (default: the primary design's)."""
    decision = config["decision"]
    block = decision if arm == PRIMARY else decision["extensions"][arm]
    if block.get("models"):
        return list(block["models"])
    return list(config["models"]) if arm == PRIMARY else arm_models(config, PRIMARY)


def runs_aid(config: Mapping[str, Any]) -> bool:
    """Whether an arm's design has the aid domain (FairFund-Bench's appeals)."""
    return any(AID_DOMAIN in design["domains"] for design in arms(config).values())


def fairfund_stimuli(config: Mapping[str, Any]) -> list[str]:
    """The FairFund stimuli file the prompt tables read: one path when an arm runs the aid
    domain and ``decision.fairfund_stimuli`` names it, else none."""
    path = config["decision"].get("fairfund_stimuli")
    return [path] if path and runs_aid(config) else []


def fairfund_published(config: Mapping[str, Any]) -> list[str]:
    """The file of FairFund's published contrasts the replication table reads: one path when
    an arm runs the aid domain, else none."""
    return [config["decision"]["fairfund_published"]] if runs_aid(config) else []


def answers(config: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any], str]]:
    """Each arm task -> (outcome kind, answer settings, arm), read from the prompt resources."""
    return {
        arm_task(task, arm): (*answer, arm)
        for arm, design in arms(config).items()
        for task, answer in task_answers(design).items()
    }


def _max_new_tokens_problems(config: Mapping[str, Any], tasks: set[str]) -> Iterator[str]:
    """Every key of decision.max_new_tokens is a format, tool_call or a task of the design (a
    misspelt task would otherwise be ignored)."""
    known = set(MAX_NEW_TOKENS) | tasks | {t.split("__")[0] for t in tasks}
    for key in config["decision"]["max_new_tokens"]:
        if key not in known:
            yield (
                f"config key decision.max_new_tokens.{key}: not a format "
                f"({', '.join(MAX_NEW_TOKENS)}) or a task of this design "
                f"({', '.join(sorted(tasks))})"
            )


def inference_tasks(config: Mapping[str, Any]) -> InferenceTasks:
    """Every arm's tasks, each waiting for the pre-registration check. Reads the prompt
    resources, so it runs once their files are known to exist (and checks
    ``decision.max_new_tokens`` against the tasks it finds)."""
    decision = config["decision"]
    arm_tasks = answers(config)
    problems = list(_max_new_tokens_problems(config, set(arm_tasks)))
    if problems:
        raise InputError("config", "invalid configuration:\n  " + "\n  ".join(problems))
    plan = [PLAN_TABLE] if decision["plan"]["before_inference"] else []
    tasks = {}
    for task, (kind, settings, arm) in arm_tasks.items():
        tasks[task] = {
            "outcome": kind,
            "answer": settings,
            "max_new_tokens": max_new_tokens(task, decision["max_new_tokens"]),
            "shards": decision["shards"],
            "shards_key": "decision.shards",
            "requires": [PREREGISTRATION_CHECK, *plan],
        }
        models = arm_models(config, arm)
        if models != list(config["models"]):
            tasks[task]["models"] = models
    return tasks


def problems(config: Mapping[str, Any]) -> Iterator[str]:
    decision = config["decision"]
    if "primary" in decision["extensions"]:
        yield (
            "config key decision.extensions.primary: 'primary' is the pre-registered design's "
            "arm; give the extension another name"
        )
    blocks = {"decision.models": decision}
    blocks.update(
        {f"decision.extensions.{arm}.models": b for arm, b in decision["extensions"].items()}
    )
    for key, block in blocks.items():
        yield from unknown_models(config, key, block.get("models", []))
    if runs_aid(config) and not decision.get("fairfund_stimuli"):
        yield (
            "config key decision.fairfund_stimuli: the aid domain shows FairFund-Bench's "
            "appeals; give the path of its stimuli.csv"
        )
    yield from _confounded_problems(decision)
    yield from _paired_problems(config)
    yield from _cue_problems(config)


def _cue_problems(config: Mapping[str, Any]) -> Iterator[str]:
    """The pre-registered family is on name pairs: other cue types run in extension arms. A
    cue type an arm cannot show (dialect outside the aid domain, bundles without a four-race
    cue) is refused naming the key that lists it."""
    decision = config["decision"]
    listed = decision["design"]["cues"]
    others = [c for c in listed if c != cue_types.NAME_PAIR]
    if others:
        yield (
            f"config key decision.design.cues: {others} in the pre-registered design; its "
            f"planned family is on name pairs (cues [{cue_types.NAME_PAIR}]): run other cue "
            "types in an extension arm (decision.extensions.<arm>.design.cues)"
        )
    for arm, design in arms(config).items():
        try:
            DesignSettings.of(design)
        except InputError as error:
            if error.field != "cues":
                continue
            block = decision["extensions"].get(arm, {}).get("design", {})
            key = "decision.design.cues"
            if arm != PRIMARY and "cues" in block:
                key = f"decision.extensions.{arm}.design.cues"
            yield f"config key {key}: {error.message}"


def sequential_arms(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The extension blocks of the top-up arms the pre-registration's ``sequential`` plan
    names (none without a plan), each checked to add rows to every cell the plan names: a look
    that adds none would repeat the look before it as the next pre-registered look."""
    decision = config["decision"]
    source = decision["preregistration"]
    plan = load_preregistration(source).sequential if Path(source).is_file() else None
    if plan is None:
        return {}
    extensions = decision.get("extensions", {})
    unknown = [arm for arm in plan.arms if arm not in extensions]
    if unknown:
        raise InputError(
            source,
            f"top-up arms {unknown} are not extensions of decision.extensions",
            "sequential.arms",
        )
    designs = arms(config)
    for arm in plan.arms:
        settings = DesignSettings.of(designs[arm])
        counts = expected_counts(designs[arm])
        for domain, fmt in plan.cells:
            rows = sum(n for task, n in counts.items() if TASKS[task].format == fmt)
            if domain not in settings.domains or rows == 0:
                formats = sorted({TASKS[t].format for t, n in counts.items() if n})
                raise InputError(
                    source,
                    f"the top-up arm {arm} adds no {domain}.{fmt} rows (its design runs "
                    f"domains {list(settings.domains)} and formats {formats}): its look would "
                    "repeat the look before it; give the arm that cell "
                    f"(decision.extensions.{arm}.design) or drop the cell",
                    "sequential.cells",
                )
    return {arm: extensions[arm] for arm in plan.arms}


def cue_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """What the prompt tables read for the cue types beyond name pairs: the first-name list
    and the dialect translator, each only when an arm lists its cue type (else nothing)."""
    listed = listed_cues(arms(config).values())
    settings: dict[str, Any] = {}
    if cue_types.FIRST_NAME in listed:
        settings["first_names"] = config["decision"]["first_names"]
    if cue_types.DIALECT in listed:
        settings["dialect"] = config["decision"]["dialect"]
    return settings


def _confounded_problems(decision: Mapping[str, Any]) -> Iterator[str]:
    """The confounded construction is a named extension, never the pre-registered design, and
    never pooled with its rows (it would carry its confound into them)."""
    assignment = decision["design"]["name_assignment"]
    if assignment != NAME_ASSIGNMENTS[0]:
        yield (
            f"config key decision.design.name_assignment: {assignment} ties race to the "
            "application; only an extension arm (decision.extensions.<arm>.design) may use it"
        )
    for arm, block in decision["extensions"].items():
        own = block.get("design", {}).get("name_assignment", NAME_ASSIGNMENTS[0])
        if block.get("pool_with_primary") and own != NAME_ASSIGNMENTS[0]:
            yield (
                f"config key decision.extensions.{arm}.pool_with_primary: the arm's "
                f"name_assignment {own} ties race to the application, and pooling would carry "
                "that confound into the pre-registered rows; analyse it apart "
                "(pool_with_primary: false)"
            )


def _paired_problems(config: Mapping[str, Any]) -> Iterator[str]:
    """``paired_with`` names a model of the primary arm, and the arm runs one other model."""
    primary = arm_models(config, PRIMARY)
    for arm, block in config["decision"]["extensions"].items():
        paired = block.get("paired_with")
        if paired is None:
            continue
        key = f"config key decision.extensions.{arm}.paired_with"
        if paired not in primary:
            yield f"{key}: {paired!r} is not a model of the pre-registered arm ({primary})"
        models = arm_models(config, arm)
        if len(models) != 1 or models[0] == paired:
            yield (
                f"{key}: a paired arm runs one model other than {paired!r} "
                f"(decision.extensions.{arm}.models is {models})"
            )
        if block.get("pool_with_primary"):
            yield f"{key}: a paired arm is compared with the primary rows, not pooled with them"


def paired_arms(config: Mapping[str, Any]) -> dict[str, str]:
    """Extension arm -> the primary-arm model it is paired with (``paired_with``)."""
    extensions = config["decision"].get("extensions", {})
    return {arm: b["paired_with"] for arm, b in extensions.items() if "paired_with" in b}


def name_assignments(config: Mapping[str, Any]) -> dict[str, str]:
    """Arm -> its Rate / Decide name assignment."""
    return {arm: design["name_assignment"] for arm, design in arms(config).items()}


def resource_paths(config: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The stimulus files, the pre-registration and every arm's prompt wording file."""
    decision = config["decision"]
    for key in REGISTERED_FILES:
        if key in decision:
            yield f"decision.{key}", decision[key]
    if "preregistration" in decision:
        yield "decision.preregistration", decision["preregistration"]
    for path in fairfund_stimuli(config):
        yield "decision.fairfund_stimuli", path
    for path in fairfund_published(config):
        yield "decision.fairfund_published", path
    if "first_names" in cue_settings(config):
        yield "decision.first_names", cue_settings(config)["first_names"]
    yield "decision.design.prompts", decision["design"]["prompts"]
    for arm, block in (decision.get("extensions") or {}).items():
        if "prompts" in block.get("design", {}):
            yield f"decision.extensions.{arm}.design.prompts", block["design"]["prompts"]


def prompt_resources(config: Mapping[str, Any]) -> list[str]:
    """The prompt wording files of every arm."""
    return sorted({design["prompts"] for design in arms(config).values()})


STUDY: Final = Study(
    name="decision",
    title="Decision audit (Vohra & Ravikiran, The Audit Decides the Verdict)",
    schema="decision.schema.yaml",
    inference_tasks=inference_tasks,
    problems=problems,
    resource_paths=resource_paths,
    database_views=database_views,
    parse_rates=PARSE_RATES,
)
