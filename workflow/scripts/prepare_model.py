import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.models import prepare_model  # noqa: E402

manifest = prepare_model(snakemake.wildcards.model, snakemake.params.spec, snakemake.output[0])
log.info("model ready: %s", manifest)
