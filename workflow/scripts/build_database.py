from pathlib import Path

import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.inference.determinism import determinism_table  # noqa: E402
from cueaudit.io import write_csv  # noqa: E402
from cueaudit.models import model_provenance  # noqa: E402
from cueaudit.store import build_database  # noqa: E402
from cueaudit.studies import STUDIES  # noqa: E402
from cueaudit.study import database_parts  # noqa: E402

params = snakemake.params
views, parse_rate_groups = database_parts(STUDIES, params.studies, params.task_outcomes)

provenance = {
    Path(folder).name: model_provenance(folder, params.models[Path(folder).name], params.decoding)
    for folder in snakemake.input.models
}

determinism = determinism_table(snakemake.input.responses)
build_database(
    snakemake.output.database,
    prompts=snakemake.input.prompts,
    responses=snakemake.input.responses,
    outcomes=snakemake.input.outcomes,
    tables=dict(zip(params.table_names, snakemake.input.tables, strict=True)),
    views=views,
    parse_rate_groups=parse_rate_groups,
    provenance=provenance,
    determinism=determinism,
)
write_csv(determinism, snakemake.output.determinism)
log.info("wrote %s and %s", snakemake.output.database, snakemake.output.determinism)
