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
for content, part in manifest.group_by("content", maintain_order=True):
    log.info("%s: %d files, %d rows", content[0], part.height, part["rows"].sum())
not_run = manifest.filter(manifest["content"] == "race_pred_not_run").height
if not_run:
    log.info("%d race-prediction files hold keys only (race prediction not run there)", not_run)
