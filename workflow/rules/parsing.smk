rule parse_responses:
    input:
        response_shards,
    output:
        "results/outcomes/{model}/seed{seed}/{task}.parquet",
    params:
        outcome=task_outcome,
        answer=task_answer,
    log:
        "logs/parsing/{model}/seed{seed}/{task}.log",
    conda:
        "../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/parse_responses.py"
