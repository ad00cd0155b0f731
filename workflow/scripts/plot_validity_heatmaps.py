import _library  # noqa: F401  (puts src/ on the import path)
import polars as pl

from cueaudit.io import setup_logging

setup_logging(snakemake.log[0])

from cueaudit.probing.figures import plot_correlation_heatmaps  # noqa: E402

plot_correlation_heatmaps(
    pl.read_csv(snakemake.input[0], infer_schema_length=None),
    snakemake.wildcards.dimension,
    snakemake.output.pdf,
    kind=snakemake.params.kind,
)
