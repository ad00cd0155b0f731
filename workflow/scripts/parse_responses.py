import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.parsing import parse_response_files  # noqa: E402

outcomes = parse_response_files(
    snakemake.input,
    snakemake.params.outcome,
    snakemake.params.answer or {},
    snakemake.output[0],
)
errors = outcomes["parse_error"]
log.info(
    "%d responses (%s), %d parsed, parse errors: %s",
    outcomes.height,
    dict(outcomes["answer_source"].value_counts().iter_rows()),
    errors.is_null().sum(),
    dict(errors.drop_nulls().value_counts().iter_rows()),
)
