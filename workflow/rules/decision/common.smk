# The decision audit's helpers and its registration with the shared stages: its tasks become
# inference tasks (each waiting for the pre-registration lock), its tables go into the database.

from cueaudit.decision import study as decision_study  # noqa: E402
from cueaudit.decision.tasks import PRIMARY  # noqa: E402
from cueaudit.decision.design_settings import expected_counts, tier_summary  # noqa: E402
from cueaudit.decision.design_settings import expected_counts_by_cue  # noqa: E402
from cueaudit.decision.build import design_tier_counts  # noqa: E402
from cueaudit.decision.study import PREREGISTRATION_CHECK, REGISTERED_FILES  # noqa: E402
from cueaudit.decision.preregistration import renew_check, stale_check  # noqa: E402
from cueaudit.decision.analysis.planner import PLAN_TABLES  # noqa: E402
from cueaudit.decision.analysis.registry import ANALYSES as DECISION_ANALYSES  # noqa: E402
from cueaudit.decision.analysis.registry import FIGURES as DECISION_FIGURES  # noqa: E402

# Written once by freeze_preregistration and never a rule output (Snakemake deletes a job's
# outputs before it reruns it); the check beside it (PREREGISTRATION_CHECK) is what the rules
# depend on.
PREREGISTRATION_LOCK = "results/decision/preregistration.lock"
DECISION_ANSWERS = {}  # filled on first use by decision_answers()
# A design larger than this builds gigabytes of prompt tables: it runs only once its size is
# confirmed (decision.expected_requests)
UNCONFIRMED_REQUESTS = 1_000_000

# The top-up arms a pre-registered sequential plan names, read (and checked) once: one whose
# arm adds nothing to a cell it names stops here, with its message alone, before any design
# is printed or any job runs.
SEQUENTIAL_ARMS = {}
stop_on_input_error(lambda: SEQUENTIAL_ARMS.update(decision_study.sequential_arms(config)))

# A lock edited or removed after its check was written: the check is renewed, so every
# analysis that reads the pre-registration relabels its tables in this run (a missing check
# would not rerun them: Snakemake reruns a job for a newer input, not for a missing one).
if not (workflow.remote_exec or workflow.subprocess_exec):
    STALE_CHECK = stale_check(PREREGISTRATION_CHECK, PREREGISTRATION_LOCK)
    if STALE_CHECK:
        renew_check(PREREGISTRATION_CHECK, PREREGISTRATION_LOCK)
        print(f"Note: {STALE_CHECK}: the analyses read it again in this run", file=sys.stderr)


def decision_config():
    return config["decision"]


def decision_design():
    return decision_config()["design"]


def decision_extensions():
    return decision_config().get("extensions", {})


def decision_arms():
    """Arm -> design (cueaudit.decision.study.arms)."""
    return decision_study.arms(config)


def decision_pooled_extensions():
    """Extensions analysed together with the primary rows (`pool_with_primary: true`)."""
    return [arm for arm, block in decision_extensions().items() if block.get("pool_with_primary")]


def decision_prompt_resources():
    return decision_study.prompt_resources(config)


def decision_fairfund_stimuli():
    """FairFund-Bench's stimuli.csv when an arm runs the aid domain (else none)."""
    return decision_study.fairfund_stimuli(config)


def decision_fairfund_published():
    """FairFund-Bench's published contrasts when an arm runs the aid domain (else none)."""
    return decision_study.fairfund_published(config)


def decision_cue_settings():
    """The first-name list and dialect translator of the cue types beyond name pairs, each
    only when an arm lists its cue type (cueaudit.decision.study.cue_settings)."""
    return decision_study.cue_settings(config)


def decision_first_names():
    """The first_name cue's list when an arm lists the cue (else none)."""
    settings = decision_cue_settings()
    return [settings["first_names"]] if "first_names" in settings else []


def decision_arm_models(arm):
    return decision_study.arm_models(config, arm)


def decision_registered_files():
    """Role -> path of every stimulus file the pre-registration lock binds."""
    files = {role: decision_config()[role] for role in REGISTERED_FILES}
    return files | {"prompts": decision_design()["prompts"]}


def decision_registered_design():
    """The settings of the pre-registered arm that change its prompts or its planned family:
    the design, its models and seeds, the profile reading, the points scale and the
    composition level (extensions are never pre-registered)."""
    models = decision_arm_models(PRIMARY)
    analysis = decision_config().get("analysis", {})
    return {
        "design": decision_design(),
        "models": models,
        "seeds": {model: [s for _, s in model_seed_pairs([model])] for model in models},
        **config_slice(
            decision_config(), "profiles_format", "strip_suffixes", "audit_cues", "allowed_phrases"
        ),
        "analysis": config_slice(analysis, "rank_points", "composition_alpha"),
        **decision_sequential_arms(),
    }


