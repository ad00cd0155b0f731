"""Figures of the decision audit: the planned contrasts as a forest in SD units with their
equivalence margins, planted against recovered disparities, the first-listed gain beside the
demographic rank contrasts, tie and recognition rates by bundle type, the contrasts per
model as small multiples, and the specification curve with its indicator panel.

The style and saving are the project's (:mod:`cueaudit.plotting`: matplotlib's object
API on the Agg canvas, PNG, or PDF plus PNG). Every function draws what is finite and says what
it could not draw: an estimate that is NaN (a model at the tiny default size parses too few
answers) is labelled "not estimated", and a table without rows gives a figure that says "no
data" instead of an error.

One module on purpose: the figures share one style, one set of colour and marker meanings and
the same empty-table and not-estimated handling; one function per figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import polars as pl
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from cueaudit.decision.analysis.fitters import FAMILY_ESTIMATOR, FITTERS
from cueaudit.decision.analysis.frames import PRIMARY
from cueaudit.decision.analysis.nonresponse import COUNT_COLUMNS, MIXED, summarise
from cueaudit.decision.analysis.specification_curve import CHOICES, POOLED
from cueaudit.decision.design import BUNDLE_TYPES, GENDERS, RACES
from cueaudit.decision.formats import FORMATS, PROBES
from cueaudit.errors import InputError
from cueaudit.plotting import empty_figure as _empty
from cueaudit.plotting import new_figure as _figure
from cueaudit.plotting import save_figure as _save

NO_DATA: Final = "no data"
CONTRAST_ORDER: Final = ("black_vs_white", "hispanic_vs_white", "asian_vs_white", "female_vs_male")
MARGIN_COLOUR: Final = "#d9d9d9"
LARGEST: Final = "largest |demographic|"
_Z: Final = 1.959963984540054


def _require(frame: pl.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{name} table", f"missing columns {missing}", missing[0])


def _floats(frame: pl.DataFrame, column: str) -> np.ndarray:
    """A column as float64 with null as NaN (absent columns are all NaN)."""
    if column not in frame.columns:
        return np.full(frame.height, np.nan)
    return frame[column].cast(pl.Float64, strict=False).fill_null(np.nan).to_numpy()


def _interval_sd(frame: pl.DataFrame) -> tuple[float, float, float]:
    """The first row's estimate and CI in SD units."""
    low, est, high = (
        float(_floats(frame, c)[0]) for c in ("ci_low_sd", "estimate_sd", "ci_high_sd")
    )
    return est, low, high


