import re
import sys
from pathlib import Path

# The workflow runs its library from src/ so that a checkout works without installing it
# (scripts do the same through workflow/scripts/_library.py).
LIBRARY_DIR = str(Path(workflow.basedir) / "src")
if LIBRARY_DIR in sys.path:
    sys.path.remove(LIBRARY_DIR)
sys.path.insert(0, LIBRARY_DIR)

from cueaudit.config import check_input_files, validate_config  # noqa: E402

DIMENSIONS = ["race", "gender"]


def validate_study_config(config):
    """Stop before any job if the config breaks its schema or names missing files."""
    validate_config(config, Path(workflow.basedir) / "workflow/schemas/config.schema.yaml")
    check_input_files(config)


RACE_PREDICTION = "race_prediction"


def race_prediction_enabled():
    return bool(config.get("race_prediction", {}).get("enabled"))


def task_names():
    """Advice tasks, then the derived race-prediction task when it is enabled."""
    return list(config["tasks"]) + ([RACE_PREDICTION] if race_prediction_enabled() else [])


def task_config(task):
    if task == RACE_PREDICTION:
        spec = config["race_prediction"]
        return {
            "outcome": "race",
            "max_new_tokens": spec["max_new_tokens"],
            "shards": spec["shards"],
            "limit": None,
        }
    return config["tasks"][task]


def model_names():
    return list(config["models"])


def shard_ids(task):
    return range(task_config(task)["shards"])


wildcard_constraints:
    task="|".join(map(re.escape, task_names())),
    model="|".join(map(re.escape, config["models"])),
    seed=r"\d+",
    shard=r"\d+",
    dimension="|".join(DIMENSIONS),


def task_spec(wildcards):
    return task_config(wildcards.task)


def task_base_prompts(wildcards):
    return task_spec(wildcards)["base_prompts"]


def task_limit(wildcards):
    return task_spec(wildcards)["limit"]


def task_max_new_tokens(wildcards):
    return task_spec(wildcards)["max_new_tokens"]


def task_shards(wildcards):
    return task_spec(wildcards)["shards"]


def task_outcome(wildcards):
    return task_spec(wildcards)["outcome"]


def model_spec(wildcards):
    return config["models"][wildcards.model]


def name_list_files():
    names = config.get("cues", {}).get("names")
    return names["lists"] if names else {}


def names_config():
    names = config.get("cues", {}).get("names") or {}
    return {key: value for key, value in names.items() if key != "lists"}


def explicit_categories():
    explicit = config.get("cues", {}).get("explicit")
    return explicit["categories"] if explicit else []


def response_shards(wildcards):
    return expand(
        "results/responses/{model}/seed{seed}/{task}/{shard}.parquet",
        model=wildcards.model,
        seed=wildcards.seed,
        task=wildcards.task,
        shard=shard_ids(wildcards.task),
    )


def all_prompt_tables():
    return expand("results/prompts/{task}.parquet", task=task_names())


def all_response_shards():
    return [
        path
        for model in model_names()
        for seed in config["seeds"]
        for task in task_names()
        for path in expand(
            "results/responses/{model}/seed{seed}/{task}/{shard}.parquet",
            model=model,
            seed=seed,
            task=task,
            shard=shard_ids(task),
        )
    ]


def all_outcome_tables():
    return expand(
        "results/outcomes/{model}/seed{seed}/{task}.parquet",
        model=model_names(),
        seed=config["seeds"],
        task=task_names(),
    )


def task_outcome_kinds():
    return {task: task_config(task)["outcome"] for task in task_names()}


def analysis_settings():
    return config["analysis"]


def analysis_tables():
    return {
        "parse_rates": "results/tables/parse_rates.csv",
        **{f"validity_{d}": f"results/tables/validity_{d}.csv" for d in DIMENSIONS},
        **{
            f"validity_{d}_averaged": f"results/tables/validity_{d}_averaged.csv"
            for d in DIMENSIONS
        },
        **{f"ratios_{d}": f"results/tables/ratios_{d}.csv" for d in DIMENSIONS},
    }


def final_outputs():
    return [
        "results/cueaudit.duckdb",
        *expand("results/figures/validity_{dimension}.png", dimension=DIMENSIONS),
        *expand("results/figures/ratios_{dimension}.png", dimension=DIMENSIONS),
    ]
