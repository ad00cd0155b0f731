import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.probing.analysis.tables import write_group_means  # noqa: E402

table = write_group_means(
    snakemake.input.prompts,
    snakemake.input.outcomes,
    snakemake.params.task_outcomes,
    snakemake.params.analysis,
    snakemake.wildcards.dimension,
    snakemake.output.csv,
)
log.info("%d group means", table.height)
