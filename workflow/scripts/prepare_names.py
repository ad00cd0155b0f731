import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging, write_parquet

log = setup_logging(snakemake.log[0])

from cueaudit.names import load_name_lists  # noqa: E402

names = load_name_lists(snakemake.input)
write_parquet(names, snakemake.output[0])
log.info("%d names from %d lists", names.height, len(snakemake.input))
