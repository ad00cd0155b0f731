import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.decision.views import write_outcome_summary  # noqa: E402

summary = write_outcome_summary(
    snakemake.input.prompts, snakemake.input.outcomes, snakemake.params.tasks, snakemake.output.csv
)
log.info("\n%s", summary)
