import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.probing.analysis.tables import write_outcome_ratios  # noqa: E402

ratios = write_outcome_ratios(
    snakemake.input.prompts,
    snakemake.input.outcomes,
    snakemake.params.task_outcomes,
    snakemake.params.analysis,
    snakemake.wildcards.dimension,
    snakemake.output[0],
)
log.info("ratios:\n%s", ratios)
