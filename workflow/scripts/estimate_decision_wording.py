import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.outputs import read_frames, write_wording  # noqa: E402

table = write_wording(
    read_frames(snakemake.input),
    flags=snakemake.input.composition_flags,
    name_assignments=snakemake.params.name_assignments,
    preregistration=snakemake.input.preregistration,
    out=snakemake.output.wording,
)
log.info("\n%s", table)
