import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.outputs import write_figures  # noqa: E402

write_figures(snakemake.input, snakemake.output)
