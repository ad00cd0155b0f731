import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.cues.dialog.clusters import run_dialog_clusters  # noqa: E402

counts = run_dialog_clusters(
    snakemake.wildcards.source,
    snakemake.params.paths,
    n_clusters=snakemake.params.settings["n_clusters"],
    seed=snakemake.params.settings["seed"] or 0,
    out_path=snakemake.output.clusters,
    counts_path=snakemake.output.counts,
)
log.info("clusters:\n%s", counts)
