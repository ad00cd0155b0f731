# Answers are served from the response cache (results/cache/responses/, see
# src/cueaudit/inference/cache.py) when the model, weights, decoding and prompt are unchanged:
# a rerun triggered by a code or params change makes no model call for them. Batch API state
# lives in results/cache/batches/. Neither folder is a rule output, so reruns keep them.
wildcard_constraints:
    task=any_of(task_names()),
    model=any_of(model_names()),
    seed=r"\d+",
    shard=r"\d+",


rule generate_responses:
    input:
        prompts="results/prompts/{task}.parquet",
        model="results/models/{model}",
        requires=task_requirements,
    output:
        "results/responses/{model}/seed{seed}/{task}/{shard}.parquet",
    params:
        model=model_spec,
        decoding=config["decoding"],
        max_new_tokens=task_max_new_tokens,
        shards=task_shards,
        outcome=task_outcome,
        answer=task_answer,
        cache_dir="results/cache/responses",
    threads: 2
    log:
        "logs/inference/{model}/seed{seed}/{task}/{shard}.log",
    benchmark:
        "results/benchmarks/inference/{model}/seed{seed}/{task}/{shard}.tsv"
    conda:
        "../../envs/inference.yaml"
    resources:
        mem_mb=8000,
        runtime=240,
    script:
        "../scripts/generate_responses.py"
