from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"


validate_study_config(config)


include: "workflow/rules/resources.smk"
include: "workflow/rules/cues.smk"
include: "workflow/rules/prompts.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/inference.smk"
include: "workflow/rules/parsing.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/export.smk"


# Cheap jobs that run on the submitting node instead of going through the scheduler.
localrules:
    all,
    prepare_names,
    build_explicit_descriptors,


rule all:
    default_target: True
    input:
        final_outputs(),
