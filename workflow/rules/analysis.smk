rule summarise_parse_rates:
    input:
        prompts=all_prompt_tables(),
        outcomes=all_outcome_tables(),
    output:
        report(
            "results/tables/parse_rates.csv",
            caption="../report/parse_rates.rst",
            category="Data quality",
        ),
    params:
        task_outcomes=task_outcome_kinds(),
    log:
        "logs/analysis/parse_rates.log",
    conda:
        "../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/summarise_parse_rates.py"


rule compute_validity:
    input:
        prompts=all_prompt_tables(),
        outcomes=all_outcome_tables(),
    output:
        per_model="results/tables/validity_{dimension}.csv",
        averaged="results/tables/validity_{dimension}_averaged.csv",
    params:
        task_outcomes=task_outcome_kinds(),
        analysis=analysis_settings(),
    log:
        "logs/analysis/validity_{dimension}.log",
    conda:
        "../../envs/analysis.yaml"
    resources:
        mem_mb=8000,
        runtime=60,
    script:
        "../scripts/compute_validity.py"


rule compute_outcome_ratios:
    input:
        prompts=all_prompt_tables(),
        outcomes=all_outcome_tables(),
    output:
        "results/tables/ratios_{dimension}.csv",
    params:
        task_outcomes=task_outcome_kinds(),
        analysis=analysis_settings(),
    log:
        "logs/analysis/ratios_{dimension}.log",
    conda:
        "../../envs/analysis.yaml"
    resources:
        mem_mb=8000,
        runtime=60,
    script:
        "../scripts/compute_outcome_ratios.py"


rule build_database:
    input:
        prompts=all_prompt_tables(),
        responses=all_response_shards(),
        outcomes=all_outcome_tables(),
        tables=list(analysis_tables().values()),
    output:
        "results/cueaudit.duckdb",
    params:
        table_names=list(analysis_tables()),
    log:
        "logs/analysis/build_database.log",
    conda:
        "../../envs/analysis.yaml"
    resources:
        mem_mb=8000,
        runtime=60,
    script:
        "../scripts/build_database.py"
