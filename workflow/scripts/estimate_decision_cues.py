import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.outputs import read_frames, write_cues  # noqa: E402

contrasts, validity = write_cues(
    read_frames(snakemake.input),
    preregistration=snakemake.input.preregistration,
    composition_alpha=snakemake.params.composition_alpha,
    out=snakemake.output,
)
log.info("\n%s\n%s", contrasts, validity)