def decision_sequential_arms():
    """The top-up arms a pre-registered sequential plan names (SEQUENTIAL_ARMS), bound by the
    lock like the primary design (nothing when the pre-registration has no plan)."""
    return {"sequential_arms": SEQUENTIAL_ARMS} if SEQUENTIAL_ARMS else {}


def decision_answer_folders():
    """Where decision answers of the pre-registered arm would already be: response shards and
    cached answers of each model, seed and task."""
    tasks = [t for t, (_, _, arm) in decision_answers().items() if arm == PRIMARY]
    runs = model_seed_pairs(decision_arm_models(PRIMARY))
    return [
        f"{root}/{model}/seed{seed}/{task}"
        for root in ("results/responses", "results/cache/responses")
        for model, seed in runs
        for task in tasks
    ]


def decision_answers():
    """Each arm task's outcome kind, answer settings and arm, read once from the prompt
    resources."""
    if not DECISION_ANSWERS:
        DECISION_ANSWERS.update(decision_study.answers(config))
    return DECISION_ANSWERS


def decision_task_names():
    return STUDY_TASKS["decision"]


def decision_prompt_tables():
    return all_prompt_tables(decision_task_names())


DECISION_FRAMES = {
    name: f"results/decision/frames/{name}.parquet"
    for name in ("judgements", "rankings", "probes")
}
# Tables by the analysis that writes them (cueaudit.decision.analysis.registry), and the
# planner's; each is loaded into the database as decision_<table>.
DECISION_TABLES = {name: list(row.tables) for name, row in DECISION_ANALYSES.items()}
DECISION_TABLES["plan"] = list(PLAN_TABLES)
REPORT_DIR = Path(workflow.basedir) / "workflow/report"


def decision_report(path, caption):
    """``path`` in the report's decision category, with its caption where workflow/report/
    has the file ``caption``."""
    if (REPORT_DIR / caption).is_file():
        return report(path, caption=f"../../report/{caption}", category="Decision audit")
    return report(path, category="Decision audit")


def decision_tables(rule_name):
    return {name: f"results/tables/decision_{name}.csv" for name in DECISION_TABLES[rule_name]}


def decision_table_outputs(rule_name):
    """A rule's CSV tables (for the report, with their captions where workflow/report/ has
    one) and the Markdown copy written beside each (``<name>_md``), so that a failed job
    leaves neither behind."""
    outputs = {}
    for name, path in decision_tables(rule_name).items():
        outputs[name] = decision_report(path, f"decision_{name}.rst")
        outputs[f"{name}_md"] = path.removesuffix(".csv") + ".md"
    return outputs


def decision_all_tables():
    return {
        f"decision_{name}": path
        for rule_name in DECISION_TABLES
        for name, path in decision_tables(rule_name).items()
    }


def decision_figure_outputs(figure):
    """A figure's PNG (for the report, with its caption where workflow/report/ has one) and
    its PDF where it has one."""
    png = f"results/figures/decision_{figure.name}.png"
    outputs = {"png": decision_report(png, f"decision_{figure.name}_figure.rst")}
    if figure.pdf:
        outputs["pdf"] = png.removesuffix(".png") + ".pdf"
    return outputs


def decision_figures():
    return {name: f"results/figures/decision_{name}.png" for name in DECISION_FIGURES}


# What an analysis row may read by name besides the frames and other analyses' tables
# (cueaudit.decision.analysis.registry.WORKFLOW_INPUTS), and the values it may take besides
# paths of the decision block (DERIVED_PARAMS).
DECISION_INPUTS = {
    "preregistration": lambda: config["decision"]["preregistration"],
    "registration": lambda: [PREREGISTRATION_CHECK, *decision_registered_files().values()],
    "outcomes": lambda: all_outcome_tables(decision_task_names()),
    "prompts": lambda: decision_prompt_tables(),
    "published": lambda: decision_fairfund_published(),
    "design_prompts": lambda: decision_design()["prompts"],
}
DECISION_PARAMS = {
    "tasks": lambda: decision_task_names(),
    "confounded_arms": lambda: decision_confounded_arms(),
    "pooled_extensions": lambda: decision_pooled_extensions(),
    "name_assignments": lambda: decision_name_assignments(),
    "paired_arms": lambda: decision_paired_arms(),
}


def decision_analysis_inputs(analysis):
    """The inputs of an analysis row's rule, by name. A row that reads the pre-registration
    also waits for the lock's check: the check is rewritten when the pre-registration, a
    stimulus file or the design changes, so the tables are relabelled in that same run (a
    newer pre-registration alone is missed while a job upstream reruns)."""
    inputs = {}
    if {"preregistration", "registration"} & set(analysis.inputs):
        inputs["preregistration_check"] = PREREGISTRATION_CHECK
    for name in analysis.inputs:
        if name == "frames":
            inputs |= DECISION_FRAMES
        elif name in DECISION_INPUTS:
            inputs[name] = DECISION_INPUTS[name]()
        else:
            inputs[name] = f"results/tables/decision_{name}.csv"
    return inputs


