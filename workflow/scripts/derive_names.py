import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.cues.sources.derive import run_name_derivation  # noqa: E402

overlap = run_name_derivation(
    snakemake.params.derive,
    snakemake.params.published,
    derived_path=snakemake.output.derived,
    overlap_path=snakemake.output.overlap,
)
log.info("overlap with the published lists:\n%s", overlap)
