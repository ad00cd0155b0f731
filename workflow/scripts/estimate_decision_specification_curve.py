import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.outputs import (  # noqa: E402
    read_frames,
    write_specification_curve,
)
from cueaudit.decision.preregistration import Registration  # noqa: E402

summary = write_specification_curve(
    read_frames(snakemake.input),
    registration=Registration(
        snakemake.input.preregistration, snakemake.params.design, snakemake.params.files
    ),
    lock=snakemake.params.lock,
    settings=snakemake.params.settings,
    out=snakemake.output,
    workers=snakemake.threads,
)
log.info("\n%s", summary)
