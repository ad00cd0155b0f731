import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.probing.analysis.tables import write_validity  # noqa: E402

averaged = write_validity(
    snakemake.input.prompts,
    snakemake.input.outcomes,
    snakemake.params.task_outcomes,
    snakemake.params.analysis,
    snakemake.wildcards.dimension,
    per_model_out=snakemake.output.per_model,
    averaged_out=snakemake.output.averaged,
)
log.info("%d averaged correlations", averaged.height)
