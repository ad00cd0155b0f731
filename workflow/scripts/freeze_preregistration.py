import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.decision.preregistration import freeze  # noqa: E402

record = freeze(snakemake.input[0], snakemake.output[0])
log.info("pre-registration %s locked at %s (sha256 %s)", *record.values())
