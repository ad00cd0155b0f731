import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.probing.export import export_replication  # noqa: E402

manifest = export_replication(
    snakemake.output[0],
    prompts=snakemake.input.prompts,
    outcomes=snakemake.input.outcomes,
    responses=snakemake.input.responses,
    task_outcomes=snakemake.params.task_outcomes,
)
log.info("wrote %d files, %d rows", manifest.height, manifest["rows"].sum())