def _xerr(estimate: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    return np.clip(np.nan_to_num(np.vstack([estimate - low, high - estimate]), nan=0.0), 0, None)


def _rank(value: str, known: Sequence[str]) -> tuple[int, str]:
    return (known.index(value) if value in known else len(known), value)


def _order(values: Sequence[str], known: Sequence[str]) -> list[str]:
    return sorted(set(values), key=lambda v: _rank(v, known))


def _domains(values: Sequence[str]) -> list[str]:
    return sorted(set(values), key=lambda d: (d == "all", d))


def _label(value: str) -> str:
    return value.replace("_", " ")


def _contrast_label(row: dict[str, object]) -> str:
    focal, reference = row.get("focal"), row.get("reference")
    if focal and reference:
        return f"{focal} − {reference}"
    return _label(str(row["contrast"]))


# --- contrasts -------------------------------------------------------------------------------
def plot_contrast_forest(contrasts: pl.DataFrame, path: str | Path, *, alpha: float = 0.05) -> None:
    """The in-family contrasts in SD units with 95% CIs, one panel per format and one row per
    domain × contrast. Filled markers are BH-significant (``q_value < alpha``); the grey band
    is the equivalence margin in SD units (``margin / outcome_sd``; none for Decide); a
    contrast that is not significant is labelled with its MDE in SD units."""
    title = "Planned contrasts (SD units, 95% CI)"
    _require(contrasts, ["domain", "format", "contrast", "estimate_sd"], "contrasts")
    rows = contrasts
    if "in_family" in rows.columns:
        rows = rows.filter(pl.col("in_family").fill_null(False))
    elif "estimator" in rows.columns:
        rows = rows.filter(pl.col("estimator") == FAMILY_ESTIMATOR)
    if rows.is_empty():
        _empty(path, title, NO_DATA)
        return
    formats = _order(rows["format"].to_list(), FORMATS)
    keys = sorted(
        set(zip(rows["domain"].to_list(), rows["contrast"].to_list(), strict=True)),
        key=lambda k: (k[0], *_rank(k[1], CONTRAST_ORDER)),
    )
    ypos = {k: i for i, k in enumerate(keys)}
    labels = {}
    for row in rows.iter_rows(named=True):
        labels[(row["domain"], row["contrast"])] = f"{row['domain']} · {_contrast_label(row)}"
    fig = _figure(3.3 * len(formats) + 1.8, 0.32 * len(keys) + 1.6)
    axes = fig.subplots(1, len(formats), sharey=True, squeeze=False)[0]
    for ax, fmt in zip(axes, formats, strict=True):
        _forest_panel(ax, rows.filter(pl.col("format") == fmt), ypos, alpha)
        ax.set_title(fmt.capitalize())
        ax.set_xlabel("Estimate / SD of the outcome")
    axes[0].set_yticks(range(len(keys)), [labels[k] for k in keys], fontsize=8)
    axes[0].set_ylim(len(keys) - 0.5, -0.5)
    handles = [
        Line2D([], [], marker="o", ls="", color="black", label=f"BH q < {alpha:g}"),
        Line2D([], [], marker="o", ls="", color="black", mfc="white", label="not significant"),
        Patch(color=MARGIN_COLOUR, label="equivalence margin"),
    ]
    fig.legend(handles=handles, loc="outside right upper", fontsize=8)
    fig.suptitle(title)
    _save(fig, path)


def _forest_panel(
    ax: Axes, rows: pl.DataFrame, ypos: dict[tuple[str, str], int], alpha: float
) -> None:
    est = _floats(rows, "estimate_sd")
    low, high = _floats(rows, "ci_low_sd"), _floats(rows, "ci_high_sd")
    sd = _floats(rows, "outcome_sd")
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = np.where(sd > 0, _floats(rows, "margin") / sd, np.nan)
        mde = np.where(sd > 0, _floats(rows, "mde") / sd, np.nan)
    q = _floats(rows, "q_value")
    y = np.array([ypos[(d, c)] for d, c in zip(rows["domain"], rows["contrast"], strict=True)])
    for i in range(rows.height):
        if np.isfinite(margin[i]) and margin[i] > 0:
            ax.barh(y[i], 2 * margin[i], left=-margin[i], height=0.7, color=MARGIN_COLOUR, lw=0)
    ax.axvline(0.0, color="grey", lw=1, ls="--")
    finite = np.isfinite(est)
    significant = finite & (q < alpha)
    err = _xerr(est, low, high)
    for mask, face in ((significant, "black"), (finite & ~significant, "white")):
        if mask.any():
            ax.errorbar(
                est[mask],
                y[mask],
                xerr=err[:, mask],
                fmt="o",
                ms=4,
                capsize=2,
                lw=1,
                color="black",
                mfc=face,
            )
    for i in np.flatnonzero(finite & ~significant & np.isfinite(mde)):
        right = high[i] if np.isfinite(high[i]) else est[i]
        ax.annotate(
            f"MDE {mde[i]:.2f}",
            (right, y[i]),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=6,
            color="dimgrey",
        )
    for i in np.flatnonzero(~finite):
        ax.text(0.0, y[i], "not estimated", ha="center", va="center", fontsize=6, color="dimgrey")
    ax.grid(axis="x", alpha=0.3)


# --- planted ---------------------------------------------------------------------------------
def plot_planted(planted: pl.DataFrame, path: str | Path) -> None:
    """Recovered against planted disparities (SD units) with 95% CIs and the identity line, one
    panel per source (simulated, real), coloured by format and estimator."""
    title = "Planted disparities: recovered against planted (SD units, 95% CI)"
    _require(planted, ["source", "format", "planted_sd", "recovered_sd"], "planted")
    if planted.is_empty():
        _empty(path, title, NO_DATA)
        return
    sources = _order(planted["source"].to_list(), ("simulated", "real"))
    if "estimator" not in planted.columns:
        planted = planted.with_columns(estimator=pl.lit(FAMILY_ESTIMATOR))
    series = [
        (fmt, estimator)
        for fmt in _order(planted["format"].to_list(), FORMATS)
        for estimator in _order(planted["estimator"].to_list(), tuple(FITTERS))
        if not planted.filter(
            (pl.col("format") == fmt) & (pl.col("estimator") == estimator)
        ).is_empty()
    ]
    colours = colormaps["tab10"]
    fig = _figure(4.0 * len(sources) + 1.4, 4.0)
    axes = fig.subplots(1, len(sources), squeeze=False)[0]
    for ax, source in zip(axes, sources, strict=True):
        part = planted.filter(pl.col("source") == source)
        x_all, y_all = _floats(part, "planted_sd"), _floats(part, "recovered_sd")
        values = np.concatenate(
            [x_all, y_all, _floats(part, "ci_low_sd"), _floats(part, "ci_high_sd")]
        )
        values = values[np.isfinite(values)]
        if not np.isfinite(y_all).any():
            ax.text(0.5, 0.5, "not estimated", ha="center", va="center", transform=ax.transAxes)
        span = (min(0.0, *values), max(0.0, *values)) if values.size else (0.0, 1.0)
        spread = 0.015 * (span[1] - span[0] or 1.0)
        ax.plot(span, span, color="grey", ls="--", lw=1, label="identity")
        missing = []
        for k, (fmt, estimator) in enumerate(series):
            sub = part.filter((pl.col("format") == fmt) & (pl.col("estimator") == estimator))
            name = fmt if estimator == FAMILY_ESTIMATOR else f"{fmt} ({estimator})"
            x, y = _floats(sub, "planted_sd"), _floats(sub, "recovered_sd")
            if not np.isfinite(y).all():
                missing.append(name)
            if not np.isfinite(y).any():
                continue
            err = _xerr(y, _floats(sub, "ci_low_sd"), _floats(sub, "ci_high_sd"))
            shift = (k - (len(series) - 1) / 2) * spread
            ax.errorbar(
                x + shift,
                y,
                yerr=err,
                fmt="o",
                ms=4,
                capsize=2,
                lw=1,
                color=colours(k % 10),
                label=name,
            )
        if missing and np.isfinite(y_all).any():
            ax.text(
                0.98,
                0.02,
                "not estimated: " + ", ".join(missing),
                ha="right",
                va="bottom",
                fontsize=7,
                color="dimgrey",
                transform=ax.transAxes,
            )
        ax.set_title(source.capitalize())
        ax.set_xlabel("Planted (SD)")
        ax.set_ylabel("Recovered (SD)")
        ax.grid(alpha=0.3)
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="outside right upper", fontsize=8)
    fig.suptitle(title)
    _save(fig, path)


