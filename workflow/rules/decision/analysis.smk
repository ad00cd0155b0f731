# The decision audit's analyses, one rule per row of cueaudit.decision.analysis.registry
# (ANALYSES) and one per figure (FIGURES), all through the same adapter script. Each table is
# a CSV + Markdown under results/tables/ and a table in results/cueaudit.duckdb. A new
# analysis is a function and a row there: nothing here changes.


rule build_decision_frames:
    input:
        prompts=decision_prompt_tables(),
        outcomes=all_outcome_tables(decision_task_names()),
    output:
        **DECISION_FRAMES,
    params:
        tasks=decision_task_names(),
        rank_points=decision_analysis_settings()["rank_points"],
    log:
        "logs/decision/frames.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/build_decision_frames.py"


for analysis in DECISION_ANALYSES.values():

    rule:
        name:
            analysis.rule
        input:
            **decision_analysis_inputs(analysis),
        output:
            **decision_table_outputs(analysis.name),
        params:
            **decision_analysis_params(analysis),
        log:
            f"logs/decision/{analysis.name}.log",
        conda:
            "../../../envs/analysis.yaml"
        threads: analysis.threads
        resources:
            mem_mb=4000,
            runtime=analysis.runtime,
        script:
            "../../scripts/run_decision_analysis.py"


for figure in DECISION_FIGURES.values():

    rule:
        name:
            f"plot_decision_{figure.name}"
        input:
            **{table: f"results/tables/decision_{table}.csv" for table in figure.tables},
        output:
            **decision_figure_outputs(figure),
        params:
            figure=figure.name,
        log:
            f"logs/decision/figure_{figure.name}.log",
        conda:
            "../../../envs/analysis.yaml"
        resources:
            mem_mb=2000,
            runtime=10,
        script:
            "../../scripts/plot_decision_figure.py"


# `snakemake decision`: this study alone.
rule decision:
    input:
        decision_outputs(),
