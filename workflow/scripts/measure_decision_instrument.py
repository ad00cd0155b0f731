import _library  # noqa: F401  (puts src/ on the import path)
import polars as pl

from cueaudit.io import setup_logging

setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.outputs import read_frames, write_instrument  # noqa: E402

write_instrument(
    read_frames(snakemake.input),
    pl.read_csv(snakemake.input.contrasts, infer_schema_length=None),
    snakemake.output,
)
