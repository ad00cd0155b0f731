import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging, write_parquet

log = setup_logging(snakemake.log[0])

from cueaudit.probing.race_prediction import build_race_prediction_table  # noqa: E402

table = build_race_prediction_table(list(snakemake.input))
write_parquet(table, snakemake.output[0])
log.info("%d race-prediction prompts from %d tasks", table.height, len(snakemake.input))