# --- position --------------------------------------------------------------------------------
def plot_position_vs_demographic(
    position: pl.DataFrame, contrasts: pl.DataFrame | None, path: str | Path
) -> None:
    """The first-listed gain beside the demographic rank contrasts (``lmm`` rows) of each
    domain in SD units (left), and the difference |position| − |largest demographic| with its
    CI (right)."""
    title = "First-listed gain against demographic rank contrasts (SD units, 95% CI)"
    _require(position, ["domain", "estimate_sd", "ci_low_sd", "ci_high_sd"], "position")
    if position.is_empty():
        _empty(path, title, NO_DATA)
        return
    ranked = pl.DataFrame()
    if contrasts is not None and not contrasts.is_empty():
        _require(contrasts, ["domain", "format", "contrast", "estimate_sd"], "contrasts")
        ranked = contrasts.filter(pl.col("format") == "rank")
        if "estimator" in ranked.columns:
            ranked = ranked.filter(pl.col("estimator") == FAMILY_ESTIMATOR)
    domains = _domains(position["domain"].to_list())
    named = _order(ranked["contrast"].to_list(), CONTRAST_ORDER) if ranked.height else []
    rows: list[tuple[str, str, float, float, float]] = []  # (domain, series, est, low, high)
    for domain in domains:
        p = position.filter(pl.col("domain") == domain)
        rows.append((domain, "first listed", *_interval_sd(p)))
        for contrast in named:
            c = ranked.filter((pl.col("domain") == domain) & (pl.col("contrast") == contrast))
            if c.height:
                rows.append((domain, contrast, *_interval_sd(c)))
        largest = float(_floats(p, "largest_demographic_sd")[0])
        if domain == "all" and np.isfinite(largest):
            half = _Z * float(_floats(p, "largest_se_sd")[0])
            rows.append((domain, LARGEST, largest, largest - half, largest + half))
    has_difference = (
        "difference_sd" in position.columns
        and np.isfinite(_floats(position, "difference_sd")).any()
    )
    fig = _figure(9.5 if has_difference else 6.5, 0.28 * len(rows) + 1.8)
    axes = fig.subplots(
        1, 2 if has_difference else 1, squeeze=False, width_ratios=[2, 1] if has_difference else [1]
    )[0]
    series = ["first listed", *named, LARGEST]
    colours = colormaps["tab10"]
    ax = axes[0]
    for k, name in enumerate(series):
        idx = [i for i, r in enumerate(rows) if r[1] == name]
        est = np.array([rows[i][2] for i in idx])
        if not np.isfinite(est).any():
            continue
        err = _xerr(est, np.array([rows[i][3] for i in idx]), np.array([rows[i][4] for i in idx]))
        ax.errorbar(
            est,
            idx,
            xerr=err,
            fmt="s" if k == 0 else "o",
            ms=4,
            capsize=2,
            lw=1,
            color="black" if k == 0 else colours(k % 10),
            label=_label(name),
        )
    for i, r in enumerate(rows):
        if not np.isfinite(r[2]):
            ax.text(0.0, i, "not estimated", ha="center", va="center", fontsize=6, color="dimgrey")
    ax.axvline(0.0, color="grey", ls="--", lw=1)
    ax.set_yticks(range(len(rows)), [f"{r[0]} · {_label(r[1])}" for r in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("Estimate / SD of rank points")
    ax.grid(axis="x", alpha=0.3)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=3, fontsize=7)
    if has_difference:
        _difference_panel(axes[1], position, domains)
    fig.suptitle(title)
    _save(fig, path)


def _difference_panel(ax: Axes, position: pl.DataFrame, domains: list[str]) -> None:
    est = np.array(
        [_floats(position.filter(pl.col("domain") == d), "difference_sd")[0] for d in domains]
    )
    low = np.array(
        [_floats(position.filter(pl.col("domain") == d), "difference_ci_low")[0] for d in domains]
    )
    high = np.array(
        [_floats(position.filter(pl.col("domain") == d), "difference_ci_high")[0] for d in domains]
    )
    y = np.arange(len(domains))
    ok = np.isfinite(est)
    ax.errorbar(
        est[ok],
        y[ok],
        xerr=_xerr(est, low, high)[:, ok],
        fmt="D",
        ms=4,
        capsize=2,
        lw=1,
        color="black",
    )
    for i in np.flatnonzero(~ok):
        ax.text(0.0, i, "not estimated", ha="center", va="center", fontsize=6, color="dimgrey")
    ax.axvline(0.0, color="grey", ls="--", lw=1)
    ax.set_yticks(y, domains, fontsize=8)
    ax.set_ylim(len(domains) - 0.5, -0.5)
    ax.set_title("|position| − |largest demographic|", fontsize=9)
    ax.set_xlabel("Difference (SD)")
    ax.grid(axis="x", alpha=0.3)


# --- ties and recognition --------------------------------------------------------------------
def _pooled(frame: pl.DataFrame) -> pl.DataFrame:
    if "domain" in frame.columns and (frame["domain"] == "all").any():
        return frame.filter(pl.col("domain") == "all")
    return frame


def plot_tie_recognition(ties: pl.DataFrame, recognition: pl.DataFrame, path: str | Path) -> None:
    """Tie rates (left) and recognition rates per probe (right) by bundle type, pooled over
    domains (the ``"all"`` rows), with Wilson 95% intervals and each bar's n."""
    title = "Ties and audit recognition by bundle type (Wilson 95% CI)"
    _require(ties, ["bundle_type", "tie_rate", "ci_low", "ci_high"], "ties")
    _require(recognition, ["bundle_type", "probe", "rate", "ci_low", "ci_high"], "recognition")
    ties, recognition = _pooled(ties), _pooled(recognition)
    if ties.is_empty() and recognition.is_empty():
        _empty(path, title, NO_DATA)
        return
    types = _order(
        [*ties["bundle_type"].to_list(), *recognition["bundle_type"].to_list()], BUNDLE_TYPES
    )
    fig = _figure(10.0, 4.0)
    left, right = fig.subplots(1, 2, sharey=True)
    _rate_bars(left, ties, types, [("tie_rate", None)], "n_bundles")
    left.set_title("Tied bundles")
    left.set_ylabel("Share")
    probes = _order(recognition["probe"].to_list(), PROBES) if recognition.height else []
    _rate_bars(right, recognition, types, [("rate", p) for p in probes], "n")
    right.set_title("Recognised as a fairness test")
    if probes:
        right.legend(fontsize=8, title="probe")
    fig.suptitle(title)
    _save(fig, path)


def _rate_bars(
    ax: Axes,
    frame: pl.DataFrame,
    types: list[str],
    series: list[tuple[str, str | None]],
    n_column: str,
) -> None:
    x = np.arange(len(types))
    ax.set_xticks(x, [_label(t).replace(" ", "\n", 1) for t in types], fontsize=8)
    ax.set_ylim(0.0, 1.2)
    ax.grid(axis="y", alpha=0.3)
    if frame.is_empty() or not series:
        ax.text(0.5, 0.5, NO_DATA, ha="center", va="center", transform=ax.transAxes)
        return
    width = 0.8 / len(series)
    colours = colormaps["tab10"]
    for k, (column, probe) in enumerate(series):
        part = frame if probe is None else frame.filter(pl.col("probe") == probe)
        by_type = {r["bundle_type"]: r for r in part.iter_rows(named=True)}
        rate = np.array([_value(by_type.get(t), column) for t in types])
        low = np.array([_value(by_type.get(t), "ci_low") for t in types])
        high = np.array([_value(by_type.get(t), "ci_high") for t in types])
        offset = (k - (len(series) - 1) / 2) * width
        ax.bar(
            x + offset,
            np.nan_to_num(rate),
            width * 0.9,
            color=colours(k % 10),
            label=probe,
            yerr=_xerr(rate, low, high),
            capsize=2,
            ecolor="black",
        )
        for i, t in enumerate(types):
            n = _value(by_type.get(t), n_column)
            text = "n/a" if not np.isfinite(rate[i]) else f"n={n:.0f}"
            ax.text(
                x[i] + offset,
                1.02,
                text,
                ha="center",
                va="bottom",
                fontsize=6,
                rotation=0 if len(series) == 1 else 90,
            )


def _value(row: dict[str, Any] | None, column: str) -> float:
    value = None if row is None else row.get(column)
    return np.nan if value is None else float(value)


# --- non-response ----------------------------------------------------------------------------
def plot_nonresponse(table: pl.DataFrame, path: str | Path) -> None:
    """Non-response rate by race × gender group with Wilson 95% intervals, one panel per model
    (and extension arm), one series per format, modes pooled (the ``nonresponse`` table's
    counts summed). A format whose non-response was differential (``differential``) is drawn
    filled and marked in the legend; ranking answers whose candidates differ in race or
    gender fall in the ``mixed`` groups."""
    title = "Non-response by group (Wilson 95% CI)"
    columns = ["arm", "model", "format", "race", "gender", *COUNT_COLUMNS, "differential"]
    _require(table, columns, "nonresponse")
    if table.is_empty():
        _empty(path, title, NO_DATA)
        return
    by = ["arm", "model", "format", "race", "gender"]
    rates = summarise(table.with_columns(pl.col("race", "gender").fill_null(MIXED)), by)
    flags = table.group_by("arm", "model", "format").agg(
        pl.col("differential").fill_null(False).any()
    )
    rates = rates.join(flags, on=["arm", "model", "format"], how="left")
    panels = sorted(
        set(zip(rates["arm"].to_list(), rates["model"].to_list(), strict=True)),
        key=lambda k: (k[0] != PRIMARY, k[0], k[1]),
    )
    groups = sorted(
        set(zip(rates["race"].to_list(), rates["gender"].to_list(), strict=True)),
        key=lambda g: (_rank(g[0], (*RACES, MIXED)), _rank(g[1], (*GENDERS, MIXED))),
    )
    formats = _order(rates["format"].to_list(), FORMATS)
    colours = colormaps["tab10"]
    x = np.arange(len(groups))
    fig = _figure(max(6.0, 0.55 * len(groups) + 2.0), 2.6 * len(panels) + 0.8)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (arm, model) in zip(axes, panels, strict=True):
        part = rates.filter((pl.col("arm") == arm) & (pl.col("model") == model))
        for k, fmt in enumerate(formats):
            rows = {
                (r["race"], r["gender"]): r
                for r in part.filter(pl.col("format") == fmt).iter_rows(named=True)
            }
            if not rows:
                continue
            rate = np.array([_value(rows.get(g), "rate") for g in groups])
            low = np.array([_value(rows.get(g), "ci_low") for g in groups])
            high = np.array([_value(rows.get(g), "ci_high") for g in groups])
            differential = any(r["differential"] for r in rows.values())
            shift = (k - (len(formats) - 1) / 2) * 0.18
            ax.errorbar(
                x + shift,
                rate,
                yerr=_xerr(rate, low, high),
                fmt="o",
                ms=5,
                capsize=2,
                lw=1,
                color=colours(k % 10),
                mfc=colours(k % 10) if differential else "white",
                label=f"{fmt} (differential)" if differential else fmt,
            )
        ax.set_title(model if arm == PRIMARY else f"{model} · arm {arm}", fontsize=9)
        ax.set_ylabel("Non-response")
        ax.set_ylim(0.0, None)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1].set_xticks(x, [f"{race}\n{gender}" for race, gender in groups], fontsize=7)
    fig.suptitle(title)
    _save(fig, path)


