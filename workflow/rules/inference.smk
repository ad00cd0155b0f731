rule generate_responses:
    input:
        prompts="results/prompts/{task}.parquet",
        model="results/models/{model}",
    output:
        "results/responses/{model}/seed{seed}/{task}/{shard}.parquet",
    params:
        model=model_spec,
        decoding=config["decoding"],
        max_new_tokens=task_max_new_tokens,
        shards=task_shards,
    threads: 2
    log:
        "logs/inference/{model}/seed{seed}/{task}/{shard}.log",
    benchmark:
        "benchmarks/runs/inference/{model}/seed{seed}/{task}/{shard}.tsv"
    conda:
        "../../envs/inference.yaml"
    resources:
        mem_mb=8000,
        runtime=240,
    script:
        "../scripts/generate_responses.py"
