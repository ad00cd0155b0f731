import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.outputs import read_frames, write_composition  # noqa: E402

table = write_composition(
    read_frames(snakemake.input),
    snakemake.output.composition,
    snakemake.params.alpha,
    stop=snakemake.params.stop,
    flags_out=snakemake.output.composition_flags,
    confounded_arms=snakemake.params.confounded_arms,
)
log.info("\n%s", table)