# --- per model -------------------------------------------------------------------------------
def plot_forest_by_model(contrasts_by: pl.DataFrame, path: str | Path) -> None:
    """Small multiples: one panel per model, the planted family's contrasts (one row per
    domain x format x contrast) in SD units of the pooled cell with 95% CIs, from the per-model
    rows of the ``contrasts_by`` table (the family's estimator). Filled markers exclude zero;
    all panels share one axis, so opposite effects of two models show side by side."""
    title = "Planned contrasts per model (exploratory; SD units, 95% CI)"
    _require(contrasts_by, ["by", "level", "domain", "format", "contrast", "estimate_sd"], "by")
    rows = contrasts_by.filter(pl.col("by") == "model")
    if "estimator" in rows.columns:
        rows = rows.filter(pl.col("estimator") == FAMILY_ESTIMATOR)
    if rows.is_empty():
        _empty(path, title, NO_DATA)
        return
    models = sorted(set(rows["level"].cast(pl.String).to_list()))
    keys = sorted(
        set(zip(rows["domain"], rows["format"], rows["contrast"], strict=True)),
        key=lambda k: (k[0], *_rank(k[1], FORMATS), *_rank(k[2], CONTRAST_ORDER)),
    )
    ypos = {k: i for i, k in enumerate(keys)}
    labels = {}
    for row in rows.iter_rows(named=True):
        key = (row["domain"], row["format"], row["contrast"])
        labels[key] = f"{row['domain']} · {row['format']} · {_contrast_label(row)}"
    columns = min(len(models), 3)
    lines = -(-len(models) // columns)
    fig = _figure(3.0 * columns + 2.4, (0.26 * len(keys) + 1.0) * lines + 0.8)
    axes = fig.subplots(lines, columns, sharex=True, sharey=True, squeeze=False)
    for i, ax in enumerate(axes.ravel()):
        if i >= len(models):
            ax.set_visible(False)
            continue
        part = rows.filter(pl.col("level").cast(pl.String) == models[i])
        est = _floats(part, "estimate_sd")
        low, high = _floats(part, "ci_low_sd"), _floats(part, "ci_high_sd")
        y = np.array(
            [ypos[k] for k in zip(part["domain"], part["format"], part["contrast"], strict=True)]
        )
        ax.axvline(0.0, color="grey", lw=1, ls="--")
        finite = np.isfinite(est)
        excludes = finite & ((low > 0) | (high < 0))
        err = _xerr(est, low, high)
        for mask, face in ((excludes, "black"), (finite & ~excludes, "white")):
            if mask.any():
                ax.errorbar(est[mask], y[mask], xerr=err[:, mask], fmt="o", ms=3, capsize=2,
                            lw=1, color="black", mfc=face)  # fmt: skip
        for j in np.flatnonzero(~finite):
            ax.text(0.0, y[j], "not estimated", ha="center", va="center", fontsize=6,
                    color="dimgrey")  # fmt: skip
        ax.set_title(models[i], fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_yticks(range(len(keys)), [labels[k] for k in keys], fontsize=7)
        ax.set_ylim(len(keys) - 0.5, -0.5)
    for ax in axes[-1, :]:
        ax.set_xlabel("Estimate / SD of the outcome")
    handles = [
        Line2D([], [], marker="o", ls="", color="black", label="95% CI excludes 0"),
        Line2D([], [], marker="o", ls="", color="black", mfc="white", label="includes 0"),
    ]
    fig.legend(handles=handles, loc="outside right upper", fontsize=8)
    fig.suptitle(title)
    _save(fig, path)


# --- the specification curve -------------------------------------------------------------------
#: The colour of each specification verdict.
VERDICT_COLOURS: Final = {
    "favours": "#1b9e77",
    "penalises": "#d95f02",
    "equivalent": "#7570b3",
    "inconclusive": "#969696",
}


def _indicator_rows(rows: pl.DataFrame) -> list[tuple[str, str]]:
    """(choice, level) of every choice that takes more than one value in ``rows``."""
    out = []
    for choice in CHOICES:
        if choice not in rows.columns:
            continue
        values = rows[choice].cast(pl.String)
        levels = sorted(
            {v for v in values.to_list() if v is not None},
            key=lambda v: (v != POOLED, *_rank(v, FORMATS)),
        )
        if len(levels) + bool(values.null_count()) > 1:
            out += [(choice, level) for level in levels]
    return out


def plot_specification_curve(curve: pl.DataFrame, path: str | Path) -> None:
    """Per contrast of interest a panel: every estimable specification's estimate in SD units
    with its CI, sorted by estimate and coloured by its verdict, the pre-registered family's own
    specifications ringed; beneath it the indicator panel, one row per level of each choice
    that varies, marked where a specification takes it (from the ``specification_curve``
    table). Specifications that could not be estimated are counted in the panel's title."""
    title = "Specification curve (exploratory; estimates in SD units with CIs)"
    _require(curve, ["contrast", "estimate_sd", "ci_low_sd", "ci_high_sd", "verdict"], "curve")
    if curve.is_empty():
        _empty(path, title, NO_DATA)
        return
    contrasts = _order(curve["contrast"].to_list(), CONTRAST_ORDER)
    indicators = _indicator_rows(curve)
    widest = max(curve.filter(pl.col("contrast") == c).height for c in contrasts)
    fig = _figure((0.09 * widest + 2.2) * len(contrasts) + 1.6, 3.0 + 0.16 * len(indicators) + 0.6)
    axes = fig.subplots(
        2,
        len(contrasts),
        sharex="col",
        squeeze=False,
        gridspec_kw={"height_ratios": [3.0, max(0.6, 0.16 * len(indicators))]},
    )
    for j, contrast in enumerate(contrasts):
        part = curve.filter(pl.col("contrast") == contrast)
        _curve_panel(axes[0, j], axes[1, j], part, indicators)
        axes[0, j].set_title(f"{_contrast_label(part.row(0, named=True))}", fontsize=9)
        if j:
            axes[1, j].tick_params(labelleft=False)
    axes[0, 0].set_ylabel("Estimate / SD of the outcome")
    handles = [
        Line2D([], [], marker="o", ls="", color=colour, label=verdict)
        for verdict, colour in VERDICT_COLOURS.items()
    ]
    handles.append(
        Line2D([], [], marker="o", ls="", mfc="none", mec="black", ms=9,
               label="pre-registered family's specification")
    )  # fmt: skip
    fig.legend(handles=handles, loc="outside right upper", fontsize=8)
    fig.suptitle(title)
    _save(fig, path)


def _curve_panel(
    ax: Axes, below: Axes, part: pl.DataFrame, indicators: list[tuple[str, str]]
) -> None:
    est = _floats(part, "estimate_sd")
    keep = np.flatnonzero(np.isfinite(est))
    order = keep[np.argsort(est[keep], kind="stable")]
    rows = part[order.tolist()]
    x = np.arange(len(order))
    est, low, high = (_floats(rows, c) for c in ("estimate_sd", "ci_low_sd", "ci_high_sd"))
    verdicts = rows["verdict"].to_list()
    family = (
        rows["family_spec"].fill_null(False).to_numpy()
        if "family_spec" in rows.columns
        else np.zeros(len(x), bool)
    )
    ax.axhline(0.0, color="grey", lw=1, ls="--")
    # an interval of a few answers on almost no degrees of freedom can be astronomically wide:
    # the axis follows the estimates and the typical interval, and longer bars stop at its edge
    if len(est):
        typical = float(np.nanmedian(high - low)) if np.isfinite(high - low).any() else 1.0
        bottom, top = min(est.min(), 0.0) - typical, max(est.max(), 0.0) + typical
        cut = int(np.sum((low < bottom) | (high > top)))
        low, high = np.clip(low, bottom, top), np.clip(high, bottom, top)
        ax.set_ylim(bottom, top)
        if cut:
            ax.text(0.99, 0.98, f"{cut} intervals cut at the axis", transform=ax.transAxes,
                    ha="right", va="top", fontsize=7, color="dimgrey")  # fmt: skip
    for verdict, colour in VERDICT_COLOURS.items():
        mask = np.array([v == verdict for v in verdicts], dtype=bool)
        if mask.any():
            err = _xerr(est[mask], low[mask], high[mask])
            ax.errorbar(x[mask], est[mask], yerr=err, fmt="o", ms=3, lw=0.8, color=colour)
    if family.any():
        ax.plot(x[family], est[family], "o", ms=9, mfc="none", mec="black", mew=1.2)
    missing = part.height - len(order)
    if missing:
        ax.text(0.01, 0.98, f"{missing} of {part.height} not estimable", transform=ax.transAxes,
                ha="left", va="top", fontsize=7, color="dimgrey")  # fmt: skip
    ax.grid(axis="y", alpha=0.3)
    ypos = {key: i for i, key in enumerate(indicators)}
    for choice in {c for c, _ in indicators}:
        values = rows[choice].cast(pl.String).to_list()
        hits = [(i, ypos[(choice, v)]) for i, v in enumerate(values) if (choice, v) in ypos]
        if hits:
            xs, ys = zip(*hits, strict=True)
            below.plot(xs, ys, "s", ms=2.5, color="black")
    below.set_yticks(
        range(len(indicators)), [f"{c}: {_label(v)}" for c, v in indicators], fontsize=6
    )
    below.set_ylim(len(indicators) - 0.5, -0.5)
    below.set_xlabel("Specifications, sorted by estimate")
    below.set_xlim(-1, max(len(x), 1))
