import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.outputs import read_frames, write_bundle_designs  # noqa: E402

write_bundle_designs(read_frames(snakemake.input), snakemake.output)
