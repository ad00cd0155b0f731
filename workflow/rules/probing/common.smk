# The probing study's helpers and its registration with the shared stages: its advice tasks
# (and the race-prediction task) become inference tasks, its tables go into the database.

from cueaudit.probing.design import probing_size  # noqa: E402
from cueaudit.probing.study import regression_seeds  # noqa: E402

DIMENSIONS = ["race", "gender"]
# Settings every probing analysis reads (which outcome of yes/no tasks it analyses), and
# those only the bootstrapped tables read.
OUTCOME_SETTINGS = ("binary_outcome",)
BOOTSTRAP_SETTINGS = ("bootstrap_replicates", "ci_level", "bootstrap_seed")


def probing_config():
    return config["probing"]


def advice_tasks():
    return probing_config()["tasks"]


def race_prediction_settings():
    return probing_config().get("race_prediction") or {}


def probing_task_names():
    return STUDY_TASKS["probing"]


def advice_any_of():
    return any_of(advice_tasks())


def advice_task_spec(wildcards):
    return advice_tasks()[wildcards.task]


def base_prompt_file(task):
    """A task's base-prompt CSV: its ``base_prompts``, or for a task with ``augment`` the
    file the augment_base_prompts rule writes."""
    spec = advice_tasks()[task]
    if "augment" in spec:
        return f"results/prompts/base/{task}.csv"
    return spec["base_prompts"]


def augmented_tasks():
    return [task for task, spec in advice_tasks().items() if "augment" in spec]


def task_base_prompts(wildcards):
    return base_prompt_file(wildcards.task)


def augment_inputs(wildcards):
    """The templates and component files of an augmented task (keys: templates,
    component_<name>)."""
    spec = advice_task_spec(wildcards)["augment"]
    return {
        "templates": spec["templates"],
        **{f"component_{name}": path for name, path in spec["components"].items()},
    }


def augment_settings(wildcards):
    spec = advice_task_spec(wildcards)["augment"]
    return {"components": list(spec["components"]), "total": spec["total"], "seed": spec["seed"]}


def task_limit(wildcards):
    return advice_task_spec(wildcards)["limit"]


def analysis_settings(*keys):
    return config_slice(probing_config().get("analysis") or {}, *keys)


def regression_settings():
    """Tables 5-7 read one response per prompt: model -> the seed whose responses and race
    predictions enter them (cueaudit.probing.study.regression_seeds)."""
    return {**analysis_settings(*OUTCOME_SETTINGS), "regression_seeds": regression_seeds(config)}


def probing_prompt_tables():
    return all_prompt_tables(probing_task_names())


def probing_outcome_tables():
    return all_outcome_tables(probing_task_names())


def probing_outcome_kinds():
    return task_outcome_kinds(probing_task_names())


def dialect_task_inputs():
    """task -> [base-prompt CSV, limit] for every advice task (translated once each)."""
    return {
        task: [base_prompt_file(task), spec.get("limit")] for task, spec in advice_tasks().items()
    }


def dialect_base_prompt_files():
    return [base_prompt_file(task) for task in advice_tasks()]


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
        *(["results/replication"] if probing_config()["analysis"]["replication_export"] else []),
    ]


# The Snakefile includes this file only when the study runs (its block is in the config).
# The design's size, printed before anything runs (also on a dry run); a wrong
# probing.expected_prompts stops the run here.
stop_on_input_error(lambda: print(probing_size(config), file=sys.stderr))
register_study(
    "probing",
    tables=probing_tables(),
    view_settings=analysis_settings(*OUTCOME_SETTINGS),
    outputs=probing_outputs(),
)
