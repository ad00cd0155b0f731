# The probing study's prompt tables: AAVE translations of its base prompts, base prompts x
# cue variants, and the race-prediction prompts built from them.


rule translate_dialect:
    input:
        dialect_base_prompt_files(),
    output:
        translations="results/resources/dialect_aave.parquet",
        audit=report(
            "results/tables/dialect_audit.csv",
            caption="../../report/dialect_audit.rst",
            category="Cue resources",
        ),
        flagged=report(
            "results/tables/dialect_flagged.csv",
            caption="../../report/dialect_audit.rst",
            category="Cue resources",
        ),
    params:
        dialect=dialect_config(),
        tasks=dialect_task_inputs(),
    log:
        "logs/resources/translate_dialect.log",
    conda:
        "../../../envs/data.yaml"
    resources:
        mem_mb=4000,
        runtime=120,
    script:
        "../../scripts/translate_dialect.py"


# A task with augment: in the config builds its base prompts from components (§3.1); the
# other rules read them through base_prompt_file().
rule augment_base_prompts:
    input:
        unpack(augment_inputs),
    output:
        "results/prompts/base/{task}.csv",
    wildcard_constraints:
        # no augmented task: a pattern that matches no task name
        task=any_of(augmented_tasks()) or "(?!)",
    params:
        augment=augment_settings,
    log:
        "logs/prompts/augment_{task}.log",
    conda:
        "../../../envs/data.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../../scripts/augment_base_prompts.py"


# Base prompts x the variants of every cue type that is on (cueaudit.cues.REGISTRY): its
# prepared resource files, by config key, and the keys of its block its loading reads.
rule expand_prompts:
    input:
        **cue_resource_files(),
        base_prompts=task_base_prompts,
    output:
        "results/prompts/{task}.parquet",
    wildcard_constraints:
        task=advice_any_of(),
    params:
        cues=cue_load_settings(),
        limit=task_limit,
    log:
        "logs/prompts/{task}.log",
    conda:
        "../../../envs/data.yaml"
    resources:
        mem_mb=2500,
        runtime=30,
    script:
        "../../scripts/expand_prompts.py"


rule build_race_prediction_prompts:
    input:
        race_prediction_source_tables(),
    output:
        "results/prompts/race_prediction.parquet",
    log:
        "logs/prompts/race_prediction.log",
    conda:
        "../../../envs/data.yaml"
    resources:
        mem_mb=2500,
        runtime=30,
    script:
        "../../scripts/build_race_prediction_prompts.py"
