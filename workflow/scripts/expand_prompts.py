import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging, write_parquet

log = setup_logging(snakemake.log[0])

from cueaudit.probing.expansion import build_prompt_table  # noqa: E402

prompts = build_prompt_table(
    base_prompts_path=snakemake.input.base_prompts,
    task=snakemake.wildcards.task,
    cue_files={key: list(snakemake.input.get(key)) for key in snakemake.params.cues},
    cue_settings=snakemake.params.cues,
    limit=snakemake.params.limit,
)
write_parquet(prompts, snakemake.output[0])
log.info("%d prompts: %s", prompts.height, dict(prompts["cue"].value_counts().iter_rows()))
