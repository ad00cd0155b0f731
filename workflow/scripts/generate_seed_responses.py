import _library  # noqa: F401  (puts src/ on the import path)

# vLLM may start its engine and workers in spawned processes, which import this file again as
# "__mp_main__" (where `snakemake` is not defined): everything runs under the guard.
if __name__ == "__main__":
    from cueaudit.io import setup_logging

    setup_logging(snakemake.log[0])

    from cueaudit.inference.runner import SeedTask, run_seed, set_threads
    from cueaudit.parsing import answer_spec

    set_threads(snakemake.threads)
    run_seed(
        tasks={
            task: SeedTask(
                prompts_path=settings["prompts"],
                n_shards=settings["shards"],
                max_new_tokens=settings["max_new_tokens"],
                answer=answer_spec(settings["outcome"], settings["answer"]),
            )
            for task, settings in snakemake.params.tasks.items()
        },
        model_dir=snakemake.input.model,
        model_name=snakemake.wildcards.model,
        model_spec=snakemake.params.model,
        seed=int(snakemake.wildcards.seed),
        decoding=snakemake.params.decoding,
        out_dir=snakemake.output[0],
        cache_dir=snakemake.params.cache_dir,
    )
