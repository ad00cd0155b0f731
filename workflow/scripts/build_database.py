import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.store import build_database  # noqa: E402

build_database(
    snakemake.output[0],
    prompts=snakemake.input.prompts,
    responses=snakemake.input.responses,
    outcomes=snakemake.input.outcomes,
    tables=dict(zip(snakemake.params.table_names, snakemake.input.tables, strict=True)),
)
log.info("wrote %s", snakemake.output[0])
