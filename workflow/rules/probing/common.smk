# The probing study's helpers and its registration with the shared stages: its advice tasks
# (and the race-prediction task) become inference tasks, its tables go into the database.

RACE_PREDICTION = "race_prediction"
DIMENSIONS = ["race", "gender"]
# Settings every probing analysis reads (which outcome, where race predictions are), and
# those only the bootstrapped tables read.
OUTCOME_SETTINGS = ("binary_outcome", "race_prediction_task")
BOOTSTRAP_SETTINGS = ("bootstrap_replicates", "ci_level", "bootstrap_seed")


def probing_config():
    return config["probing"]


def advice_tasks():
    return probing_config()["tasks"]


def race_prediction_settings():
    return probing_config().get("race_prediction") or {}


def race_prediction_enabled():
    return bool(race_prediction_settings().get("enabled"))


def probing_inference_tasks():
    """Advice tasks, then the derived race-prediction task when it is enabled."""
    tasks = {
        task: {
            "outcome": spec["outcome"],
            "answer": {},
            "max_new_tokens": spec["max_new_tokens"],
            "shards": spec["shards"],
        }
        for task, spec in advice_tasks().items()
    }
    if race_prediction_enabled():
        spec = race_prediction_settings()
        tasks[RACE_PREDICTION] = {
            "outcome": "race",
            "answer": {"labels": ["Black", "White", "Unknown"]},
            "max_new_tokens": spec["max_new_tokens"],
            "shards": spec["shards"],
        }
    return tasks


def probing_task_names():
    return list(probing_inference_tasks())


def advice_any_of():
    return any_of(advice_tasks())


def advice_task_spec(wildcards):
    return advice_tasks()[wildcards.task]


def task_base_prompts(wildcards):
    return advice_task_spec(wildcards)["base_prompts"]


def task_limit(wildcards):
    return advice_task_spec(wildcards)["limit"]


def analysis_settings(*keys):
    return config_slice(probing_config().get("analysis") or {}, *keys)


def probing_prompt_tables():
    return all_prompt_tables(probing_task_names())


def probing_outcome_tables():
    return all_outcome_tables(probing_task_names())


def probing_outcome_kinds():
    return task_outcome_kinds(probing_task_names())


def dialect_task_inputs():
    """task -> [base-prompt CSV, limit] for every advice task (translated once each)."""
    return {task: [spec["base_prompts"], spec.get("limit")] for task, spec in advice_tasks().items()}


def dialect_base_prompt_files():
    return [spec["base_prompts"] for spec in advice_tasks().values()]


def prompt_cue_inputs(wildcards):
    """Optional inputs of expand_prompts: the dialect translations and dialog clusters."""
    inputs = {}
    if dialect_enabled():
        inputs["translations"] = "results/resources/dialect_aave.parquet"
    if dialog_sources():
        inputs["dialog"] = expand(
            "results/resources/dialog_{source}.parquet", source=dialog_sources()
        )
    return inputs


def race_prediction_source_tables():
    tasks = race_prediction_settings().get("tasks") or list(advice_tasks())
    return expand("results/prompts/{task}.parquet", task=tasks)


def probing_tables():
    return {
        **{f"validity_{d}": f"results/tables/validity_{d}.csv" for d in DIMENSIONS},
        **{
            f"validity_{d}_averaged": f"results/tables/validity_{d}_averaged.csv"
            for d in DIMENSIONS
        },
        **{f"ratios_{d}": f"results/tables/ratios_{d}.csv" for d in DIMENSIONS},
        **{f"means_{d}": f"results/tables/means_{d}.csv" for d in DIMENSIONS},
        "sample_sizes": "results/tables/sample_sizes.csv",
        "race_prediction": "results/tables/race_prediction.csv",
        "readability": "results/tables/readability.csv",
        "regressions": "results/tables/regressions.csv",
    }


def probing_outputs():
    return [
        "results/tables/parse_rates.csv",
        *expand("results/figures/validity_{dimension}.png", dimension=DIMENSIONS),
        *expand("results/figures/ratios_{dimension}.png", dimension=DIMENSIONS),
        *expand("results/figures/validity_{dimension}_across.png", dimension=DIMENSIONS),
        *expand("results/figures/means_{dimension}.png", dimension=DIMENSIONS),
        *(["results/replication"] if analysis_settings("replication_export").get(
            "replication_export", True
        ) else []),
    ]


if study_enabled("probing"):
    register_inference_tasks(probing_inference_tasks())
    register_study(
        "probing",
        tables=probing_tables(),
        tasks=probing_task_names(),
        view_settings=analysis_settings(*OUTCOME_SETTINGS),
        outputs=probing_outputs(),
    )
