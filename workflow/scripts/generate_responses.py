import _library  # noqa: F401  (puts src/ on the import path)

# vLLM may start its engine and workers in spawned processes, which import this file again as
# "__mp_main__" (where `snakemake` is not defined): everything runs under the guard.
if __name__ == "__main__":
    from cueaudit.io import setup_logging

    setup_logging(snakemake.log[0])

    from cueaudit.inference.runner import run_shard, set_threads
    from cueaudit.parsing import answer_spec

    set_threads(snakemake.threads)
    run_shard(
        prompts_path=snakemake.input.prompts,
        shard=int(snakemake.wildcards.shard),
        n_shards=snakemake.params.shards,
        model_dir=snakemake.input.model,
        model_name=snakemake.wildcards.model,
        model_spec=snakemake.params.model,
        task=snakemake.wildcards.task,
        seed=int(snakemake.wildcards.seed),
        decoding=snakemake.params.decoding,
        max_new_tokens=snakemake.params.max_new_tokens,
        out_path=snakemake.output[0],
        answer=answer_spec(snakemake.params.outcome, snakemake.params.answer),
        cache_dir=snakemake.params.cache_dir,
    )
