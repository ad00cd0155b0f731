import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.nonresponse import read_tests  # noqa: E402
from cueaudit.decision.analysis.outputs import read_frames, write_contrasts  # noqa: E402
from cueaudit.decision.preregistration import Registration  # noqa: E402

table = write_contrasts(
    read_frames(snakemake.input),
    registration=Registration(
        snakemake.input.preregistration, snakemake.params.design, snakemake.params.files
    ),
    lock=snakemake.params.lock,
    out=snakemake.output,
    pooled_extensions=snakemake.params.pooled_extensions,
    nonresponse_tests=read_tests(snakemake.input.nonresponse_tests),
)
log.info("\n%s", table)
