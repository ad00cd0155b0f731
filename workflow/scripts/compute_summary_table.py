import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.probing.analysis.tables import SUMMARY_TABLES  # noqa: E402

table = SUMMARY_TABLES[snakemake.params.table](
    snakemake.input.prompts,
    snakemake.input.outcomes,
    snakemake.params.task_outcomes,
    snakemake.params.analysis,
    snakemake.output.csv,
)
log.info("%d rows\n%s", table.height, table)
