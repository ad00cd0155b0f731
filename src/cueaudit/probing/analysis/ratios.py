"""Intergroup outcome ratios (paper Fig. 3 and 10) and group means (Figs. 4-5), with percentile
CIs from a cluster bootstrap over base prompts computed on prompt-level sufficient statistics."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import polars as pl

from cueaudit.cues.vocabulary import NO_CUE
from cueaudit.errors import InputError
from cueaudit.probing.analysis.validity import (
    OBSERVATIONS,
    check_dimension,
    check_observations,
    cue_sort_key,
    series_layout,
    series_sort_key,
)
from cueaudit.probing.vocabulary import DIMENSION_GROUPS, Dimension
from cueaudit.stats.bootstrap import ClusterBootstrap, percentile_ci

RATIO_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "task": pl.String(),
    "cue": pl.String(),
    "dimension": pl.String(),
    "focal": pl.String(),
    "reference": pl.String(),
    "ratio": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "n_prompts": pl.Int64(),
    "n_focal": pl.Int64(),
    "n_reference": pl.Int64(),
    "reference_cue": pl.String(),
    "note": pl.String(),
}
MEANS_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "task": pl.String(),
    "cue": pl.String(),
    "group": pl.String(),
    "mean": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "n": pl.Int64(),
    "n_prompts": pl.Int64(),
    "note": pl.String(),
}


def _check_boot(n_boot: int, level: float) -> None:
    if n_boot < 0:
        raise InputError("analysis request", "must be >= 0", field="n_boot")
    if not 0.0 < level < 1.0:
        raise InputError("analysis request", "must lie strictly between 0 and 1", field="level")


def prompt_stats(con: duckdb.DuckDBPyConnection, dimension: Dimension) -> pl.DataFrame:
    """Per model, task, cue, group and base_id: ``total`` (sum of parsed outcomes), ``parsed``
    (their count) and ``rows`` (all responses). The no-cue baseline has group 'none'."""
    dim = check_dimension(dimension)
    check_observations(con, ["model", "task", "cue", "base_id", "outcome", dim])
    sql = f"""
        WITH obs AS (
            SELECT CAST(model AS VARCHAR) AS model, CAST(task AS VARCHAR) AS task,
                   CAST(cue AS VARCHAR) AS cue,
                   CASE WHEN cue = $none THEN $none ELSE CAST("{dim}" AS VARCHAR) END AS grp,
                   CAST(base_id AS VARCHAR) AS base_id,
                   CASE WHEN isfinite(CAST(outcome AS DOUBLE)) THEN CAST(outcome AS DOUBLE) END
                       AS y
            FROM {OBSERVATIONS}
            WHERE cue = $none OR "{dim}" IS NOT NULL
        )
        SELECT model, task, cue, grp AS "group", base_id,
               COALESCE(SUM(y), 0.0) AS total, COUNT(y) AS parsed, COUNT(*) AS "rows"
        FROM obs
        GROUP BY model, task, cue, grp, base_id
        ORDER BY model, task, cue, grp, base_id
    """
    return con.sql(sql, params={"none": NO_CUE}).pl()


@dataclass(frozen=True)
class _Block:
    """Sufficient statistics of one model and task: prompts × (cue, group) series."""

    model: str
    task: str
    series: list[tuple[str, str]]
    total: np.ndarray  # P × k sums of parsed outcomes
    parsed: np.ndarray  # P × k counts of parsed outcomes

    def index(self, cue: str, group: str) -> int | None:
        try:
            return self.series.index((cue, group))
        except ValueError:
            return None


def _blocks(stats: pl.DataFrame) -> Iterator[_Block]:
    parts = stats.partition_by(["model", "task"], as_dict=True, maintain_order=True)
    for key in sorted(parts, key=lambda t: (str(t[0]), str(t[1]))):
        part = parts[key]
        series, row, col = series_layout(part)
        shape = (int(row.max()) + 1, len(series))
        total, parsed = np.zeros(shape), np.zeros(shape)
        total[row, col] = part["total"].to_numpy()
        parsed[row, col] = part["parsed"].to_numpy()
        yield _Block(str(key[0]), str(key[1]), series, total, parsed)


def _cell_replicates(
    block: _Block, cells: Sequence[Sequence[int]], boot: ClusterBootstrap
) -> list[np.ndarray]:
    """Replicate means for each cell (a tuple of series), resampling the base prompts with a
    parsed outcome in any series of the cell; cells sharing those prompts share one draw."""
    groups: dict[bytes, list[int]] = {}
    masks: list[np.ndarray] = []
    for c, cell in enumerate(cells):
        mask = block.parsed[:, list(cell)].sum(axis=1) > 0
        masks.append(mask)
        groups.setdefault(mask.tobytes(), []).append(c)
    result: list[np.ndarray] = [np.empty((boot.n_boot, 0))] * len(cells)
    for members in groups.values():
        mask = masks[members[0]]
        cols = sorted({s for c in members for s in cells[c]})
        pos = {s: i for i, s in enumerate(cols)}
        means = boot.replicate_means(block.total[mask][:, cols], block.parsed[mask][:, cols])
        for c in members:
            result[c] = means[:, [pos[s] for s in cells[c]]]
    return result


def _undefined_note(n_bad: int, n_boot: int) -> str | None:
    if n_bad == 0:
        return None
    return f"{n_bad} of {n_boot} bootstrap replicates undefined and dropped from the CI"


@dataclass(frozen=True)
class _RatioPlan:
    """Which series of a block a cue's ratio compares (``note`` set when it cannot)."""

    cue: str
    f: int | None
    r: int | None
    ref_cue: str
    note: str | None


