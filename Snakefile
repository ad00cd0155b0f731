from snakemake.utils import min_version

min_version("9.0")


report: "workflow/report/workflow.rst"


# Shared helpers first (they load config/config.yaml and validate the config), then each
# study in the config registers its inference tasks and tables with the shared stages.
include: "workflow/rules/common.smk"
include: "workflow/rules/probing/common.smk"
include: "workflow/rules/decision/common.smk"


# Cheap jobs that run on the submitting node instead of going through the scheduler.
localrules:
    all,
    prepare_names,
    build_explicit_descriptors,


rule all:
    default_target: True
    input:
        study_outputs(),


# Shared stages: cue resources -> models -> inference -> parsing -> database.
include: "workflow/rules/cues.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/inference.smk"
include: "workflow/rules/parsing.smk"
include: "workflow/rules/database.smk"


# The probing study: prompts -> analyses -> figures, and the replication export.
if study_enabled("probing"):

    include: "workflow/rules/probing/prompts.smk"
    include: "workflow/rules/probing/analysis.smk"
    include: "workflow/rules/probing/figures.smk"
    include: "workflow/rules/probing/export.smk"


# The decision audit: pre-registration lock -> prompts -> outcome summary.
if study_enabled("decision"):

    include: "workflow/rules/decision/prompts.smk"
    include: "workflow/rules/decision/analysis.smk"
