import re
import sys
from collections import Counter
from pathlib import Path

# The workflow runs its library from src/ so that a checkout works without installing it
# (scripts do the same through workflow/scripts/_library.py).
LIBRARY_DIR = str(Path(workflow.basedir) / "src")
if LIBRARY_DIR in sys.path:
    sys.path.remove(LIBRARY_DIR)
sys.path.insert(0, LIBRARY_DIR)

from cueaudit.config import check_config_files, check_input_files, is_complete_config  # noqa: E402
from cueaudit.config import seeds_of, shards_warning, validate_config  # noqa: E402
from cueaudit.cues import REGISTRY as CUE_TYPES  # noqa: E402
from cueaudit.errors import InputError  # noqa: E402
from cueaudit.inference.backends import BACKENDS, inference_jobs  # noqa: E402
from cueaudit.inference.preflight import check_models  # noqa: E402
from cueaudit.slurm import check_slurm  # noqa: E402
from cueaudit.store import database_changed  # noqa: E402
from cueaudit.studies import STUDIES  # noqa: E402
from cueaudit.study import enabled_studies  # noqa: E402


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
    validate_config,
    config,
    Path(workflow.basedir) / "workflow/schemas/config.schema.yaml",
    STUDIES,
)
stop_on_input_error(check_input_files, config, STUDIES)


def study_folder(study):
    return Path(workflow.basedir) / "workflow/rules" / study.name


def study_helpers(study):
    """The study's helpers and registration: workflow/rules/<study>/common.smk."""
    return str(study_folder(study) / "common.smk")


def study_rule_files(study):
    """Every other .smk file of the study's folder, by name (its rules)."""
    return [str(path) for path in sorted(study_folder(study).glob("*.smk")) if path.name != "common.smk"]


# Inference tasks of every study that runs (cueaudit.study.InferenceTasks): the shared
# stages (inference, parsing, database) read only this table, never a study's config block.
INFERENCE_TASKS = {}
# Study -> the names of its inference tasks (its views and parse rates see only those).
STUDY_TASKS = {}
# Study -> {tables: {name: CSV}, view_settings: {...}, outputs: [...]}, registered by the
# study's common.smk: the database loads the tables, `rule all` builds the outputs.
STUDY_PRODUCTS = {}


def register_inference_tasks():
    for study in enabled_studies(STUDIES, config):
        tasks = study.inference_tasks(config)
        clash = sorted(set(tasks) & set(INFERENCE_TASKS))
        if clash:
            raise InputError("config", f"task names used by two studies: {clash}")
        INFERENCE_TASKS.update(tasks)
        STUDY_TASKS[study.name] = list(tasks)


stop_on_input_error(register_inference_tasks)
# Before the first prompt: API keys set (or not needed), local model folders there, option
# scores available where the analyses read them. The endpoints themselves are probed by the
# check_model rule (inference.smk), which needs the network.
stop_on_input_error(check_models, config, INFERENCE_TASKS)
# Through the Slurm executor (a dry run too): the profile's partitions and account exist. Only
# where Snakemake was started (its jobs on the nodes run it again, in another mode).
if not (workflow.remote_exec or workflow.subprocess_exec):
    stop_on_input_error(check_slurm, sys.argv[1:])


def register_study(study, *, tables, view_settings, outputs):
    STUDY_PRODUCTS[study] = {
        "tables": tables,
        "view_settings": view_settings,
        "outputs": list(outputs),
    }


def study_tables():
    return {
        name: path for study in STUDY_PRODUCTS.values() for name, path in study["tables"].items()
    }


def study_views():
    """Study -> its tasks and view settings (what build_database passes to its views)."""
    return {
        name: {"tasks": STUDY_TASKS[name], "view_settings": study["view_settings"]}
        for name, study in STUDY_PRODUCTS.items()
    }


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


def local_weight_models():
    """Models whose weights run here (their inference asks the GPU of a cluster profile)."""
    return [m for m in model_names() if BACKENDS[config["models"][m]["backend"]].local_weights]


def per_seed_models():
    """Local models answered in one job per seed (``inference_jobs: per_seed``, vLLM's
    default): their engine starts once for all their tasks."""
    return [m for m in local_weight_models() if inference_jobs(config["models"][m]) == "per_seed"]


def per_task_models():
    """Local models answered in one job per task and shard."""
    return [m for m in local_weight_models() if m not in per_seed_models()]


def api_models():
    """Models behind an API: their inference waits for the endpoint's probe, asks no GPU."""
    return [m for m in model_names() if m not in local_weight_models()]


