"""Analysis entry points of the workflow: DuckDB views in, CSV tables out."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from cueaudit import store
from cueaudit.probing.views import PARSE_RATES, BinaryOutcome, database_views, study_views
from cueaudit.probing.vocabulary import Dimension
from cueaudit.report import write_table

Paths = Sequence[str | Path]
ADVICE_KINDS = ("binary", "usd")


def connect(
    prompts: Paths,
    outcomes: Paths,
    task_outcomes: Mapping[str, str],
    binary_outcome: BinaryOutcome = "answer",
) -> duckdb.DuckDBPyConnection:
    """In-memory connection over the parquet tables with the probing study's views."""
    views = study_views(task_outcomes, binary_outcome)
    return store.connect(prompts=prompts, outcomes=outcomes, views=[views])


def _connect(
    prompts: Paths,
    outcomes: Paths,
    task_outcomes: Mapping[str, str],
    settings: Mapping[str, Any],
) -> duckdb.DuckDBPyConnection:
    views = database_views(task_outcomes, settings)
    return store.connect(prompts=prompts, outcomes=outcomes, views=views)


def _bootstrap_options(settings: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "n_boot": settings["bootstrap_replicates"],
        "level": settings["ci_level"],
        "seed": settings["bootstrap_seed"],
    }


def write_parse_rates(
    prompts: Paths, outcomes: Paths, task_outcomes: Mapping[str, str], out: str | Path
) -> pl.DataFrame:
    """The parse rates per model, task and cue (seeds pooled) as CSV + Markdown."""
    con = connect(prompts, outcomes, task_outcomes)
    table = store.parse_rates(con, PARSE_RATES)
    write_table(table, out, "Parse rates per model, task and cue")
    return table


def write_sample_sizes(
    prompts: Paths,
    outcomes: Paths,
    task_outcomes: Mapping[str, str],
    settings: Mapping[str, Any],
    out: str | Path,
) -> pl.DataFrame:
    """Responses, parsed outcomes, prompts, base prompts and seeds behind every estimate."""
    from cueaudit.probing.analysis.summary import sample_sizes

    table = sample_sizes(_connect(prompts, outcomes, task_outcomes, settings))
    write_table(table, out, "Sample sizes and parse rates behind every estimate")
    return table


def write_group_means(
    prompts: Paths,
    outcomes: Paths,
    task_outcomes: Mapping[str, str],
    settings: Mapping[str, Any],
    dimension: Dimension,
    out: str | Path,
) -> pl.DataFrame:
    """Mean outcome per model, task, cue and group with cluster-bootstrap CIs (Figs. 4-5)."""
    from cueaudit.probing.analysis.ratios import group_means

    con = _connect(prompts, outcomes, task_outcomes, settings)
    table = group_means(con, dimension, **_bootstrap_options(settings))
    write_table(table, out, f"Average outcomes by {dimension}")
    return table


def write_race_prediction(
    prompts: Paths,
    outcomes: Paths,
    task_outcomes: Mapping[str, str],
    settings: Mapping[str, Any],
    out: str | Path,
) -> pl.DataFrame:
    """Table 3: precision, recall, F1 of the race prediction per class and cue."""
    from cueaudit.probing.analysis.race_prediction import race_prediction_metrics

    table = race_prediction_metrics(_connect(prompts, outcomes, task_outcomes, settings))
    write_table(table, out, "Race prediction: precision, recall and F1 per cue (Table 3)")
    return table


def write_readability(
    prompts: Paths,
    outcomes: Paths,
    task_outcomes: Mapping[str, str],
    settings: Mapping[str, Any],
    out: str | Path,
) -> pl.DataFrame:
    """Table 4: OLS of the Flesch-Kincaid grade on the cue (no cue as reference)."""
    from cueaudit.probing.analysis.readability import readability_ols

    con = _connect(prompts, outcomes, task_outcomes, settings)
    tasks = [t for t, kind in task_outcomes.items() if kind in ADVICE_KINDS]
    table = readability_ols(con, tasks)
    write_table(table, out, "Flesch-Kincaid grade on cue, no cue as reference (Table 4)")
    return table


def write_regressions(
    prompts: Paths,
    outcomes: Paths,
    task_outcomes: Mapping[str, str],
    settings: Mapping[str, Any],
    out: str | Path,
) -> pl.DataFrame:
    """Tables 5-7: outcome on inferred race (+ cued race, + FK grade) with prompt FE, on one
    seed per model (``settings["regression_seeds"]``: model -> seed; default the first)."""
    from cueaudit.probing.analysis.regression import fe_regressions

    con = _connect(prompts, outcomes, task_outcomes, settings)
    table = fe_regressions(con, settings.get("regression_seeds"))
    write_table(table, out, "Outcome on inferred race with prompt fixed effects (Tables 5-7)")
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
    from cueaudit.probing.analysis.validity import (
        deviation_correlations,
        fisher_average,
        prompt_deviations,
    )

    con = _connect(prompts, outcomes, task_outcomes, settings)
    correlations = deviation_correlations(prompt_deviations(con, dimension))
    weights = settings.get("fisher_weights", "equal")
    averaged = fisher_average(correlations, weights=weights)
    write_table(correlations, per_model_out, f"Correlations of cue-induced shifts ({dimension})")
    weighting = "unweighted" if weights == "equal" else "weighted by n - 3"
    write_table(
        averaged, averaged_out, f"Fisher-z averaged correlations ({dimension}, {weighting})"
    )
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
    from cueaudit.probing.analysis.ratios import outcome_ratios

    con = _connect(prompts, outcomes, task_outcomes, settings)
    ratios = outcome_ratios(con, dimension, **_bootstrap_options(settings))
    write_table(ratios, out, f"Intergroup outcome ratios ({dimension})")
    return ratios


#: Tables computed from the whole study with one writer each, by the name a rule passes as
#: ``params.table`` (workflow/scripts/compute_summary_table.py).
SUMMARY_TABLES: dict[str, Callable[..., pl.DataFrame]] = {
    "sample_sizes": write_sample_sizes,
    "race_prediction": write_race_prediction,
    "readability": write_readability,
    "regressions": write_regressions,
}
