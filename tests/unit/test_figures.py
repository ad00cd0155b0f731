"""Figures: heatmaps and ratio plots are written and decode to images of plausible size."""

from __future__ import annotations

import logging
from pathlib import Path

import matplotlib.image as mpimg
import polars as pl
import pytest

from cueaudit.errors import InputError
from cueaudit.probing.figures import _footnote_lines, plot_correlation_heatmaps, plot_outcome_ratios

PAIR_SCHEMA = {
    "task": pl.String,
    "cue_a": pl.String,
    "group_a": pl.String,
    "cue_b": pl.String,
    "group_b": pl.String,
    "r": pl.Float64,
    "n_models": pl.Int64,
    "n_min": pl.Int64,
}
RATIO_SCHEMA = {
    "model": pl.String,
    "task": pl.String,
    "cue": pl.String,
    "dimension": pl.String,
    "focal": pl.String,
    "reference": pl.String,
    "ratio": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "reference_cue": pl.String,
    "note": pl.String,
}


def _averaged() -> pl.DataFrame:
    cues = ["dialect_aave", "explicit", "name_rosenman", "dialog_cad"]
    rows = []
    for task in ("healthcare", "legal"):
        for i, a in enumerate(cues):
            for b in cues[i + 1 :]:
                rows.append((task, a, "Black", b, "Black", 0.6, 2, 100))
                if "dialect_aave" not in (a, b):
                    rows.append((task, a, "White", b, "White", 0.7, 2, 100))
            for b in cues[1:]:
                r = None if (task, a, b) == ("legal", "explicit", "dialog_cad") else -0.2
                rows.append((task, a, "Black", b, "White", r, 2, 100))
    return pl.DataFrame(rows, schema=PAIR_SCHEMA, orient="row")


def _assert_image(path: Path, min_px: int = 300) -> tuple[int, int]:
    assert path.is_file() and path.stat().st_size > 0
    img = mpimg.imread(path)
    assert img.ndim == 3 and img.shape[2] in (3, 4)
    h, w = img.shape[:2]
    assert min_px <= h <= 10_000 and min_px <= w <= 10_000
    assert img[..., :3].std() > 0  # not a blank canvas
    return h, w


@pytest.mark.parametrize("kind", ["within", "across"])
def test_heatmaps_are_written(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "figs" / f"{kind}.png"
    plot_correlation_heatmaps(_averaged(), "race", out, kind=kind)  # type: ignore[arg-type]
    h, w = _assert_image(out)
    assert w > h  # two task columns side by side


def test_within_heatmaps_stack_one_row_per_group(tmp_path: Path) -> None:
    within, across = tmp_path / "w.png", tmp_path / "a.png"
    plot_correlation_heatmaps(_averaged(), "race", within, kind="within")
    plot_correlation_heatmaps(_averaged(), "race", across, kind="across")
    assert _assert_image(within)[0] > 1.5 * _assert_image(across)[0]


def test_pdf_path_writes_pdf_and_png(tmp_path: Path) -> None:
    out = tmp_path / "fig2.pdf"
    plot_correlation_heatmaps(_averaged(), "race", out)
    assert out.read_bytes()[:5] == b"%PDF-"
    _assert_image(out.with_suffix(".png"))


def test_heatmap_with_nothing_to_plot_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "empty.png"
    with caplog.at_level(logging.WARNING, logger="cueaudit.probing.figures"):
        plot_correlation_heatmaps(pl.DataFrame(schema=PAIR_SCHEMA), "gender", out)
    _assert_image(out, min_px=200)
    assert "No within-group correlations" in caplog.text
    # race pairs only: nothing to plot for gender either
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="cueaudit.probing.figures"):
        plot_correlation_heatmaps(_averaged(), "gender", out, kind="across")
    assert "No cross-group correlations" in caplog.text


def _ratios() -> pl.DataFrame:
    rows = []
    for model in ("llama", "olmo", "gpt"):
        for task in ("healthcare", "legal", "salary"):
            for k, cue in enumerate(["dialect_aave", "explicit", "name_rosenman", "dialog_cad"]):
                ratio = 0.9 + 0.05 * k
                ref = "none" if cue == "dialect_aave" else cue
                rows.append(
                    (model, task, cue, "race", "Black", "White", ratio, ratio - 0.04,
                     ratio + 0.05, ref, None)
                )  # fmt: skip
    rows.append(
        ("gpt", "legal", "dialog_prism", "race", "Black", "White", None, None, None,
         "dialog_prism", "no parsed outcomes for Black")
    )  # fmt: skip
    return pl.DataFrame(rows, schema=RATIO_SCHEMA, orient="row")


def test_outcome_ratio_plot_is_written(tmp_path: Path) -> None:
    out = tmp_path / "fig3.png"
    plot_outcome_ratios(_ratios(), out)
    h, w = _assert_image(out)
    assert w > h


def test_null_ratios_go_to_the_footnote() -> None:
    frame = _ratios()
    omitted = frame.filter(pl.col("ratio").is_null())
    lines = _footnote_lines(omitted, True, "White")
    assert lines[0].startswith("† White reference = no-cue baseline")
    assert any("Dialog (PRISM): no parsed outcomes for Black" in line for line in lines)
    assert _footnote_lines(omitted.head(0), False, "White") == []


def test_outcome_ratio_plot_with_only_null_ratios(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "nulls.png"
    with caplog.at_level(logging.WARNING, logger="cueaudit.probing.figures"):
        plot_outcome_ratios(_ratios().filter(pl.col("ratio").is_null()), out)
        plot_outcome_ratios(pl.DataFrame(schema=RATIO_SCHEMA), tmp_path / "empty.png")
    _assert_image(out, min_px=200)
    _assert_image(tmp_path / "empty.png", min_px=200)
    assert caplog.text.count("No outcome ratios to plot") == 2


def test_unsupported_suffix_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"\.png or \.pdf"):
        plot_outcome_ratios(_ratios(), tmp_path / "fig.svg")
