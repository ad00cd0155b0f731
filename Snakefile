from snakemake.utils import min_version

min_version("9.0")


report: "workflow/report/workflow.rst"


# Shared helpers first (they load config/config.yaml, validate the config and register the
# inference tasks of every study that runs), then each such study's helpers, which register
# its tables and outputs (workflow/rules/<study>/common.smk).
include: "workflow/rules/common.smk"


for study in enabled_studies(STUDIES, config):

    include: study_helpers(study)


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


# Each study's rules: the other rule files of its folder, e.g. the probing study's prompts ->
# analyses -> figures -> replication export, the decision audit's pre-registration lock ->
# prompts -> analyses.
for study in enabled_studies(STUDIES, config):
    for rule_file in study_rule_files(study):

        include: rule_file
