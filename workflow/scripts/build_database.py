import dataclasses
import importlib
from pathlib import Path

import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.models import model_provenance  # noqa: E402
from cueaudit.store import build_database  # noqa: E402

params = snakemake.params
task_outcomes = params.task_outcomes
# Each study's views and parse rates see only its own tasks.
views, parse_rate_groups = [], []
for study, spec in params.studies.items():
    module = importlib.import_module(f"cueaudit.{study}.views")
    kinds = {task: task_outcomes[task] for task in spec["tasks"]}
    views.extend(module.database_views(kinds, spec["view_settings"]))
    parse_rate_groups.append(dataclasses.replace(module.PARSE_RATES, tasks=tuple(spec["tasks"])))

provenance = {
    Path(folder).name: model_provenance(folder, params.models[Path(folder).name], params.decoding)
    for folder in snakemake.input.models
}

build_database(
    snakemake.output[0],
    prompts=snakemake.input.prompts,
    responses=snakemake.input.responses,
    outcomes=snakemake.input.outcomes,
    tables=dict(zip(params.table_names, snakemake.input.tables, strict=True)),
    views=views,
    parse_rate_groups=parse_rate_groups,
    provenance=provenance,
)
log.info("wrote %s", snakemake.output[0])
