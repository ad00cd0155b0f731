import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.outputs import read_frames, write_planted  # noqa: E402

table = write_planted(
    read_frames(snakemake.input),
    preregistration=snakemake.input.preregistration,
    prompts=snakemake.input.prompts,
    settings=snakemake.params.settings,
    out=snakemake.output.planted,
)
log.info("\n%s", table)
