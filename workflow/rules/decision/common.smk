# The decision audit's helpers and its registration with the shared stages: its tasks become
# inference tasks (each waiting for the pre-registration lock), its tables go into the database.

from cueaudit.decision.prompts import TASKS as DECISION_TASKS  # noqa: E402
from cueaudit.decision.prompts import expected_counts, task_answers  # noqa: E402

PREREGISTRATION_LOCK = "results/decision/preregistration.lock"
DECISION_ANSWERS = {}  # filled on first use by decision_answers()
# Long enough for each answer: a rating or yes/no word, a four-rank JSON object, a tool call.
DECISION_MAX_NEW_TOKENS = {"rate": 8, "decide": 8, "rank": 40, "probe": 24}


def decision_config():
    return config["decision"]


def decision_design():
    return decision_config()["design"]


def decision_max_new_tokens(task):
    limits = {**DECISION_MAX_NEW_TOKENS, **decision_config()["max_new_tokens"]}
    return limits.get(task, limits[DECISION_TASKS[task].format])


def decision_answers():
    """Each task's outcome kind and answer settings, read once from the prompt resources."""
    if not DECISION_ANSWERS:
        DECISION_ANSWERS.update(task_answers(decision_design()))
    return DECISION_ANSWERS


def decision_inference_tasks():
    return {
        task: {
            "outcome": kind,
            "answer": settings,
            "max_new_tokens": decision_max_new_tokens(task),
            "shards": decision_config()["shards"],
            "requires": [PREREGISTRATION_LOCK],
        }
        for task, (kind, settings) in decision_answers().items()
    }


def decision_task_names():
    return list(decision_answers())


def decision_prompt_tables():
    return all_prompt_tables(decision_task_names())


def decision_outputs():
    return ["results/cueaudit.duckdb", "results/tables/decision_outcomes.csv"]


def decision_request_count():
    counts = expected_counts(decision_design())
    per_run = sum(counts.values())
    runs = len(model_names()) * len(config["seeds"])
    listed = ", ".join(f"{task} {n}" for task, n in counts.items())
    return (
        f"decision audit: {per_run} prompts per model x seed ({listed}); "
        f"{runs} model x seed runs: {per_run * runs} requests"
    )


if study_enabled("decision"):
    register_inference_tasks(decision_inference_tasks())
    register_study(
        "decision",
        tables={"decision_outcome_summary": "results/tables/decision_outcomes.csv"},
        tasks=decision_task_names(),
        view_settings={},
        outputs=decision_outputs(),
    )
    # The design's size, printed before anything runs (also on a dry run).
    print(decision_request_count(), file=sys.stderr)
