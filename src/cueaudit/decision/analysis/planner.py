"""The power and sample-size planner: the configured design simulated before any model call.

For each planned contrast of the pre-registration, :func:`plan_contrasts` simulates the
design's studies (:mod:`.simulate`) with the contrast's effect planted at the size the user
names (by default the format's pre-registered margin), fits each one as the analysis would
(:func:`.contrasts.estimate_contrasts`) and reports:

- ``power``: the share of studies whose difference test rejects at alpha (``power_bh``: on
  the BH q-value, as the family's verdict uses it);
- ``se``, ``mde`` and ``equivalence_floor`` (:mod:`cueaudit.stats.multiplicity`), the
  medians over the studies of what each study's own SE gives (a median: a study whose
  variance components sit at their boundary has an outlying SE), in natural units and in
  SDs of the outcome;
  ``empirical_sd`` is the SD of the estimates over the studies, the check of those SEs;
- ``units_needed``: the prompts (Rate, Decide) or ranking prompts (Rank: a bundle in each
  rank task of the cell, ``unit`` "bundles") per model and seed that bring
  the equivalence floor under the margin, on ``SE ~ 1 / sqrt(n)`` (more prompts of the same
  construction: more profiles x names, more Latin-square bundles), and ``extra_units`` /
  ``extra_slots`` (ranked candidates, four a bundle) beyond the design's.

:func:`plan_cost` gives what the design costs: requests, input tokens (prompt characters x
``tokens_per_char``) and output tokens (each task's ``max_new_tokens``, an upper bound), dollars
for models with prices and hours for models with a measured throughput.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import polars as pl

from cueaudit.decision.analysis.contrasts import estimate_contrasts, family_cells
from cueaudit.decision.analysis.design_matrix import BUNDLE_SIZE, cell_rows
from cueaudit.decision.analysis.fitters import FAMILY_ESTIMATOR
from cueaudit.decision.analysis.frames import PRIMARY
from cueaudit.decision.analysis.simulate import build_design, simulate
from cueaudit.decision.analysis.simulation_settings import SimulationSettings
from cueaudit.decision.design_settings import DesignSettings
from cueaudit.decision.preregistration import Preregistration
from cueaudit.decision.tasks import arm_task
from cueaudit.errors import InputError
from cueaudit.prompts import scan_prompts

PLAN_SCHEMA: Final = {
    "domain": pl.String(),
    "format": pl.String(),
    "contrast": pl.String(),
    "effect": pl.Float64(),
    "effect_sd": pl.Float64(),
    "studies": pl.Int64(),
    "power": pl.Float64(),
    "power_bh": pl.Float64(),
    "mean_estimate": pl.Float64(),
    "se": pl.Float64(),
    "empirical_sd": pl.Float64(),
    "mde": pl.Float64(),
    "mde_sd": pl.Float64(),
    "equivalence_floor": pl.Float64(),
    "equivalence_floor_sd": pl.Float64(),
    "margin": pl.Float64(),
    "floor_under_margin": pl.Boolean(),
    "unit": pl.String(),
    "units": pl.Int64(),
    "units_needed": pl.Int64(),
    "extra_units": pl.Int64(),
    "extra_slots": pl.Int64(),
}
COST_SCHEMA: Final = {
    "model": pl.String(),
    "task": pl.String(),
    "requests": pl.Int64(),
    "input_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
    "dollars": pl.Float64(),
    "hours": pl.Float64(),
}
SOURCE: Final = "decision.plan"
#: The planner's tables and their titles (results/tables/decision_<table>.csv + .md).
PLAN_TABLES: Final = {
    "plan": "Decision audit: planned power, floors and extra units",
    "plan_cost": "Decision audit: planned requests, tokens and cost",
}


def planted_effects(
    prereg: Preregistration, effects: Mapping[str, float | None]
) -> dict[tuple[str, str, str], float]:
    """The effect planted in each planned contrast: the config's per format, else the
    format's margin; a format with neither (Decide) is an error naming the key."""
    planted: dict[tuple[str, str, str], float] = {}
    for (domain, fmt), planned in family_cells(prereg).items():
        size = effects.get(fmt)
        size = prereg.margins.get(fmt) if size is None else size
        if size is None:
            raise InputError(
                SOURCE,
                f"format {fmt!r} has no pre-registered margin: name its effect size",
                f"effects.{fmt}",
            )
        for c in planned:
            planted[(domain, fmt, c.contrast)] = float(size)
    return planted


def _units(frames: Any, domain: str, fmt: str) -> tuple[str, int]:
    """The cell's unit and how many the design holds per model and seed."""
    rows = cell_rows(frames.arm(PRIMARY), domain, fmt)
    per_run = rows.group_by("model", "seed").agg(pl.col("prompt_uid").n_unique())
    n = int(per_run["prompt_uid"].max()) if per_run.height else 0
    return ("bundles" if fmt == "rank" else "prompts"), n


