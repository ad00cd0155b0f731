import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.outcomes import parse_response_files  # noqa: E402

outcomes = parse_response_files(snakemake.input, snakemake.params.outcome, snakemake.output[0])
log.info(
    "%d responses, %d answers parsed, parse errors: %s",
    outcomes.height,
    outcomes["answer"].is_not_null().sum(),
    dict(outcomes["parse_error"].drop_nulls().value_counts().iter_rows()),
)
