import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging, write_parquet

log = setup_logging(snakemake.log[0])

from cueaudit.probing.expansion import build_prompt_table  # noqa: E402

prompts = build_prompt_table(
    base_prompts_path=snakemake.input.base_prompts,
    names_path=snakemake.input.names,
    explicit_path=snakemake.input.explicit,
    task=snakemake.wildcards.task,
    per_group=snakemake.params.names.get("per_group"),
    sample_seed=snakemake.params.names.get("sample_seed", 0),
    limit=snakemake.params.limit,
    translations_path=snakemake.input.get("translations"),
    dialog_paths=list(snakemake.input.get("dialog", [])) or None,
)
write_parquet(prompts, snakemake.output[0])
log.info("%d prompts: %s", prompts.height, dict(prompts["cue"].value_counts().iter_rows()))