def _cues(block: _Block) -> list[str]:
    return sorted({c for c, _ in block.series if c != NO_CUE}, key=cue_sort_key)


def _plan(block: _Block, cue: str, focal: str, reference: str) -> _RatioPlan:
    """Focal and reference series of a cue: the cue's own reference group if it carries one,
    else (focal-only cues such as dialect) the no-cue baseline of the same model and task."""
    f, r = block.index(cue, focal), block.index(cue, reference)
    if f is None:
        return _RatioPlan(cue, None, r, cue, f"cue carries no {focal} prompts")
    if r is not None:
        return _RatioPlan(cue, f, r, cue, None)
    base = block.index(NO_CUE, NO_CUE)
    note = None if base is not None else "cue carries no reference group and no baseline exists"
    return _RatioPlan(cue, f, base, NO_CUE, note)


def outcome_ratios(
    con: duckdb.DuckDBPyConnection,
    dimension: Dimension,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> pl.DataFrame:
    """Focal/reference mean-outcome ratio per model, task and cue (seeds pooled), with a
    percentile CI from a cluster bootstrap over base prompts. A cue that carries only the
    focal group (e.g. dialect) is compared with the no-cue baseline (``reference_cue``
    'none'). Undefined ratios are null with a ``note``."""
    dim = check_dimension(dimension)
    _check_boot(n_boot, level)
    focal, reference = DIMENSION_GROUPS[dim]
    boot = ClusterBootstrap(n_boot, seed)
    records: list[dict[str, object]] = []
    for block in _blocks(prompt_stats(con, dim)):
        plans = [_plan(block, cue, focal, reference) for cue in _cues(block)]
        todo = [p for p in plans if p.note is None]
        reps = _cell_replicates(block, [(p.f, p.r) for p in todo], boot)  # type: ignore[misc]
        rep_of = {p.cue: rep for p, rep in zip(todo, reps, strict=True)}
        for p in plans:
            n_f = int(block.parsed[:, p.f].sum()) if p.f is not None else 0
            n_r = int(block.parsed[:, p.r].sum()) if p.r is not None else 0
            rec: dict[str, object] = {
                "model": block.model,
                "task": block.task,
                "cue": p.cue,
                "dimension": dim,
                "focal": focal,
                "reference": reference,
                "ratio": None,
                "ci_low": None,
                "ci_high": None,
                "n_prompts": 0,
                "n_focal": n_f,
                "n_reference": n_r,
                "reference_cue": p.ref_cue,
                "note": p.note,
            }
            records.append(rec)
            if p.f is None or p.r is None:
                continue
            rec["n_prompts"] = int(((block.parsed[:, p.f] + block.parsed[:, p.r]) > 0).sum())
            if n_f == 0:
                rec["note"] = f"no parsed outcomes for {focal}"
                continue
            if n_r == 0:
                rec["note"] = f"no parsed outcomes for the reference ({p.ref_cue})"
                continue
            mean_f = block.total[:, p.f].sum() / n_f
            mean_r = block.total[:, p.r].sum() / n_r
            if mean_r == 0:
                rec["note"] = "reference mean is 0"
                continue
            rec["ratio"] = float(mean_f / mean_r)
            rep = rep_of[p.cue]
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio_reps = rep[:, 0] / rep[:, 1]
            ratio_reps[~np.isfinite(ratio_reps)] = np.nan
            rec["ci_low"], rec["ci_high"], n_bad = percentile_ci(ratio_reps, level)
            rec["note"] = _undefined_note(n_bad, n_boot)
    return pl.DataFrame(records, schema=RATIO_SCHEMA)


def group_means(
    con: duckdb.DuckDBPyConnection,
    dimension: Dimension,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> pl.DataFrame:
    """Mean outcome per model, task, cue and group (seeds pooled) with a cluster-bootstrap
    percentile CI; the no-cue baseline is the row with cue and group 'none'."""
    dim = check_dimension(dimension)
    _check_boot(n_boot, level)
    boot = ClusterBootstrap(n_boot, seed)
    records: list[dict[str, object]] = []
    for block in _blocks(prompt_stats(con, dim)):
        reps = _cell_replicates(block, [(i,) for i in range(len(block.series))], boot)
        for i, (cue, group) in enumerate(block.series):
            n = int(block.parsed[:, i].sum())
            rec: dict[str, object] = {
                "model": block.model,
                "task": block.task,
                "cue": cue,
                "group": group,
                "mean": None,
                "ci_low": None,
                "ci_high": None,
                "n": n,
                "n_prompts": int((block.parsed[:, i] > 0).sum()),
                "note": None,
            }
            if n == 0:
                rec["note"] = "no parsed outcomes"
            else:
                rec["mean"] = float(block.total[:, i].sum() / n)
                rec["ci_low"], rec["ci_high"], n_bad = percentile_ci(reps[i][:, 0], level)
                rec["note"] = _undefined_note(n_bad, n_boot)
            records.append(rec)
    out = pl.DataFrame(records, schema=MEANS_SCHEMA)
    return _sort_means(out)


def _sort_means(frame: pl.DataFrame) -> pl.DataFrame:
    if frame.is_empty():
        return frame
    keys = sorted(
        set(zip(frame["cue"].to_list(), frame["group"].to_list(), strict=True)),
        key=lambda s: (cue_sort_key(s[0]), series_sort_key(s[0], s[1])[0]),
    )
    rank = {f"{c}\x1f{g}": i for i, (c, g) in enumerate(keys)}
    key = pl.concat_str([pl.col("cue"), pl.col("group")], separator="\x1f")
    return (
        frame.with_columns(_rank=key.replace_strict(rank, return_dtype=pl.Int64))
        .sort("model", "task", "_rank")
        .drop("_rank")
    )
