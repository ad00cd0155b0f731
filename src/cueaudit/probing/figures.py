"""Figures of the construct-validity analysis: correlation heatmaps (paper Fig. 2, 6-9),
intergroup outcome ratios (Fig. 3, 10) and average outcomes by group (Fig. 4, 5).
Matplotlib's object API with the Agg canvas: no pyplot state, no display needed."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
from matplotlib import colormaps
from matplotlib.axes import Axes

from cueaudit.cues.vocabulary import NO_CUE
from cueaudit.errors import InputError
from cueaudit.plotting import empty_figure as _empty
from cueaudit.plotting import new_figure as _figure
from cueaudit.plotting import save_figure as _save
from cueaudit.probing.analysis.validity import (
    PAIR_COLUMNS,
    check_dimension,
    correlation_matrix,
    cue_sort_key,
    require_columns,
)
from cueaudit.probing.vocabulary import DIMENSION_GROUPS, Dimension, cue_label

logger = logging.getLogger(__name__)

MAX_FOOTNOTE_LINES = 12
BASELINE_MARK = "†"


def _group_label(group: str) -> str:
    return group[:1].upper() + group[1:]


def _task_label(task: str) -> str:
    return task.replace("_", " ").capitalize()


def _heatmap(ax: Axes, mat: np.ndarray, rows: list[str], cols: list[str], vmin: float) -> object:
    cmap = colormaps["viridis"].with_extremes(bad="lightgrey")
    im = ax.imshow(np.ma.masked_invalid(mat), cmap=cmap, vmin=vmin, vmax=1.0, aspect="equal")
    mid = (vmin + 1.0) / 2.0
    for i in range(mat.shape[0]):
        for j in range(mat.shape[1]):
            v = mat[i, j]
            text, color = (
                ("–", "black") if np.isnan(v) else (f"{v:.2f}", "white" if v < mid else "black")
            )
            ax.text(j, i, text, ha="center", va="center", fontsize=7, color=color)
    ax.set_xticks(range(len(cols)), [cue_label(c) for c in cols], rotation=45, ha="right")
    ax.set_yticks(range(len(rows)), [cue_label(c) for c in rows])
    ax.tick_params(labelsize=8)
    return im


def plot_correlation_heatmaps(
    averaged: pl.DataFrame,
    dimension: Dimension,
    path: str | Path,
    *,
    kind: Literal["within", "across"] = "within",
    rows: Literal["reference", "focal"] = "reference",
) -> None:
    """Fig. 2-style heatmaps of (Fisher-averaged) correlations, one column per task.

    ``within``: one row per group (focal first), cue × cue matrices with 1 on the diagonal.
    ``across``: one row of matrices with the ``rows`` group's cues as rows (default the
    reference group, as the paper's Figs. 8-9) and the other group's cues as columns.
    """
    dim = check_dimension(dimension)
    if kind not in ("within", "across"):
        raise InputError("figure request", "must be 'within' or 'across'", field="kind")
    if rows not in ("reference", "focal"):
        raise InputError("figure request", "must be 'reference' or 'focal'", field="rows")
    require_columns(averaged, ["task", *PAIR_COLUMNS, "r"], "correlations")
    focal, reference = DIMENSION_GROUPS[dim]
    what = "within-group" if kind == "within" else "cross-group"
    title = f"Pearson correlations of {what} response shifts ({dim})"
    tasks = sorted(set(averaged["task"].drop_nulls().to_list()))

    # (row label, group of matrix rows, group of matrix columns) per figure row
    if kind == "within":
        layout = [(f"{_group_label(g)}–{_group_label(g)}", g, g) for g in (focal, reference)]
    else:
        g_row, g_col = (reference, focal) if rows == "reference" else (focal, reference)
        layout = [(f"{_group_label(g_row)} prompts", g_row, g_col)]

    panels: dict[tuple[int, int], tuple[list[str], list[str], np.ndarray]] = {}
    for i, (_, g_row, g_col) in enumerate(layout):
        for j, task in enumerate(tasks):
            sub = averaged.filter(
                (pl.col("task") == task)
                & (
                    ((pl.col("group_a") == g_row) & (pl.col("group_b") == g_col))
                    | ((pl.col("group_a") == g_col) & (pl.col("group_b") == g_row))
                )
            )
            if sub.is_empty():
                continue
            r_cues, c_cues, mat = correlation_matrix(sub, g_row, g_col)
            if mat.size:
                panels[(i, j)] = (r_cues, c_cues, mat)
    layout = [row for i, row in enumerate(layout) if any(k[0] == i for k in panels)]
    keep = sorted({k[0] for k in panels})
    panels = {(keep.index(i), j): v for (i, j), v in panels.items()}
    if not panels:
        _empty(path, title, f"No {what} correlations to plot for {dim}.")
        return

    values = np.concatenate([m[~np.isnan(m)] for _, _, m in panels.values()])
    vmin = 0.0 if values.size == 0 or values.min() >= 0 else -1.0
    n_cues = max(max(len(r), len(c)) for r, c, _ in panels.values())
    side = max(2.8, 0.42 * n_cues + 1.4)
    fig = _figure(side * len(tasks) + 1.2, side * len(layout) + 0.6)
    axes = fig.subplots(len(layout), len(tasks), squeeze=False)
    im = None
    for i, (label, _, _) in enumerate(layout):
        for j, task in enumerate(tasks):
            ax = axes[i, j]
            if i == 0:
                ax.set_title(_task_label(task))
            if (i, j) not in panels:
                ax.set_axis_off()
                ax.text(0.5, 0.5, "no pairs", ha="center", va="center", transform=ax.transAxes)
                continue
            r_cues, c_cues, mat = panels[(i, j)]
            im = _heatmap(ax, mat, r_cues, c_cues, vmin)
            if j == 0:
                ax.set_ylabel(label)
            if kind == "across":
                ax.set_xlabel(f"{_group_label(layout[i][2])} prompts")
    fig.suptitle(title)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label="Pearson r")  # type: ignore[arg-type]
    _save(fig, path)


def _footnote_lines(omitted: pl.DataFrame, baseline_used: bool, reference: str) -> list[str]:
    lines = []
    if baseline_used:
        lines.append(f"{BASELINE_MARK} {reference} reference = no-cue baseline prompts.")
    if omitted.height:
        lines.append("Not shown (no ratio):")
        for rec in omitted.head(MAX_FOOTNOTE_LINES).iter_rows(named=True):
            note = rec.get("note") or "ratio undefined"
            lines.append(f"  {rec['model']} · {rec['task']} · {cue_label(rec['cue'])}: {note}")
        if omitted.height > MAX_FOOTNOTE_LINES:
            lines.append(f"  … and {omitted.height - MAX_FOOTNOTE_LINES} more")
    return lines


def plot_outcome_ratios(ratios: pl.DataFrame, path: str | Path) -> None:
    """Fig. 3-style plot: per task (columns), the ratio per cue (y) and model (colour) with
    horizontal CI bars and a dashed line at parity (1). Null ratios are listed in a footnote."""
    require_columns(ratios, ["model", "task", "cue", "ratio", "ci_low", "ci_high"], "ratios")
    frame = ratios
    for col in ("note", "reference_cue", "focal", "reference"):
        if col not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias(col))
    focal = next(iter(frame["focal"].drop_nulls()), None)
    reference = next(iter(frame["reference"].drop_nulls()), None)
    name = f"{_group_label(focal)}/{_group_label(reference)}" if focal and reference else ""
    title = f"Intergroup {name} outcome ratios".replace("  ", " ")
    shown = frame.filter(pl.col("ratio").is_not_null() & pl.col("ratio").is_finite())
    omitted = frame.filter(~(pl.col("ratio").is_not_null() & pl.col("ratio").is_finite()))
    baseline_cues = set(
        shown.filter((pl.col("reference_cue") == NO_CUE) & (pl.col("cue") != NO_CUE))["cue"]
    )
    foot = _footnote_lines(omitted, bool(baseline_cues), _group_label(reference or "reference"))
    if shown.is_empty():
        _empty(path, title, "\n".join(["No outcome ratios to plot.", *foot]))
        return

    tasks = sorted(set(shown["task"].to_list()))
    models = sorted(set(shown["model"].to_list()))
    cues = sorted(set(shown["cue"].to_list()), key=cue_sort_key)
    ypos = {c: i for i, c in enumerate(cues)}
    colors = colormaps["tab10"]
    spread = 0.6
    offsets = np.linspace(-spread / 2, spread / 2, len(models)) if len(models) > 1 else [0.0]

    foot_h = 0.17 * len(foot)
    height = max(2.5, 0.35 * len(cues) * max(1.0, len(models) / 3) + 1.4) + foot_h
    fig = _figure(3.4 * len(tasks) + 1.0, height)
    if foot:
        fig.get_layout_engine().set(rect=(0.0, foot_h / height, 1.0, 1.0 - foot_h / height))  # type: ignore[union-attr]
    axes = fig.subplots(1, len(tasks), sharey=True, squeeze=False)[0]
    for ax, task in zip(axes, tasks, strict=True):
        for k, model in enumerate(models):
            sub = shown.filter((pl.col("task") == task) & (pl.col("model") == model))
            if sub.is_empty():
                continue
            x = sub["ratio"].to_numpy()
            y = np.array([ypos[c] for c in sub["cue"]]) + offsets[k]
            lo = sub["ci_low"].cast(pl.Float64).fill_null(np.nan).to_numpy()
            hi = sub["ci_high"].cast(pl.Float64).fill_null(np.nan).to_numpy()
            xerr = np.clip(np.nan_to_num(np.vstack([x - lo, hi - x]), nan=0.0), 0.0, None)
            ax.errorbar(
                x, y, xerr=xerr, fmt="o", ms=4, capsize=2, lw=1, color=colors(k % 10), label=model
            )
        ax.axvline(1.0, ls="--", color="grey", lw=1)
        ax.set_title(_task_label(task))
        ax.set_xlabel(f"{name} ratio" if name else "Outcome ratio")
        ax.grid(axis="x", alpha=0.3)
    labels = [cue_label(c) + (f" {BASELINE_MARK}" if c in baseline_cues else "") for c in cues]
    axes[0].set_yticks(range(len(cues)), labels)
    axes[0].set_ylim(len(cues) - 0.5, -0.5)
    axes[0].set_ylabel("Cue")
    handles, labs = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labs:
                handles.append(h)
                labs.append(lab)
    fig.legend(handles, labs, loc="outside right upper", title="Model", fontsize=8)
    fig.suptitle(title)
    if foot:
        fig.text(0.01, foot_h / height, "\n".join(foot), ha="left", va="top", fontsize=7)
    _save(fig, path)


def plot_group_means(means: pl.DataFrame, dimension: Dimension, path: str | Path) -> None:
    """Fig. 4/5-style plot: per model (rows) and task (columns), the mean outcome per cue (y)
    and group (colour) with CI bars; the no-cue baseline is a shaded band (its CI) with a
    line at its mean. Cells without a mean are listed in a footnote."""
    dim = check_dimension(dimension)
    require_columns(
        means, ["model", "task", "cue", "group", "mean", "ci_low", "ci_high"], "group means"
    )
    frame = means if "note" in means.columns else means.with_columns(note=pl.lit(None))
    title = f"Average outcomes by {dim}"
    valid = pl.col("mean").is_not_null() & pl.col("mean").is_finite()
    shown = frame.filter(valid)
    omitted = frame.filter(~valid)
    foot = []
    if omitted.height:
        foot.append("Not shown (no mean):")
        for rec in omitted.head(MAX_FOOTNOTE_LINES).iter_rows(named=True):
            note = rec.get("note") or "mean undefined"
            foot.append(
                f"  {rec['model']} · {rec['task']} · {cue_label(rec['cue'])} · {rec['group']}: "
                f"{note}"
            )
        if omitted.height > MAX_FOOTNOTE_LINES:
            foot.append(f"  … and {omitted.height - MAX_FOOTNOTE_LINES} more")
    cued = shown.filter(pl.col("cue") != NO_CUE)
    if cued.is_empty():
        _empty(path, title, "\n".join([f"No cued group means to plot for {dim}.", *foot]))
        return
    tasks = sorted(set(shown["task"].to_list()))
    models = sorted(set(shown["model"].to_list()))
    cues = sorted(set(cued["cue"].to_list()), key=cue_sort_key)
    groups = [g for g in DIMENSION_GROUPS[dim] if g in set(cued["group"].to_list())]
    ypos = {c: i for i, c in enumerate(cues)}
    colors = colormaps["tab10"]
    offsets = np.linspace(-0.15, 0.15, len(groups)) if len(groups) > 1 else [0.0]
    foot_h = 0.17 * len(foot)
    cell_h = max(2.0, 0.35 * len(cues) + 1.0)
    height = cell_h * len(models) + 0.8 + foot_h
    fig = _figure(3.4 * len(tasks) + 1.2, height)
    if foot:
        fig.get_layout_engine().set(rect=(0.0, foot_h / height, 1.0, 1.0 - foot_h / height))  # type: ignore[union-attr]
    axes = fig.subplots(len(models), len(tasks), squeeze=False)
    for i, model in enumerate(models):
        for j, task in enumerate(tasks):
            ax = axes[i, j]
            cell = shown.filter((pl.col("model") == model) & (pl.col("task") == task))
            base = cell.filter(pl.col("cue") == NO_CUE)
            if base.height:
                b = base.row(0, named=True)
                if b["ci_low"] is not None and b["ci_high"] is not None:
                    ax.axvspan(b["ci_low"], b["ci_high"], color="grey", alpha=0.25, lw=0)
                ax.axvline(b["mean"], color="grey", ls="--", lw=1, label="No cue (95% CI)")
            for k, group in enumerate(groups):
                sub = cell.filter((pl.col("group") == group) & (pl.col("cue") != NO_CUE))
                if sub.is_empty():
                    continue
                x = sub["mean"].to_numpy()
                y = np.array([ypos[c] for c in sub["cue"]]) + offsets[k]
                lo = sub["ci_low"].cast(pl.Float64).fill_null(np.nan).to_numpy()
                hi = sub["ci_high"].cast(pl.Float64).fill_null(np.nan).to_numpy()
                xerr = np.clip(np.nan_to_num(np.vstack([x - lo, hi - x]), nan=0.0), 0.0, None)
                ax.errorbar(x, y, xerr=xerr, fmt="o", ms=4, capsize=2, lw=1,
                            color=colors(k % 10), label=_group_label(group))  # fmt: skip
            ax.set_yticks(range(len(cues)), [cue_label(c) for c in cues] if j == 0 else [])
            ax.set_ylim(len(cues) - 0.5, -0.5)
            ax.grid(axis="x", alpha=0.3)
            if i == 0:
                ax.set_title(_task_label(task))
            if j == 0:
                ax.set_ylabel(model)
            if i == len(models) - 1:
                ax.set_xlabel("Mean outcome")
    handles: list[object] = []
    labels: list[str] = []
    for ax in axes.ravel():
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="outside right upper", fontsize=8)  # type: ignore[arg-type]
    fig.suptitle(title)
    if foot:
        fig.text(0.01, foot_h / height, "\n".join(foot), ha="left", va="top", fontsize=7)
    _save(fig, path)
