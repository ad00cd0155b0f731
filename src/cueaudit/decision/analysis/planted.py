"""Planted disparities (PLANTED): before a null is read as "no effect", show that the whole
instrument finds an effect of known size put into the model's answers.

A plant changes **answers**, never the analysis outcome. :func:`plant_answers` copies the
frames and, in one domain x format cell, changes the answers of the focal group (Black, or
women) the way a model that favoured them by ``value`` (natural units: rating points,
probability, rank positions) would have answered:

``decide``
    each focal "no" becomes "yes" with probability ``value / P(no | focal)`` (a negative value
    turns yeses into noes), so the focal yes-rate rises by ``value`` unless it would pass 1;
``rate``
    each focal rating moves by ``value`` on the 1-5 scale, rounded at random to a neighbouring
    integer (so its expectation moves by ``value``) and clipped at 1 and 5: at the ends a large
    plant attenuates, as a real preference would;
``rank``
    in every complete answer to a bundle of the rank estimand
    (:data:`~cueaudit.decision.analysis.design_matrix.RANK_BUNDLE_TYPES`) that shows a focal and a
    non-focal candidate, each focal candidate moves up one step (down for a negative value,
    :func:`step`): in an answer without ties it changes places with the candidate above it; in
    an answer with ties, out of a tie it shares to just above the rest of it, or alone into a
    tie with the group above. At the top it cannot move. So a strict answer stays strict and a
    tie is broken or formed as a real answer with ties would. Each answer moves with the
    probability that makes the expected change of the focal-minus-reference points equal
    ``value`` (a second and third step follow when one is not enough).

The changed answers are then **rendered as the model's own output** in their task's format
and mode (``"4"``, ``"Yes"``, ``"B > A = C > D"``, the constrained JSON, the ``submit_*`` tool
call: :meth:`cueaudit.parsing.kinds.OutcomeKind.render`) and **parsed by the task's outcome
kind** (:func:`cueaudit.parsing.responses.parse_responses`), exactly as the workflow parses real
responses; a rendered answer that does not parse becomes an unparsed answer, and drops out as
real ones do. Rank points and ties are recomputed from the parsed ranks
(:func:`~cueaudit.decision.analysis.frames.with_points`). Both estimators (the lmm, and for
Rank the rank-ordered logit) then refit the planted frames.

:func:`planted_disparities` reports, for each cell of the family with the chosen contrast,
each estimator and each size (in outcome SDs), ``recovered_sd = (estimate on the planted copy
- estimate on the original) / outcome_sd``, the interval from the planted fit's SE and degrees
of freedom, and the verdict: ``"recovered"`` when the interval holds the planted size and
excludes zero, ``"not resolved"`` when it holds both (a size the data cannot tell from zero),
``"not recovered"`` when it excludes the planted size. Nothing makes the recovery exact: a
diluted estimator, a parser that drops the planted answers, the clipping at the scale's ends
and the plant's own randomness all show in it.

For simulated answers to the same prompts (``simulated`` settings), the plant is in the
data-generating process itself
(:class:`~cueaudit.decision.analysis.simulation_settings.SimulationSettings` ``planted``),
whose truth is the planted size: ``recovered_sd`` is the estimate itself.

One module on purpose: planting answers, rendering them back through the outcome kinds and
recovering the effect are one loop whose parts share the plant's bookkeeping.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Final

import numpy as np
import polars as pl

from cueaudit.decision.analysis.contrasts import estimate_contrasts, family_cells
from cueaudit.decision.analysis.design_matrix import (
    DIMENSION_COLUMNS,
    RANK_BUNDLE_TYPES,
    cell_rows,
    design_of,
)
from cueaudit.decision.analysis.fitters import FAMILY_ESTIMATOR
from cueaudit.decision.analysis.frames import (
    ANSWER_KEY,
    POINTS_RULES,
    PRIMARY,
    AnalysisFrames,
    with_points,
)
from cueaudit.decision.analysis.simulate import rank_lapse_needed, simulate_like
from cueaudit.decision.analysis.simulation_settings import SOURCE as SIMULATION_SOURCE
from cueaudit.decision.analysis.simulation_settings import SimulationSettings
from cueaudit.decision.design import BUNDLE_SIZE
from cueaudit.decision.preregistration import PlannedContrast, Preregistration
from cueaudit.decision.prompts import task_answers
from cueaudit.decision.tasks import task_spec
from cueaudit.errors import InputError
from cueaudit.parsing.kinds import OutcomeKind, get_kind
from cueaudit.parsing.responses import parse_responses
from cueaudit.stats.multiplicity import t_test

SIZES: Final = (0.05, 0.10, 0.50)
MAX_RANK_STEPS: Final = 3
PLANTED_SCHEMA: Final = {
    "source": pl.String(),
    "domain": pl.String(),
    "format": pl.String(),
    "contrast": pl.String(),
    "estimator": pl.String(),
    "planted_sd": pl.Float64(),
    "planted": pl.Float64(),
    "realised_sd": pl.Float64(),
    "recovered_sd": pl.Float64(),
    "se_sd": pl.Float64(),
    "df": pl.Float64(),
    "ci_low_sd": pl.Float64(),
    "ci_high_sd": pl.Float64(),
    "covered": pl.Boolean(),
    "excludes_zero": pl.Boolean(),
    "verdict": pl.String(),
    "n_obs": pl.Int64(),
    "n_changed": pl.Int64(),
    "n_unparsed": pl.Int64(),
}
#: A contrast estimator: frames and the pre-registration to a CONTRASTS table (its rows with
#: ``domain, format, contrast, estimator, estimate, se, df, outcome_sd, n_obs`` are read).
Estimator = Callable[[AnalysisFrames, Preregistration], pl.DataFrame]
#: What renders and parses each task's answers: base task -> (outcome kind, settings).
Kinds = Mapping[str, tuple[str, Mapping[str, Any]]]


@dataclass(frozen=True)
class Plant:
    """What one plant did: the copy, the answers it changed, how many of those the parser
    could not read back, and the change it made to the focal-minus-reference mean answer
    before parsing (natural units; below ``value`` where the scale's ends clip it)."""

    frames: AnalysisFrames
    n_changed: int
    n_unparsed: int
    realised: float = 0.0


def answer_kinds(prompts: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every judgement and ranking task's outcome kind and answer settings, as the workflow
    parses them (:func:`cueaudit.decision.prompts.task_answers`)."""
    answers = task_answers({"prompts": prompts})
    return {t: a for t, a in answers.items() if task_spec(t).format in ("rate", "decide", "rank")}


def _rng(seed: int, *parts: object) -> np.random.Generator:
    key = zlib.crc32("/".join(str(p) for p in parts).encode())
    return np.random.default_rng(np.random.SeedSequence([seed, key]))


def _kind(kinds: Kinds, task: str) -> OutcomeKind:
    base = task.split("__", 1)[0]
    if base not in kinds:
        raise InputError("planted disparities", f"no answer settings for task {task!r}", "task")
    name, settings = kinds[base]
    return get_kind(name, settings)


def _reparse(changed: pl.DataFrame, values: list[Any], kinds: Kinds) -> pl.DataFrame:
    """The outcome columns of ``changed`` answers (one row each, with ``task``) after their new
    ``values`` are rendered in each task's mode and parsed back by its kind."""
    parts = []
    frame = changed.with_columns(pl.Series("_value", values, dtype=pl.Object))
    for task in frame["task"].unique().to_list():
        rows = frame.filter(pl.col("task") == task)
        kind = _kind(kinds, task)
        rendered = [kind.render(v) for v in rows["_value"].to_list()]
        responses = rows.select(*ANSWER_KEY).with_columns(
            completion=pl.Series([r["completion"] for r in rendered], dtype=pl.String),
            tool_calls=pl.Series([r["tool_calls"] for r in rendered], dtype=pl.String),
            constrained=pl.Series([r["constrained"] for r in rendered], dtype=pl.Boolean),
        )
        name, settings = kinds[task.split("__", 1)[0]]
        parsed = parse_responses(responses, name, settings)
        parts.append(parsed)
    return pl.concat(parts, how="diagonal_relaxed")


def _focal(frame: pl.DataFrame, spec: PlannedContrast, arm: str) -> pl.Expr:
    return (
        (pl.col("arm") == arm)
        & (pl.col("domain") == spec.domain)
        & (pl.col(DIMENSION_COLUMNS[spec.dimension]) == spec.focal)
    )


def _plant_judgements(
    frames: AnalysisFrames,
    spec: PlannedContrast,
    value: float,
    kinds: Kinds,
    arm: str,
    rng: np.random.Generator,
) -> Plant:
    j = frames.judgements.with_row_index("_row")
    hit = j.filter(
        _focal(j, spec, arm) & (pl.col("format") == spec.format) & pl.col("y").is_not_null()
    )
    y = hit["y"].to_numpy()
    if spec.format == "rate":
        moved = y + value
        new = np.clip(np.floor(moved) + (rng.random(len(y)) < moved - np.floor(moved)), 1, 5)
    else:
        share = float(np.mean(y)) if len(y) else 0.0
        if value >= 0:
            p = min(1.0, value / (1.0 - share)) if share < 1 else 0.0
            new = np.where((y == 0) & (rng.random(len(y)) < p), 1.0, y)
        else:
            p = min(1.0, -value / share) if share > 0 else 0.0
            new = np.where((y == 1) & (rng.random(len(y)) < p), 0.0, y)
    changed = new != y
    realised = float(np.mean(new - y)) if len(y) else 0.0
    rows = hit.filter(pl.Series(changed))
    if rows.is_empty():
        return Plant(frames, 0, 0, realised)
    parsed = _reparse(rows, new[changed].tolist(), kinds)
    answers = rows.select("_row", *ANSWER_KEY).join(
        parsed.select(*ANSWER_KEY, "answer"), on=list(ANSWER_KEY), how="left"
    )
    updated = np.asarray(j["y"].to_numpy(), dtype=np.float64).copy()
    updated[answers["_row"].to_numpy()] = answers["answer"].fill_null(np.nan).to_numpy()
    judgements = frames.judgements.with_columns(pl.Series("y", updated).fill_nan(None))
    unparsed = int(parsed["parse_error"].is_not_null().sum())
    planted = AnalysisFrames(judgements, frames.rankings, frames.probes)
    return Plant(planted, rows.height, unparsed, realised)


def _weak_order(ranks: Sequence[int]) -> list[list[int]]:
    """Candidates grouped by rank, best group first."""
    return [[i for i, r in enumerate(ranks) if r == level] for level in sorted(set(ranks))]


def _competition(groups: list[list[int]], n: int) -> list[int]:
    ranks = [0] * n
    placed = 0
    for group in groups:
        for i in group:
            ranks[i] = placed + 1
        placed += len(group)
    return ranks


def step(ranks: Sequence[int], candidate: int, up: bool = True) -> list[int]:
    """``ranks`` (competition) with ``candidate`` one step up (or down): in an answer without
    ties it changes places with its neighbour above (below); in an answer with ties it moves
    one step of the weak order: out of a tie it shares to just above (below) the rest of it,
    alone into the tie of the group above (below). Unchanged at the end."""
    groups = _weak_order(ranks)
    if not up:
        groups = groups[::-1]
    g = next(k for k, members in enumerate(groups) if candidate in members)
    if len(groups) == len(ranks):
        if g > 0:
            groups[g - 1], groups[g] = groups[g], groups[g - 1]
    elif len(groups[g]) > 1:
        groups[g].remove(candidate)
        groups.insert(g, [candidate])
    elif g > 0:
        groups[g - 1].append(candidate)
        del groups[g]
    if not up:
        groups = groups[::-1]
    return _competition(groups, len(ranks))


def _mid_points(ranks: Sequence[int]) -> np.ndarray:
    r = np.asarray(ranks, dtype=np.float64)
    counts = np.array([np.sum(r == v) for v in r])
    return BUNDLE_SIZE + 1 - (r + (counts - 1) / 2)


def _plant_rankings(
    frames: AnalysisFrames,
    spec: PlannedContrast,
    value: float,
    kinds: Kinds,
    arm: str,
    rng: np.random.Generator,
) -> Plant:
    column = DIMENSION_COLUMNS[spec.dimension]
    r = frames.rankings
    in_cell = (
        (pl.col("arm") == arm)
        & (pl.col("domain") == spec.domain)
        & pl.col("bundle_type").is_in(list(RANK_BUNDLE_TYPES))
    )
    answers = (
        r.filter(in_cell)
        .sort([*ANSWER_KEY, "position"])
        .group_by(ANSWER_KEY, maintain_order=True)
        .agg(pl.col("rank"), pl.col(column).alias("_group"), pl.len().alias("_n"))
        .filter(
            (pl.col("_n") == BUNDLE_SIZE)
            & (pl.col("rank").list.eval(pl.element().is_not_null()).list.all())
        )
    )
    ranks = [list(v) for v in answers["rank"].to_list()]
    groups = answers["_group"].to_list()
    focal = [[g == spec.focal for g in gs] for gs in groups]
    reference = [[g == spec.reference for g in gs] for gs in groups]
    eligible = [any(f) and not all(f) for f in focal]
    n_focal = sum(sum(f) for f, ok in zip(focal, eligible, strict=True) if ok)
    n_reference = sum(sum(f) for f, ok in zip(reference, eligible, strict=True) if ok)
    current = [list(x) for x in ranks]
    remaining = float(value)
    for _ in range(MAX_RANK_STEPS):
        if abs(remaining) < 1e-12 or not n_focal:
            break
        moved = []
        gain = 0.0
        for k, rk in enumerate(current):
            if not eligible[k]:
                moved.append(rk)
                continue
            new = rk
            order = sorted(
                np.flatnonzero(focal[k]), key=lambda i: rk[i], reverse=bool(remaining < 0)
            )
            for i in order:
                new = step(new, int(i), up=remaining > 0)
            delta = _mid_points(new) - _mid_points(rk)
            gain += delta[np.asarray(focal[k])].sum() / n_focal
            if n_reference:
                gain -= delta[np.asarray(reference[k])].sum() / n_reference
            moved.append(new)
        if abs(gain) < 1e-12:
            break
        p = min(1.0, remaining / gain)
        take = rng.random(len(current)) < p
        current = [m if t else c for m, c, t in zip(moved, current, take, strict=True)]
        remaining -= p * gain
    changed = [c != o for c, o in zip(current, ranks, strict=True)]
    realised = 0.0
    for k, (new, old) in enumerate(zip(current, ranks, strict=True)):
        if eligible[k] and new != old:
            delta = _mid_points(new) - _mid_points(old)
            realised += delta[np.asarray(focal[k])].sum() / n_focal
            if n_reference:
                realised -= delta[np.asarray(reference[k])].sum() / n_reference
    rows = answers.filter(pl.Series(changed)).select(*ANSWER_KEY)
    if rows.is_empty():
        return Plant(frames, 0, 0, realised)
    parsed = _reparse(rows, [c for c, ch in zip(current, changed, strict=True) if ch], kinds)
    unparsed = int(parsed["parse_error"].is_not_null().sum())
    complete = pl.col("ranks").list.len() == BUNDLE_SIZE
    replacement = (
        parsed.select(*ANSWER_KEY, "ranks")
        .with_columns(
            pl.when(complete)
            .then(pl.col("ranks"))
            .otherwise(pl.lit([None] * BUNDLE_SIZE, dtype=pl.List(pl.Int64))),
            pl.lit(list(range(1, BUNDLE_SIZE + 1))).alias("position"),
            pl.lit(True).alias("_planted"),
        )
        .explode("ranks", "position")
        .with_columns(pl.col("ranks").cast(pl.Int64), pl.col("position").cast(pl.Int64))
    )
    rule = (r["points_rule"].drop_nulls().to_list() or [POINTS_RULES[0]])[0]
    r = r.join(replacement, on=[*ANSWER_KEY, "position"], how="left")
    r = r.with_columns(
        pl.when(pl.col("_planted").fill_null(False))
        .then(pl.col("ranks"))
        .otherwise(pl.col("rank"))
        .alias("rank")
    )
    r = with_points(r, rule)
    tie = pl.when(pl.col("rank").is_null().any().over(ANSWER_KEY)).then(None)
    distinct = pl.col("rank").n_unique().over(ANSWER_KEY)
    r = r.with_columns(tie.otherwise(distinct < BUNDLE_SIZE).alias("tie"))
    r = r.select(frames.rankings.columns)
    return Plant(
        AnalysisFrames(frames.judgements, r, frames.probes), rows.height, unparsed, realised
    )


def plant_answers(
    frames: AnalysisFrames,
    spec: PlannedContrast,
    value: float,
    kinds: Kinds,
    *,
    arm: str = PRIMARY,
    seed: int = 0,
) -> Plant:
    """A copy of ``frames`` whose focal answers in ``spec``'s cell carry a preference of
    ``value`` (natural units), rendered and parsed as real answers (the module docstring)."""
    if spec.dimension not in DIMENSION_COLUMNS:
        raise InputError("planted disparities", f"unknown dimension {spec.dimension!r}")
    rng = _rng(seed, spec.domain, spec.format, spec.contrast, f"{value:.12g}")
    if spec.format in ("rate", "decide"):
        return _plant_judgements(frames, spec, value, kinds, arm, rng)
    if spec.format != "rank":
        raise InputError("planted disparities", f"unknown format {spec.format!r}", "format")
    return _plant_rankings(frames, spec, value, kinds, arm, rng)


def outcome_sd(frames: AnalysisFrames, domain: str, fmt: str, *, arm: str = PRIMARY) -> float:
    """The SD of the outcome a cell's fit analyses (CONTRASTS' ``outcome_sd``)."""
    y = design_of(cell_rows(frames.arm(arm), domain, fmt), fmt).y
    return float(np.std(y, ddof=1)) if len(y) > 1 else float("nan")


def default_estimator() -> Estimator:
    """The CONTRASTS table of :func:`estimate_contrasts` (labels do not matter here)."""
    return partial(estimate_contrasts, pre_registered=False)


def _rows(table: pl.DataFrame, contrast: str) -> dict[tuple[str, str, str], dict[str, object]]:
    rows = table.filter(pl.col("contrast") == contrast)
    return {(r["domain"], r["format"], r["estimator"]): r for r in rows.iter_rows(named=True)}


def _finite(value: object) -> float:
    return float("nan") if value is None else float(value)  # type: ignore[arg-type]


def _family_sd(
    rows: Mapping[tuple[str, str, str], Mapping[str, object]], domain: str, fmt: str
) -> float:
    """The outcome SD of a cell's family-estimator row (NaN without one)."""
    return _finite(rows.get((domain, fmt, FAMILY_ESTIMATOR), {}).get("outcome_sd"))


def _record(
    source: str,
    spec: PlannedContrast,
    estimator: str,
    size: float,
    sd: float,
    recovered: float,
    fit: Mapping[str, object],
    alpha: float,
    counts: tuple[int, int],
    realised: float,
) -> dict[str, object]:
    se = _finite(fit.get("se")) / sd
    df = _finite(fit.get("df"))
    ok = bool(np.isfinite(recovered) and np.isfinite(se) and se > 0 and df > 0)
    low, high = t_test(recovered, se, df).conf_int(1 - alpha) if ok else (np.nan, np.nan)
    covered = bool(low <= size <= high) if ok else None
    excludes_zero = bool(low > 0 or high < 0) if ok else None
    if not ok:
        verdict = "not estimable"  # no rows, no SE, or no planted size in this cell
    elif not covered:
        verdict = "not recovered"
    else:
        verdict = "recovered" if excludes_zero else "not resolved"
    return {
        "source": source,
        "domain": spec.domain,
        "format": spec.format,
        "contrast": spec.contrast,
        "estimator": estimator,
        "planted_sd": float(size),
        "planted": float(size) * sd,
        "realised_sd": realised / sd,
        "recovered_sd": recovered,
        "se_sd": se,
        "df": df,
        "ci_low_sd": low,
        "ci_high_sd": high,
        "covered": covered,
        "excludes_zero": excludes_zero,
        "verdict": verdict,
        "n_obs": fit.get("n_obs"),
        "n_changed": counts[0],
        "n_unparsed": counts[1],
    }


def _real_rows(
    frames: AnalysisFrames,
    prereg: Preregistration,
    sizes: Sequence[float],
    specs: Sequence[PlannedContrast],
    estimate: Estimator,
    kinds: Kinds,
    seed: int,
) -> list[dict[str, object]]:
    base = _rows(estimate(frames, prereg), specs[0].contrast)
    records = []
    for size in sizes:
        planted = frames
        counts: dict[tuple[str, str], tuple[int, int, float]] = {}
        for spec in specs:
            sd = _family_sd(base, spec.domain, spec.format)
            if np.isfinite(sd) and sd > 0:
                plant = plant_answers(planted, spec, size * sd, kinds, seed=seed)
                planted = plant.frames
                counts[(spec.domain, spec.format)] = (
                    plant.n_changed,
                    plant.n_unparsed,
                    plant.realised,
                )
        fits = _rows(estimate(planted, prereg), specs[0].contrast)
        for (domain, fmt, estimator), before in base.items():
            spec = next((s for s in specs if (s.domain, s.format) == (domain, fmt)), None)
            if spec is None:
                continue
            sd = _family_sd(base, domain, fmt)
            after = fits.get((domain, fmt, estimator), {})
            recovered = (_finite(after.get("estimate")) - _finite(before.get("estimate"))) / sd
            changed, unparsed, realised = counts.get((domain, fmt), (0, 0, np.nan))
            records.append(
                _record(
                    "real",
                    spec,
                    estimator,
                    size,
                    sd,
                    recovered,
                    after,
                    prereg.alpha,
                    (changed, unparsed),
                    realised,
                )
            )
    return records


def _simulated_rows(
    frames: AnalysisFrames,
    prereg: Preregistration,
    sizes: Sequence[float],
    specs: Sequence[PlannedContrast],
    estimate: Estimator,
    settings: SimulationSettings,
    seed: int,
) -> list[dict[str, object]]:
    """Simulated answers to the frames' prompts, without and with each size planted in the
    generative model. Every simulation shares its random numbers (one seed, one lapse rate,
    one judgement scale: those the largest plant needs), so the difference of the two
    estimates is the estimator's response to the plant, without the study's sampling error."""
    sds: dict[tuple[str, str], float] = {}
    for spec in specs:
        sd = outcome_sd(simulate_like(frames, settings, seed), spec.domain, spec.format)
        if np.isfinite(sd) and sd > 0:
            sds[(spec.domain, spec.format)] = sd

    def planted_at(size: float) -> dict[tuple[str, str, str], float]:
        return {
            (s.domain, s.format, s.contrast): size * sds[(s.domain, s.format)]
            for s in specs
            if (s.domain, s.format) in sds
        }

    largest = max(sizes, key=abs)

    def too_large(why: str) -> InputError:
        return InputError(
            "config",
            f"a planted size of {largest:g} SD is more than the simulated answers can carry "
            f"({why}): plant smaller sizes, or set decision.analysis.simulate: false to plant "
            "into the real answers only",
            "decision.analysis.planted_sizes",
        )

    try:
        room = settings.with_planted(planted_at(largest))
    except InputError as error:
        if error.source != SIMULATION_SOURCE:
            raise
        raise too_large(error.message) from error
    ordered = frames.rankings.sort(*ANSWER_KEY, "position")
    need = rank_lapse_needed(room, ordered, at_most_one=False)
    if need > 1:
        raise too_large(
            f"a ranking's first pick would need a lapse rate of {need:.2g}; at most about "
            f"{abs(largest) / need:.2g} SD fits"
        )
    lapse = max(settings.rank_lapse, min(1.0, need))
    common = replace(
        settings, rate_scale=room.rate_scale, decide_scale=room.decide_scale, rank_lapse=lapse
    )
    base = _rows(estimate(simulate_like(frames, common, seed), prereg), specs[0].contrast)
    records = []
    for size in sizes:
        model = replace(common, planted={**common.planted, **planted_at(size)})
        fits = _rows(estimate(simulate_like(frames, model, seed), prereg), specs[0].contrast)
        for (domain, fmt, estimator), after in fits.items():
            spec = next((s for s in specs if (s.domain, s.format) == (domain, fmt)), None)
            if spec is None:
                continue
            sd = sds.get((domain, fmt), float("nan"))
            before = base.get((domain, fmt, estimator), {})
            recovered = (_finite(after.get("estimate")) - _finite(before.get("estimate"))) / sd
            records.append(
                _record(
                    "simulated",
                    spec,
                    estimator,
                    size,
                    sd,
                    recovered,
                    after,
                    prereg.alpha,
                    (0, 0),
                    size * sd,
                )
            )
    return records


def planted_disparities(
    frames: AnalysisFrames,
    prereg: Preregistration,
    kinds: Kinds,
    *,
    sizes: Sequence[float] = SIZES,
    contrast: str = "black_vs_white",
    simulated: SimulationSettings | None = None,
    estimate: Estimator | None = None,
    seed: int = 0,
) -> pl.DataFrame:
    """The PLANTED table: each cell of the family with ``contrast``, each estimator and each
    size (in SD), for answers planted into the real frames (``source`` "real") and, with
    ``simulated`` settings, for simulated answers to the same prompts whose generative model
    carries the effect ("simulated"). ``kinds`` renders and parses each task's answers
    (:func:`answer_kinds`); ``estimate`` defaults to :func:`default_estimator`."""
    estimate = default_estimator() if estimate is None else estimate
    specs = [c for cell in family_cells(prereg).values() for c in cell if c.contrast == contrast]
    if not specs:
        raise InputError("planted disparities", f"no planned contrast {contrast!r}", "contrast")
    records = _real_rows(frames, prereg, sizes, specs, estimate, kinds, seed)
    if simulated is not None:
        records += _simulated_rows(frames, prereg, sizes, specs, estimate, simulated, seed)
    table = pl.DataFrame(records, schema=dict(PLANTED_SCHEMA))
    return table.sort(["source", "domain", "format", "estimator", "planted_sd"])
