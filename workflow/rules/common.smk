import re
import sys
from pathlib import Path

# The workflow runs its library from src/ so that a checkout works without installing it
# (scripts do the same through workflow/scripts/_library.py).
LIBRARY_DIR = str(Path(workflow.basedir) / "src")
if LIBRARY_DIR in sys.path:
    sys.path.remove(LIBRARY_DIR)
sys.path.insert(0, LIBRARY_DIR)

from cueaudit.config import check_config_files, check_input_files, is_complete_config  # noqa: E402
from cueaudit.config import seeds_of, validate_config  # noqa: E402
from cueaudit.cues import REGISTRY as CUE_TYPES  # noqa: E402
from cueaudit.errors import InputError  # noqa: E402


def stop_on_input_error(check, *args):
    """Run a config check; a bad input stops Snakemake with the message alone (Snakemake
    would print the Python frames that raised it after the message)."""
    try:
        check(*args)
    except InputError as error:
        sys.exit(f"Error: {error}")


# Snakemake's own YAML loader reports a syntax error without its line and lets a key given
# twice win silently, so the config files are read strictly before it loads them. (A
# --configfile it cannot parse at all stops Snakemake before this point.)
CONFIGFILE = "config/config.yaml"
stop_on_input_error(check_config_files, [CONFIGFILE, *workflow.overwrite_configfiles])


# A --configfile with cues, models and seeds (config/paper.yaml) is a study of its own and
# replaces config/config.yaml; one without them overrides the default's keys.
if not any(map(is_complete_config, workflow.overwrite_configfiles)):

    configfile: CONFIGFILE


# Nothing below may read the config before it is validated: a missing key stops the run
# here with its name instead of failing later as a bare KeyError.
stop_on_input_error(
    validate_config, config, Path(workflow.basedir) / "workflow/schemas/config.schema.yaml"
)
stop_on_input_error(check_input_files, config)

# Inference tasks of every study that runs: task -> {outcome, answer, max_new_tokens, shards,
# and optionally requires: files that must exist before the task's first inference job;
# models: the configured models that run it, when not all of them; seeds: the only seeds of
# those models it runs}.
# Each study's common.smk registers its own; the shared stages (inference, parsing, database)
# read only this table, never a study's config block.
INFERENCE_TASKS = {}
# Studies that run: study -> {tables: {name: CSV}, tasks: [...], view_settings: {...},
# outputs: [...]}. The database loads their tables and registers their views
# (cueaudit.<study>.views); `rule all` builds their outputs.
STUDIES = {}


def study_enabled(study):
    """A study runs when its block is in the config."""
    return study in config


def register_inference_tasks(tasks):
    clash = sorted(set(tasks) & set(INFERENCE_TASKS))
    if clash:
        raise ValueError(f"task names used by two studies: {clash}")
    INFERENCE_TASKS.update(tasks)


def register_study(study, *, tables, tasks, view_settings, outputs):
    STUDIES[study] = {
        "tables": tables,
        "tasks": list(tasks),
        "view_settings": view_settings,
        "outputs": list(outputs),
    }


def study_tables():
    return {name: path for study in STUDIES.values() for name, path in study["tables"].items()}


def study_views():
    return {name: config_slice(study, "tasks", "view_settings") for name, study in STUDIES.items()}


def config_slice(block, *keys):
    """Only ``keys`` of a config block, so that a rule's params change only when they do."""
    return {key: block[key] for key in keys if key in block}


def task_names():
    return list(INFERENCE_TASKS)


def model_names():
    return list(config["models"])


def model_seeds(model):
    """The seeds ``model`` runs: its own ``models.<model>.seeds``, else the top-level ``seeds``
    (the single source of every model x seed expansion)."""
    return seeds_of(config, model)


def model_seed_pairs(models=None):
    """(model, seed) of every run of ``models`` (default: all configured models)."""
    return [(model, seed) for model in models or model_names() for seed in model_seeds(model)]


def task_models(task):
    """The models that run ``task``: all configured ones unless the task names a subset."""
    return INFERENCE_TASKS[task].get("models") or model_names()


def task_model_seeds(task):
    """(model, seed) of every run of ``task``: its models' seeds, restricted to the task's
    own ``seeds`` when it names some."""
    only = INFERENCE_TASKS[task].get("seeds")
    return [
        (model, seed)
        for model, seed in model_seed_pairs(task_models(task))
        if only is None or seed in only
    ]


