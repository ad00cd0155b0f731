# Analyses of paper §4 and Appendices C-D: every table is written as CSV (+ Markdown beside it)
# under results/tables/ and loaded into results/cueaudit.duckdb by build_database.


wildcard_constraints:
    dimension=any_of(DIMENSIONS),


rule summarise_parse_rates:
    input:
        prompts=probing_prompt_tables(),
        outcomes=probing_outcome_tables(),
    output:
        csv=report(
            "results/tables/parse_rates.csv",
            caption="../../report/parse_rates.rst",
            category="Data quality",
        ),
        md="results/tables/parse_rates.md",
    params:
        task_outcomes=probing_outcome_kinds(),
    log:
        "logs/analysis/parse_rates.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/summarise_parse_rates.py"


rule compute_sample_sizes:
    input:
        prompts=probing_prompt_tables(),
        outcomes=probing_outcome_tables(),
    output:
        csv=report(
            "results/tables/sample_sizes.csv",
            caption="../../report/sample_sizes.rst",
            category="Data quality",
        ),
        md="results/tables/sample_sizes.md",
    params:
        table="sample_sizes",
        task_outcomes=probing_outcome_kinds(),
        analysis=analysis_settings(*OUTCOME_SETTINGS),
    log:
        "logs/analysis/sample_sizes.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/compute_summary_table.py"


rule compute_validity:
    input:
        prompts=probing_prompt_tables(),
        outcomes=probing_outcome_tables(),
    output:
        per_model=report(
            "results/tables/validity_{dimension}.csv",
            caption="../../report/validity_table.rst",
            category="Construct validity",
            labels={"table": "correlations per model", "dimension": "{dimension}"},
        ),
        averaged=report(
            "results/tables/validity_{dimension}_averaged.csv",
            caption="../../report/validity_table.rst",
            category="Construct validity",
            labels={"table": "Fisher-z averaged correlations", "dimension": "{dimension}"},
        ),
        per_model_md="results/tables/validity_{dimension}.md",
        averaged_md="results/tables/validity_{dimension}_averaged.md",
    params:
        task_outcomes=probing_outcome_kinds(),
        analysis=analysis_settings(*OUTCOME_SETTINGS, "fisher_weights"),
    log:
        "logs/analysis/validity_{dimension}.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=8000,
        runtime=60,
    script:
        "../../scripts/compute_validity.py"


rule compute_outcome_ratios:
    input:
        prompts=probing_prompt_tables(),
        outcomes=probing_outcome_tables(),
    output:
        csv=report(
            "results/tables/ratios_{dimension}.csv",
            caption="../../report/ratios_table.rst",
            category="Outcome ratios",
            labels={"table": "intergroup outcome ratios", "dimension": "{dimension}"},
        ),
        md="results/tables/ratios_{dimension}.md",
    params:
        task_outcomes=probing_outcome_kinds(),
        analysis=analysis_settings(*OUTCOME_SETTINGS, *BOOTSTRAP_SETTINGS),
    log:
        "logs/analysis/ratios_{dimension}.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=8000,
        runtime=60,
    script:
        "../../scripts/compute_outcome_ratios.py"


rule compute_group_means:
    input:
        prompts=probing_prompt_tables(),
        outcomes=probing_outcome_tables(),
    output:
        csv=report(
            "results/tables/means_{dimension}.csv",
            caption="../../report/means_table.rst",
            category="Average outcomes",
            labels={"table": "group means", "dimension": "{dimension}"},
        ),
        md="results/tables/means_{dimension}.md",
    params:
        task_outcomes=probing_outcome_kinds(),
        analysis=analysis_settings(*OUTCOME_SETTINGS, *BOOTSTRAP_SETTINGS),
    log:
        "logs/analysis/means_{dimension}.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=8000,
        runtime=60,
    script:
        "../../scripts/compute_group_means.py"


rule compute_race_prediction:
    input:
        prompts=probing_prompt_tables(),
        outcomes=probing_outcome_tables(),
    output:
        csv=report(
            "results/tables/race_prediction.csv",
            caption="../../report/race_prediction.rst",
            category="Threats to validity",
            labels={"table": "Table 3: race prediction"},
        ),
        md="results/tables/race_prediction.md",
    params:
        table="race_prediction",
        task_outcomes=probing_outcome_kinds(),
        analysis=analysis_settings(*OUTCOME_SETTINGS),
    log:
        "logs/analysis/race_prediction.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/compute_summary_table.py"


rule compute_readability:
    input:
        prompts=probing_prompt_tables(),
        outcomes=probing_outcome_tables(),
    output:
        csv=report(
            "results/tables/readability.csv",
            caption="../../report/readability.rst",
            category="Threats to validity",
            labels={"table": "Table 4: readability by cue"},
        ),
        md="results/tables/readability.md",
    params:
        table="readability",
        task_outcomes=probing_outcome_kinds(),
        analysis=analysis_settings(*OUTCOME_SETTINGS),
    log:
        "logs/analysis/readability.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/compute_summary_table.py"


rule compute_regressions:
    input:
        prompts=probing_prompt_tables(),
        outcomes=probing_outcome_tables(),
    output:
        csv=report(
            "results/tables/regressions.csv",
            caption="../../report/regressions.rst",
            category="Threats to validity",
            labels={"table": "Tables 5-7: fixed-effects regressions"},
        ),
        md="results/tables/regressions.md",
    params:
        table="regressions",
        task_outcomes=probing_outcome_kinds(),
        analysis=regression_settings(),
    log:
        "logs/analysis/regressions.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=8000,
        runtime=60,
    script:
        "../../scripts/compute_summary_table.py"
