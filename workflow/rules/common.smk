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
        **{f"means_{d}": f"results/tables/means_{d}.csv" for d in DIMENSIONS},
        "sample_sizes": "results/tables/sample_sizes.csv",
        "race_prediction": "results/tables/race_prediction.csv",
        "readability": "results/tables/readability.csv",
        "regressions": "results/tables/regressions.csv",
    }


def final_outputs():
    return [
        "results/cueaudit.duckdb",
        *expand("results/figures/validity_{dimension}.png", dimension=DIMENSIONS),
        *expand("results/figures/ratios_{dimension}.png", dimension=DIMENSIONS),
        *expand("results/figures/validity_{dimension}_across.png", dimension=DIMENSIONS),
        *expand("results/figures/means_{dimension}.png", dimension=DIMENSIONS),
        *(
            ["results/replication"]
            if config.get("analysis", {}).get("replication_export", True)
            else []
        ),
    ]


# Cue-resource inputs: name derivation, AAVE translation, dialog clusters, race prediction.

def names_settings():
    return config.get("cues", {}).get("names") or {}


def use_derived_names():
    return names_settings().get("use") == "derived"


def name_derivation_config():
    return names_settings().get("derive") or {}


def name_derivation_files():
    """Source files named by path in cues.names.derive (packaged copies have no input)."""
    spec = name_derivation_config()
    return [
        spec[source]["path"]
        for source in ("ssa", "rosenman", "tzioumis", "elder_hayes")
        if source in spec and spec[source].get("path")
    ]


def prepare_names_inputs():
    if use_derived_names():
        return {"derived": "results/resources/names_derived.parquet"}
    return {"lists": list(name_list_files().values())}


def dialect_config():
    return config.get("cues", {}).get("dialect")


def dialect_enabled():
    return dialect_config() is not None


def dialect_task_inputs():
    """task -> [base-prompt CSV, limit] for every advice task (translated once each)."""
    return {
        task: [spec["base_prompts"], spec.get("limit")] for task, spec in config["tasks"].items()
    }


def dialect_base_prompt_files():
    return [spec["base_prompts"] for spec in config["tasks"].values()]


def dialog_config():
    return config.get("cues", {}).get("dialog") or {}


def dialog_sources():
    return [source for source in ("cad", "prism") if source in dialog_config()]


def dialog_source_paths(wildcards):
    return dict(dialog_config()[wildcards.source])


def dialog_source_files(wildcards):
    return list(dialog_source_paths(wildcards).values())


def dialog_settings():
    return {key: dialog_config().get(key) for key in ("n_clusters", "seed")}


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
    tasks = config["race_prediction"]["tasks"] or list(config["tasks"])
    return expand("results/prompts/{task}.parquet", task=tasks)


def advice_task_pattern():
    return "|".join(map(re.escape, config["tasks"]))