def model_spec(wildcards):
    """A model's settings without its seeds (a new seed must not rerun the others' jobs)."""
    return {k: v for k, v in config["models"][wildcards.model].items() if k != "seeds"}


def inference_task(wildcards):
    return INFERENCE_TASKS[wildcards.task]


def task_max_new_tokens(wildcards):
    return inference_task(wildcards)["max_new_tokens"]


def task_shards(wildcards):
    return inference_task(wildcards)["shards"]


def task_outcome(wildcards):
    return inference_task(wildcards)["outcome"]


def task_answer(wildcards):
    return inference_task(wildcards)["answer"]


def task_requirements(wildcards):
    """Files that must exist before the task's jobs run (ancient: a newer one reruns nothing)."""
    return [ancient(path) for path in inference_task(wildcards).get("requires", [])]


def shard_ids(task):
    return range(INFERENCE_TASKS[task]["shards"])


def response_shards(wildcards):
    return expand(
        "results/responses/{model}/seed{seed}/{task}/{shard}.parquet",
        model=wildcards.model,
        seed=wildcards.seed,
        task=wildcards.task,
        shard=shard_ids(wildcards.task),
    )


def all_prompt_tables(tasks=None):
    return expand("results/prompts/{task}.parquet", task=tasks or task_names())


def model_seed_tasks(tasks=None):
    """(model, seed, task) of every inference run of ``tasks`` (default: all tasks)."""
    runs = {task: set(task_model_seeds(task)) for task in tasks or task_names()}
    return [
        (model, seed, task)
        for model, seed in model_seed_pairs()
        for task, pairs in runs.items()
        if (model, seed) in pairs
    ]


def all_response_shards(tasks=None):
    return [
        f"results/responses/{model}/seed{seed}/{task}/{shard}.parquet"
        for model, seed, task in model_seed_tasks(tasks)
        for shard in shard_ids(task)
    ]


def all_outcome_tables(tasks=None):
    return [
        f"results/outcomes/{model}/seed{seed}/{task}.parquet"
        for model, seed, task in model_seed_tasks(tasks)
    ]


def task_outcome_kinds(tasks=None):
    return {task: INFERENCE_TASKS[task]["outcome"] for task in tasks or task_names()}


def any_of(values):
    """A regex matching exactly one of ``values`` (wildcard constraints)."""
    return "|".join(map(re.escape, values))


# Shared cue resources: name lists, explicit descriptors, dialog-history clusters.


def names_settings():
    return config["cues"].get("names") or {}


def name_list_files():
    return names_settings().get("lists", {})


def names_config():
    return {key: value for key, value in names_settings().items() if key != "lists"}


def use_derived_names():
    return names_settings().get("use") == "derived"


def name_derivation_config():
    return names_settings().get("derive") or {}


def name_derivation_files():
    """Source files named by path in cues.names.derive (packaged copies have no input)."""
    spec = name_derivation_config()
    return [
        spec[source]["path"]
        for source in ("ssa", *CUE_TYPES["name"].sources)
        if source in spec and spec[source].get("path")
    ]


def prepare_names_inputs():
    if use_derived_names():
        return {"derived": "results/resources/names_derived.parquet"}
    return {"lists": list(name_list_files().values())}


def explicit_categories():
    explicit = config["cues"].get("explicit")
    return explicit["categories"] if explicit else []


def dialect_config():
    return config["cues"].get("dialect")


def dialect_enabled():
    return dialect_config() is not None


def dialog_config():
    return config["cues"].get("dialog") or {}


def dialog_sources():
    return [source for source in CUE_TYPES["dialog"].sources if source in dialog_config()]


def dialog_source_paths(wildcards):
    return dict(dialog_config()[wildcards.source])


def dialog_source_files(wildcards):
    return list(dialog_source_paths(wildcards).values())


def dialog_settings():
    return config_slice(dialog_config(), "n_clusters", "seed")


DATABASE = "results/cueaudit.duckdb"


def study_outputs():
    """The default target: every registered study's outputs and the shared database (a
    study's own target, e.g. `snakemake decision`, builds only its outputs)."""
    return [path for study in STUDIES.values() for path in study["outputs"]] + [DATABASE]


def database_inputs():
    return {
        "prompts": all_prompt_tables(),
        "responses": all_response_shards(),
        "outcomes": all_outcome_tables(),
        "tables": list(study_tables().values()),
        "models": expand("results/models/{model}", model=model_names()),
    }
