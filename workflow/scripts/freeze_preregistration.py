import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.decision.preregistration import write_check  # noqa: E402

state = write_check(
    snakemake.input.preregistration,
    snakemake.params.design,
    snakemake.params.files,
    lock=snakemake.params.lock,
    answers=snakemake.params.answers,
    out=snakemake.output[0],
)
log.info("pre-registration: %s", state.reason)
