"""Analysis entry points of the workflow: DuckDB views in, CSV tables out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from cueaudit.cues import Dimension
from cueaudit.io import write_csv
from cueaudit.store import BinaryOutcome, parse_rates, register_views

Paths = Sequence[str | Path]


def connect(
    prompts: Paths,
    outcomes: Paths,
    task_outcomes: Mapping[str, str],
    binary_outcome: BinaryOutcome = "answer",
) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    register_views(
        con,
        prompts=prompts,
        outcomes=outcomes,
        task_outcomes=task_outcomes,
        binary_outcome=binary_outcome,
    )
    return con


def write_parse_rates(
    prompts: Paths, outcomes: Paths, task_outcomes: Mapping[str, str], out: str | Path
) -> pl.DataFrame:
    table = parse_rates(connect(prompts, outcomes, task_outcomes))
    write_csv(table, out)
    return table


def write_validity(
    prompts: Paths,
    outcomes: Paths,
    task_outcomes: Mapping[str, str],
    settings: Mapping[str, Any],
    dimension: Dimension,
    *,
    per_model_out: str | Path,
    averaged_out: str | Path,
) -> pl.DataFrame:
    """Correlations of cue-induced deviations per model, and their Fisher-z average."""
    from cueaudit.analysis.validity import (
        deviation_correlations,
        fisher_average,
        prompt_deviations,
    )

    con = connect(prompts, outcomes, task_outcomes, settings["binary_outcome"])
    correlations = deviation_correlations(prompt_deviations(con, dimension))
    averaged = fisher_average(correlations)
    write_csv(correlations, per_model_out)
    write_csv(averaged, averaged_out)
    return averaged


def write_outcome_ratios(
    prompts: Paths,
    outcomes: Paths,
    task_outcomes: Mapping[str, str],
    settings: Mapping[str, Any],
    dimension: Dimension,
    out: str | Path,
) -> pl.DataFrame:
    """Focal/reference outcome ratios per model, task and cue with cluster-bootstrap CIs."""
    from cueaudit.analysis.ratios import outcome_ratios

    con = connect(prompts, outcomes, task_outcomes, settings["binary_outcome"])
    ratios = outcome_ratios(
        con,
        dimension,
        n_boot=settings["bootstrap_replicates"],
        level=settings["ci_level"],
        seed=settings["bootstrap_seed"],
    )
    write_csv(ratios, out)
    return ratios
