# Answers are served from the response cache (results/cache/responses/, see
# src/cueaudit/inference/cache.py) when the model, weights, decoding and prompt are unchanged:
# a rerun triggered by a code or params change makes no model call for them. Batch API state
# lives in results/cache/batches/. Neither folder is a rule output, so reruns keep them.
wildcard_constraints:
    task=any_of(task_names()),
    model=any_of(model_names()),
    seed=r"\d+",
    shard=r"\d+",


# Inference is two rules on one output pattern, told apart by the model's backend (its
# registry row's local_weights): generate_responses runs weights here (a cluster profile
# gives it the GPU), generate_api_responses sends requests to an endpoint (no GPU), and only
# after check_model has probed that endpoint.
rule generate_responses:
    input:
        prompts="results/prompts/{task}.parquet",
        model="results/models/{model}",
        requires=task_requirements,
    output:
        "results/responses/{model}/seed{seed}/{task}/{shard}.parquet",
    wildcard_constraints:
        model=any_of(per_task_models()),
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


use rule generate_responses as generate_api_responses with:
    input:
        prompts="results/prompts/{task}.parquet",
        model="results/models/{model}",
        requires=task_requirements,
        # ancient: a probe run again (new tasks, a changed block) reruns no inference
        preflight=ancient("results/preflight/{model}.json"),
    wildcard_constraints:
        model=any_of(api_models()),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=240,


# A model answered per seed (inference_jobs: per_seed, vLLM's default) starts its engine once:
# one job answers every task and shard of the seed into a folder, and each shard is copied
# from there to where a per-task job would have written it. A changed or added task reruns
# that job, which answers the unchanged prompts from the response cache.
rule generate_seed_responses:
    input:
        prompts=seed_prompt_tables,
        model="results/models/{model}",
        requires=seed_task_requirements,
    output:
        directory("results/responses_per_seed/{model}/seed{seed}"),
    wildcard_constraints:
        model=any_of(per_seed_models()),
    params:
        model=model_spec,
        decoding=config["decoding"],
        tasks=seed_task_settings,
        cache_dir="results/cache/responses",
    threads: 2
    log:
        "logs/inference/{model}/seed{seed}.log",
    benchmark:
        "results/benchmarks/inference/{model}/seed{seed}.tsv"
    conda:
        "../../envs/inference.yaml"
    resources:
        mem_mb=8000,
        runtime=240,
    script:
        "../scripts/generate_seed_responses.py"


rule copy_seed_responses:
    input:
        "results/responses_per_seed/{model}/seed{seed}",
    output:
        "results/responses/{model}/seed{seed}/{task}/{shard}.parquet",
    wildcard_constraints:
        model=any_of(per_seed_models()),
    localrule: True
    log:
        "logs/inference/{model}/seed{seed}/{task}/{shard}.log",
    conda:
        "../../envs/inference.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    shell:
        "cp {input}/{wildcards.task}/{wildcards.shard}.parquet {output} 2> {log}"


# One short probe of an API model's endpoint before its first inference job: the model is
# served, returns log-probabilities where its tasks score options, honours its tasks' JSON
# schemas and tool calls (cueaudit.inference.preflight). Local weights need no probe: their
# folders are checked when the workflow starts.
rule check_model:
    output:
        "results/preflight/{model}.json",
    params:
        model=model_spec,
        tasks=model_task_answers,
    wildcard_constraints:
        model=any_of(api_models()),
    log:
        "logs/preflight/{model}.log",
    conda:
        "../../envs/inference.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../scripts/check_model.py"
