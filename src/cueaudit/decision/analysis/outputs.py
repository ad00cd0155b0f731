"""The decision audit's files besides the analyses' tables: the analysis frames every
analysis reads (:func:`write_frames`) and the planner's tables before any model call
(:func:`write_plan`). The analyses themselves are rows of :mod:`.registry`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from cueaudit.decision.analysis import planner, simulation_settings
from cueaudit.decision.analysis.frames import POINTS_RULES, AnalysisFrames, load_frames
from cueaudit.decision.analysis.inputs import FRAMES
from cueaudit.decision.preregistration import load_preregistration
from cueaudit.decision.views import register_views
from cueaudit.io import write_parquet
from cueaudit.report import write_table
from cueaudit.store import connect

log = logging.getLogger(__name__)


def write_frames(
    prompts: Sequence[str],
    outcomes: Sequence[str],
    tasks: Sequence[str],
    out: Mapping[str, str],
    *,
    points: str = POINTS_RULES[0],
) -> AnalysisFrames:
    """The analysis frames of the decision tasks' outcomes, one Parquet file per frame; rank
    points on the scale ``points``."""
    con = connect(prompts=prompts, outcomes=outcomes, views=[lambda c: register_views(c, tasks)])
    frames = load_frames(con, points)
    for name in FRAMES:
        write_parquet(getattr(frames, name), out[name])
        log.info("%s: %d rows", name, getattr(frames, name).height)
    return frames


def write_plan(
    *,
    config: Mapping[str, Any],
    preregistration: str,
    prompt_tables: Mapping[str, str],
    max_new_tokens: Mapping[str, int],
    out: Mapping[str, str],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The planner's tables before any model call: per planned contrast its power, MDE,
    equivalence floor and the units that bring the floor under the margin, on studies of
    the configured design simulated at ``decision.plan.effects``; and the design's cost per
    model and task. ``config`` holds ``seeds``, the models' blocks and the decision block."""
    plan = config["decision"]["plan"]
    settings = simulation_settings.from_config(config)
    table = planner.plan_contrasts(
        settings,
        load_preregistration(preregistration),
        studies=plan["studies"],
        effects=plan["effects"],
        seed=plan["seed"],
    )
    write_table(table, out["plan"], planner.PLAN_TABLES["plan"])
    seeds = {
        model: block.get("seeds", config["seeds"]) for model, block in config["models"].items()
    }
    cost = planner.plan_cost(
        prompt_tables,
        planner.task_runs(settings, seeds),
        config["models"],
        max_new_tokens,
        tokens_per_char=plan["tokens_per_char"],
    )
    write_table(cost, out["plan_cost"], planner.PLAN_TABLES["plan_cost"])
    return table, cost
