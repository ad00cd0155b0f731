import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.outputs import write_frames  # noqa: E402

write_frames(
    snakemake.input.prompts,
    snakemake.input.outcomes,
    snakemake.params.tasks,
    snakemake.output,
    points=snakemake.params.rank_points,
)