def plan_contrasts(
    settings: SimulationSettings,
    prereg: Preregistration,
    *,
    studies: int,
    effects: Mapping[str, float | None] | None = None,
    seed: int = 0,
) -> pl.DataFrame:
    """The planner's table: one row per planned contrast (see the module's docstring)."""
    if studies < 2:
        raise InputError(SOURCE, f"{studies}: at least 2 simulated studies", "studies")
    planted = planted_effects(prereg, effects or {})
    study_settings = settings.with_planted(planted)
    design = build_design(study_settings)
    fits = []
    units: dict[tuple[str, str], tuple[str, int]] = {}
    for i in range(studies):
        frames = simulate(study_settings, seed + i, design=design)
        if not units:
            units = {cell: _units(frames, *cell) for cell in family_cells(prereg)}
        table = estimate_contrasts(frames, prereg, pre_registered=True)
        fits.append(table.filter(pl.col("estimator") == FAMILY_ESTIMATOR))
    every = pl.concat(fits)
    alpha = prereg.alpha
    summary = every.group_by("domain", "format", "contrast").agg(
        pl.len().alias("studies"),
        (pl.col("p_value") < alpha).mean().alias("power"),
        (pl.col("q_value") < alpha).mean().alias("power_bh"),
        pl.col("estimate").mean().alias("mean_estimate"),
        pl.col("se").median().alias("se"),
        pl.col("estimate").std().alias("empirical_sd"),
        pl.col("mde").median().alias("mde"),
        pl.col("mde_sd").median().alias("mde_sd"),
        pl.col("equivalence_floor").median().alias("equivalence_floor"),
        pl.col("equivalence_floor_sd").median().alias("equivalence_floor_sd"),
        pl.col("outcome_sd").mean().alias("_outcome_sd"),
    )
    records = []
    for row in summary.iter_rows(named=True):
        cell = (row["domain"], row["format"])
        if units[cell][1] == 0:
            continue  # a planned cell this design does not build
        effect = planted[(*cell, row["contrast"])]
        margin = prereg.margins.get(row["format"])
        unit, n = units[cell]
        needed = _units_needed(n, row["equivalence_floor"], margin)
        extra = None if needed is None else max(needed - n, 0)
        records.append(
            row
            | {
                "effect": effect,
                "effect_sd": effect / row.pop("_outcome_sd"),
                "margin": margin,
                "floor_under_margin": None if margin is None else row["equivalence_floor"] < margin,
                "unit": unit,
                "units": n,
                "units_needed": needed,
                "extra_units": extra,
                "extra_slots": None if extra is None or unit != "bundles" else extra * BUNDLE_SIZE,
            }
        )
    return (
        pl.DataFrame(records, schema=PLAN_SCHEMA)
        .select(list(PLAN_SCHEMA))
        .sort("domain", "format", "contrast")
    )


def _units_needed(n: int, floor: float, margin: float | None) -> int | None:
    if margin is None or not np.isfinite(floor) or n == 0:
        return None
    return max(n, math.ceil(n * (floor / margin) ** 2))


def task_runs(
    settings: SimulationSettings, seeds: Mapping[str, Sequence[int]]
) -> dict[str, dict[str, Sequence[int]]]:
    """Each task of every arm (``<task>__<arm>`` in an extension) -> the arm's models -> their
    ``seeds``: who answers what, so an arm on one model is priced for that model alone."""
    return {
        arm_task(task, arm): {model: seeds[model] for model in models}
        for arm, (design, models) in settings.arms().items()
        for task in DesignSettings.of(design).tasks
    }


def plan_cost(
    prompt_tables: Mapping[str, str],
    runs: Mapping[str, Mapping[str, Sequence[int]]],
    model_specs: Mapping[str, Mapping[str, Any]],
    max_new_tokens: Mapping[str, int],
    *,
    tokens_per_char: float,
) -> pl.DataFrame:
    """Requests, tokens, dollars and hours per model and task. ``prompt_tables`` maps each
    task to its prompt table, ``runs`` each task to the models answering it (its arm's) and
    each model to its seeds, and ``model_specs`` each model to its config block (``pricing``:
    dollars per million input and output tokens; ``throughput``: measured requests per hour
    on its hardware)."""
    chars = {
        task: scan_prompts(path)
        .select(pl.len().alias("n"), pl.col("text").str.len_chars().sum().alias("c"))
        .collect()
        .row(0)
        for task, path in prompt_tables.items()
    }
    records = []
    for task, (n, c) in chars.items():
        for model, seeds in runs[task].items():
            spec = model_specs.get(model, {})
            pricing = spec.get("pricing")
            throughput = spec.get("throughput")
            requests = n * len(seeds)
            inputs = round(c * tokens_per_char) * len(seeds)
            outputs = requests * max_new_tokens[task]
            dollars = None
            if pricing is not None:
                dollars = (
                    inputs * pricing["input_per_million"] + outputs * pricing["output_per_million"]
                ) / 1e6
            hours = None if throughput is None else requests / throughput
            records.append((model, task, requests, inputs, outputs, dollars, hours))
    return pl.DataFrame(records, schema=COST_SCHEMA, orient="row").sort("model", "task")
