import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.outputs import read_frames, write_reasoning_paired  # noqa: E402

table = write_reasoning_paired(
    read_frames(snakemake.input),
    pairs=snakemake.params.pairs,
    preregistration=snakemake.input.preregistration,
    out=snakemake.output.reasoning_paired,
)
log.info("\n%s", table)
