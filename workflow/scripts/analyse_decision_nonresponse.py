import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.outputs import read_frames, write_nonresponse  # noqa: E402

tests = write_nonresponse(
    read_frames(snakemake.input),
    snakemake.input.outcomes,
    snakemake.output,
    alpha=snakemake.params.alpha,
    stop=snakemake.params.stop,
)
log.info("\n%s", tests)
