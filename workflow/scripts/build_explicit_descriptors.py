import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging, write_parquet

log = setup_logging(snakemake.log[0])

from cueaudit.cues.explicit import explicit_descriptors  # noqa: E402

descriptors = explicit_descriptors(snakemake.params.categories)
write_parquet(descriptors, snakemake.output[0])
log.info("%d explicit descriptors", descriptors.height)
