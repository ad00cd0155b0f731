# Prompts and parsed responses in the layout and encoding of the authors' replication
# package (docs/replication-export.md), streamed: memory is one response shard, not a task.


rule export_replication:
    input:
        prompts=probing_prompt_tables(),
        outcomes=probing_outcome_tables(),
        responses=all_response_shards(probing_task_names()),
    output:
        directory("results/replication"),
    params:
        task_outcomes=probing_outcome_kinds(),
    log:
        "logs/export/replication.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    script:
        "../../scripts/export_replication.py"


# `snakemake probing`: this study alone.
rule probing:
    input:
        probing_outputs(),
