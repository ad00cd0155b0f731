import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.probing.race_prediction import write_race_prediction_table  # noqa: E402

rows = write_race_prediction_table(list(snakemake.input), snakemake.output[0])
log.info("%d race-prediction prompts from %d tasks", rows, len(snakemake.input))
