# Cue resources beyond name lists and explicit descriptors: AAVE translations of the base
# prompts, dialog-history clusters (CAD, PRISM) and the race-prediction prompt table.


rule translate_dialect:
    input:
        dialect_base_prompt_files(),
    output:
        translations="results/resources/dialect_aave.parquet",
        audit=report(
            "results/tables/dialect_audit.csv",
            caption="../report/dialect_audit.rst",
            category="Cue resources",
        ),
        flagged=report(
            "results/tables/dialect_flagged.csv",
            caption="../report/dialect_audit.rst",
            category="Cue resources",
        ),
    params:
        dialect=dialect_config(),
        tasks=dialect_task_inputs(),
    log:
        "logs/resources/translate_dialect.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=4000,
        runtime=120,
    script:
        "../scripts/translate_dialect.py"


rule build_dialog_clusters:
    input:
        dialog_source_files,
    output:
        clusters="results/resources/dialog_{source}.parquet",
        counts=report(
            "results/tables/dialog_clusters_{source}.csv",
            caption="../report/dialog_clusters.rst",
            category="Cue resources",
        ),
    wildcard_constraints:
        source="cad|prism",
    params:
        paths=dialog_source_paths,
        settings=dialog_settings(),
    log:
        "logs/resources/dialog_{source}.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/build_dialog_clusters.py"


rule build_race_prediction_prompts:
    input:
        race_prediction_source_tables(),
    output:
        "results/prompts/race_prediction.parquet",
    log:
        "logs/prompts/race_prediction.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/build_race_prediction_prompts.py"
