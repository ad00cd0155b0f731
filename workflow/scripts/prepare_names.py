import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging, write_parquet

log = setup_logging(snakemake.log[0])

from cueaudit.cues.names import load_name_lists, names_from_derived  # noqa: E402

if hasattr(snakemake.input, "derived"):
    names = names_from_derived(snakemake.input.derived)
else:
    names = load_name_lists(snakemake.input.lists)
write_parquet(names, snakemake.output[0])
log.info("%d names from %s", names.height, list(snakemake.input))
