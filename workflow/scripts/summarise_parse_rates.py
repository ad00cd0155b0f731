import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.probing.analysis.tables import write_parse_rates  # noqa: E402

table = write_parse_rates(
    snakemake.input.prompts,
    snakemake.input.outcomes,
    snakemake.params.task_outcomes,
    snakemake.output[0],
)
log.info("parse rates:\n%s", table)