def decision_config_value(path):
    """The value at a dotted path of the decision block (defaults filled by the schema)."""
    value = decision_config()
    for key in path.split("."):
        value = value[key]
    return value


def decision_analysis_params(analysis):
    """The params of an analysis row's rule: its name, each config value under its last
    path part, each derived value, and what the lock binds when it reads the registration."""
    params = {"analysis": analysis.name}
    for param in analysis.params:
        name = param.rsplit(".", 1)[-1]
        params[name] = DECISION_PARAMS[param]() if param in DECISION_PARAMS else (
            decision_config_value(param)
        )
    if "registration" in analysis.inputs:
        params["registration"] = {
            "lock": PREREGISTRATION_LOCK,
            "files": decision_registered_files(),
            "design": decision_registered_design(),
        }
    return params


def decision_max_new_tokens():
    return {task: INFERENCE_TASKS[task]["max_new_tokens"] for task in decision_task_names()}


def decision_plan_config():
    """What the planner simulates and prices: the seeds, the decision block's design,
    extensions, resources and plan settings, and the models' seeds, prices and throughput."""
    block = config_slice(
        decision_config(),
        "design", "extensions", "models", "profiles", "profiles_format", "strip_suffixes",
        "name_pairs", "hobbies", "neighbourhoods", "fairfund_stimuli", "plan",
    ) | decision_cue_settings()
    models = {
        name: config_slice(spec, "seeds", "pricing", "throughput")
        for name, spec in config["models"].items()
    }
    return {"seeds": config["seeds"], "models": models, "decision": block}


def decision_analysis_settings():
    return decision_config()["analysis"]


def decision_name_assignments():
    """Arm -> its Rate / Decide name assignment (crossed, or fixed_per_profile)."""
    return decision_study.name_assignments(config)


def decision_confounded_arms():
    """Arms confounded by construction: their composition failures are reported, not stops."""
    return [arm for arm, how in decision_name_assignments().items() if how != "crossed"]


def decision_paired_arms():
    """Extension arm -> the pre-registered arm's model it reruns (`paired_with`)."""
    return decision_study.paired_arms(config)


def decision_outputs():
    return [*decision_all_tables().values(), *decision_figures().values()]


def decision_request_count():
    """The design's size per arm and in total; stops the workflow when the config's
    `expected_requests` says otherwise."""
    lines, total = [], 0
    profiles = decision_config()["profiles"]
    tiers = design_tier_counts(
        profiles_path=profiles,
        profiles_format=decision_config()["profiles_format"],
        strip_suffixes=decision_config()["strip_suffixes"],
        name_pairs_path=decision_config()["name_pairs"],
        designs=decision_arms(),
        fairfund_stimuli_path=decision_config().get("fairfund_stimuli"),
    )
    for arm, design in decision_arms().items():
        counts = expected_counts(design, tiers, profiles_file=profiles)
        per_run = sum(counts.values())
        runs = len(model_seed_pairs(decision_arm_models(arm)))
        listed = ", ".join(f"{task} {n}" for task, n in counts.items())
        name = "decision audit" if arm == PRIMARY else f"decision extension {arm}"
        lines.append(
            f"{name}: {per_run} prompts per model x seed ({listed}); "
            f"{runs} model x seed runs: {per_run * runs} requests"
        )
        by_cue = expected_counts_by_cue(design, tiers, profiles_file=profiles)
        if list(by_cue) != ["name_pair"]:
            cues = ", ".join(f"{cue} {sum(n.values())}" for cue, n in by_cue.items())
            lines.append(f"{name}: prompts per model x seed by cue type: {cues}")
        lines.append(f"{name}: {tier_summary(design, tiers)}")
        total += per_run * runs
    lines.append(f"decision audit in total: {total} requests")
    expected = decision_config().get("expected_requests")
    if expected is not None and expected != total:
        raise ValueError(
            "\n".join(lines)
            + f"\nconfig key decision.expected_requests: {expected}, but the design has {total}"
        )
    if expected is None and total > UNCONFIRMED_REQUESTS:
        raise ValueError(
            "\n".join(lines)
            + f"\nconfig key decision.expected_requests: the design has {total:,} requests, "
            f"more than {UNCONFIRMED_REQUESTS:,}; confirm its size with expected_requests: "
            f"{total} before anything is built"
        )
    return "\n".join(lines)


# The Snakefile includes this file only when the study runs (its block is in the config).
register_study(
    "decision",
    tables=decision_all_tables(),
    view_settings={},
    outputs=decision_outputs(),
)
# The design's size, printed before anything runs (also on a dry run).
print(decision_request_count(), file=sys.stderr)
