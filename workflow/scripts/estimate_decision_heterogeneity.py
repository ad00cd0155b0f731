import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.outputs import read_frames, write_heterogeneity  # noqa: E402

per_level = write_heterogeneity(
    read_frames(snakemake.input),
    preregistration=snakemake.input.preregistration,
    registered=(snakemake.params.design, snakemake.params.files),
    lock=snakemake.params.lock,
    out=snakemake.output,
)
log.info("\n%s", per_level)
