import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging, write_parquet

log = setup_logging(snakemake.log[0])

from cueaudit.cues import REGISTRY  # noqa: E402

kind = snakemake.params.kind
resource = REGISTRY[kind].prepare(snakemake.params.settings)
write_parquet(resource, snakemake.output[0])
log.info("%d rows of the %s cue's resource", resource.height, kind)
