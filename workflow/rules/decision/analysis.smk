# The decision audit's outcome summary: answers parsed per task, format and mode.


rule summarise_decision_outcomes:
    input:
        prompts=decision_prompt_tables(),
        outcomes=all_outcome_tables(decision_task_names()),
    output:
        csv=report(
            "results/tables/decision_outcomes.csv",
            caption="../../report/decision_outcomes.rst",
            category="Decision audit",
        ),
        md="results/tables/decision_outcomes.md",
    params:
        tasks=decision_task_names(),
    log:
        "logs/decision/outcomes.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/summarise_decision_outcomes.py"


# `snakemake decision`: this study alone.
rule decision:
    input:
        decision_outputs(),