def model_task_answers(wildcards):
    """Task -> the outcome, answer settings and token limit of every task ``model`` runs (what
    the endpoint's probe asks in each task's format)."""
    return {
        task: config_slice(INFERENCE_TASKS[task], "outcome", "answer", "max_new_tokens")
        for task in task_names()
        if wildcards.model in task_models(task)
    }


#: Model keys that say which jobs run, not how a prompt is answered: not in a job's params
#: (a new seed must not rerun the others' jobs).
JOB_KEYS = frozenset({"seeds", "inference_jobs"})


def model_spec(wildcards):
    """A model's settings without the keys that only cut its jobs (JOB_KEYS)."""
    return {k: v for k, v in config["models"][wildcards.model].items() if k not in JOB_KEYS}


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


def seed_tasks(wildcards):
    """The tasks a model x seed runs, in the order of task_names()."""
    return [t for m, s, t in model_seed_tasks() if (m, str(s)) == (wildcards.model, wildcards.seed)]


def seed_prompt_tables(wildcards):
    return all_prompt_tables(seed_tasks(wildcards))


def seed_task_requirements(wildcards):
    """task_requirements of every task of the model x seed."""
    return [
        ancient(path)
        for task in seed_tasks(wildcards)
        for path in INFERENCE_TASKS[task].get("requires", [])
    ]


def seed_task_settings(wildcards):
    """Task -> what its jobs would read (prompts, shards, token limit, outcome, answer)."""
    return {
        task: {"prompts": f"results/prompts/{task}.parquet"}
        | config_slice(INFERENCE_TASKS[task], "shards", "max_new_tokens", "outcome", "answer")
        for task in seed_tasks(wildcards)
    }


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


def warn_of_many_shards():
    shards = Counter()
    for _, _, task in model_seed_tasks():
        shards[task] += INFERENCE_TASKS[task]["shards"]
    keys = {task: spec.get("shards_key", "shards") for task, spec in INFERENCE_TASKS.items()}
    warning = shards_warning(shards, keys)
    if warning:
        print(f"Warning: {warning}", file=sys.stderr)


if not (workflow.remote_exec or workflow.subprocess_exec):
    warn_of_many_shards()


def task_outcome_kinds(tasks=None):
    return {task: INFERENCE_TASKS[task]["outcome"] for task in tasks or task_names()}


def any_of(values):
    """A regex matching exactly one of ``values`` (wildcard constraints); none: nothing."""
    return "|".join(map(re.escape, values)) if values else "(?!)"


# Shared cue resources: the cue types of the registry (cueaudit.cues.REGISTRY), each on when
# its block is under cues:, and the helpers of the rules that prepare name lists, explicit
# descriptors and dialog-history clusters.


def cue_settings(config_key):
    """The block ``cues.<config_key>`` ({} when that cue is off)."""
    return config["cues"].get(config_key) or {}


def prepared_cue_types():
    """(cue type, its prepared resource files) of every cue that is on, in registry order."""
    blocks = config["cues"]
    on = [t for t in CUE_TYPES if blocks.get(t.config_key) is not None]
    return [(t, files) for t in on if (files := list(t.resource_files(blocks[t.config_key])))]


def cue_resource_files():
    """Config key -> the prepared resource files of every cue that is on: what a prompt
    table's expansion reads."""
    return {cue_type.config_key: files for cue_type, files in prepared_cue_types()}


def cue_load_settings():
    """Config key -> the keys of its block that loading its resource reads (load_keys), so
    that changing another key reruns no expansion."""
    return {
        t.config_key: config_slice(cue_settings(t.config_key), *t.load_keys)
        for t, _ in prepared_cue_types()
    }


def names_settings():
    return cue_settings("names")


def name_list_files():
    return names_settings().get("lists", {})


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


def dialect_config():
    return config["cues"].get("dialect")


def dialog_source_paths(wildcards):
    return dict(cue_settings("dialog")[wildcards.source])


def dialog_source_files(wildcards):
    return list(dialog_source_paths(wildcards).values())


def dialog_settings():
    return config_slice(cue_settings("dialog"), "n_clusters", "seed")


DATABASE = "results/cueaudit.duckdb"


def study_outputs():
    """The default target: every registered study's outputs and the shared database (a
    study's own target, `snakemake <study>`, builds only its outputs)."""
    return [path for study in STUDY_PRODUCTS.values() for path in study["outputs"]] + [DATABASE]


def database_inputs():
    return {
        "prompts": all_prompt_tables(),
        "responses": all_response_shards(),
        "outcomes": all_outcome_tables(),
        "tables": list(study_tables().values()),
        "models": expand("results/models/{model}", model=model_names()),
    }
