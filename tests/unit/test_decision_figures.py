from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from matplotlib.image import imread

from cueaudit.decision.analysis.figures import (
    plot_contrast_forest,
    plot_planted,
    plot_position_vs_demographic,
    plot_tie_recognition,
)
from cueaudit.decision.analysis.instrument import (
    POSITION_SCHEMA,
    RECOGNITION_SCHEMA,
    TIES_SCHEMA,
)
from cueaudit.decision.analysis.planted import PLANTED_SCHEMA
from cueaudit.errors import InputError

NAN = float("nan")
CONTRASTS = {
    "black_vs_white": ("race", "Black", "White"),
    "hispanic_vs_white": ("race", "Hispanic", "White"),
    "asian_vs_white": ("race", "Asian", "White"),
    "female_vs_male": ("gender", "female", "male"),
}
MARGINS = {"rate": 0.09, "rank": 0.067, "decide": None}
PLANTED_COLUMNS = PLANTED_SCHEMA


def contrasts_table(nan_every: int = 5) -> pl.DataFrame:
    """The 36 in-family rows and a rologit rank row per contrast, every ``nan_every``-th
    estimate NaN as a tiny model gives them."""
    rng = np.random.default_rng(0)
    rows = []
    for i, (domain, fmt, contrast) in enumerate(
        (d, f, c) for d in ("hiring", "lending", "triage") for f in MARGINS for c in CONTRASTS
    ):
        dimension, focal, reference = CONTRASTS[contrast]
        se = 0.02 + 0.01 * rng.random()
        estimate = NAN if i % nan_every == 0 else float(rng.normal(0, 0.05))
        sd = {"rate": 1.1, "decide": 0.5, "rank": 1.118}[fmt]
        q = NAN if np.isnan(estimate) else (0.01 if i % 7 == 1 else 0.6)
        for estimator in ("lmm", "rologit") if fmt == "rank" else ("lmm",):
            rows.append(
                {
                    "contrast_id": f"{domain}.{fmt}.{contrast}",
                    "domain": domain,
                    "format": fmt,
                    "contrast": contrast,
                    "dimension": dimension,
                    "focal": focal,
                    "reference": reference,
                    "estimator": estimator,
                    "unit": {"rate": "points", "decide": "probability", "rank": "positions"}[fmt],
                    "estimate": estimate,
                    "se": se,
                    "ci_low": estimate - 1.96 * se,
                    "ci_high": estimate + 1.96 * se,
                    "p_value": 0.5,
                    "outcome_sd": sd,
                    "estimate_sd": estimate / sd,
                    "se_sd": se / sd,
                    "ci_low_sd": (estimate - 1.96 * se) / sd,
                    "ci_high_sd": (estimate + 1.96 * se) / sd,
                    "n_obs": 100,
                    "in_family": estimator == "lmm",
                    "q_value": q if estimator == "lmm" else None,
                    "margin": MARGINS[fmt],
                    "p_tost": 0.2,
                    "mde": 2.8016 * se,
                    "equivalence_floor": 2.9264 * se,
                    "verdict": "inconclusive",
                    "pre_registered": True,
                    "label": "pre-registered",
                }
            )
    return pl.DataFrame(rows)


def assert_png(path: Path) -> None:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = imread(path)
    assert image.shape[0] > 100 and image.shape[1] > 100
    # something besides the white background was drawn
    assert float(np.std(image[..., :3])) > 0.01


def test_contrast_forest_with_nan_rows(tmp_path: Path) -> None:
    table = contrasts_table()
    assert table.filter(pl.col("in_family")).height == 36
    out = tmp_path / "figures" / "forest.png"
    plot_contrast_forest(table, out)
    assert_png(out)


def test_contrast_forest_writes_pdf_and_png(tmp_path: Path) -> None:
    plot_contrast_forest(contrasts_table(nan_every=1000), tmp_path / "forest.pdf")
    assert (tmp_path / "forest.pdf").read_bytes()[:4] == b"%PDF"
    assert_png(tmp_path / "forest.png")


def test_planted_with_real_and_simulated_rows(tmp_path: Path) -> None:
    rows = []
    for source in ("simulated", "real"):
        for fmt, estimator in (
            ("rate", "lmm"),
            ("decide", "lmm"),
            ("rank", "lmm"),
            ("rank", "rologit"),
        ):
            for planted in (0.05, 0.10, 0.50):
                recovered = NAN if (source == "real" and fmt == "rank") else planted * 0.95
                rows.append(
                    {
                        "source": source,
                        "domain": "hiring",
                        "format": fmt,
                        "contrast": "black_vs_white",
                        "estimator": estimator,
                        "planted_sd": planted,
                        "recovered_sd": recovered,
                        "se_sd": 0.03,
                        "ci_low_sd": recovered - 0.06,
                        "ci_high_sd": recovered + 0.06,
                        "covered": True,
                        "n_obs": 200,
                    }
                )
    out = tmp_path / "planted.png"
    plot_planted(pl.DataFrame(rows, schema=PLANTED_COLUMNS), out)
    assert_png(out)


def position_table() -> pl.DataFrame:
    rows = []
    for domain, estimate in (("hiring", 0.09), ("lending", NAN), ("all", 0.094)):
        rows.append(
            {
                "domain": domain,
                "n_obs": 400,
                "n_bundles": 100,
                "n_clusters": 25,
                "outcome_sd": 1.1,
                "estimate_positions": estimate * 1.1,
                "se": 0.04,
                "se_model": 0.035,
                "ci_low": estimate * 1.1 - 0.08,
                "ci_high": estimate * 1.1 + 0.08,
                "p_value": 0.01,
                "estimate_sd": estimate,
                "se_sd": 0.036,
                "ci_low_sd": estimate - 0.07,
                "ci_high_sd": estimate + 0.07,
                "corr_demographic": 0.01,
                "largest_contrast_id": f"{domain}.rank.black_vs_white",
                "largest_demographic_sd": 0.049,
                "largest_se_sd": 0.03,
                "difference_sd": abs(estimate) - 0.049,
                "difference_se_sd": 0.047,
                "difference_ci_low": abs(estimate) - 0.049 - 0.092,
                "difference_ci_high": abs(estimate) - 0.049 + 0.092,
            }
        )
    return pl.DataFrame(rows, schema=POSITION_SCHEMA)


def test_position_vs_demographic(tmp_path: Path) -> None:
    out = tmp_path / "position.png"
    plot_position_vs_demographic(position_table(), contrasts_table(), out)
    assert_png(out)
    # without a contrasts table: the position effects alone, no difference panel
    alone = position_table().with_columns(
        pl.lit(None, dtype=pl.Float64).alias(c)
        for c in ("difference_sd", "difference_ci_low", "difference_ci_high")
    )
    plot_position_vs_demographic(alone, None, tmp_path / "alone.png")
    assert_png(tmp_path / "alone.png")


def test_tie_recognition(tmp_path: Path) -> None:
    ties = pl.DataFrame(
        [
            ("all", "demographic_matched", 24, 24, 1.0, 0.86, 1.0),
            ("all", "irrelevant_matched", 24, 24, 1.0, 0.86, 1.0),
            ("all", "disguised_demographic", 72, 0, 0.0, 0.0, 0.05),
            ("all", "disguised_placebo", 0, 0, NAN, NAN, NAN),
            ("hiring", "disguised_placebo", 0, 0, NAN, NAN, NAN),
        ],
        schema=TIES_SCHEMA,
        orient="row",
    )
    recognition = pl.DataFrame(
        [
            ("all", "demographic_matched", "choice", 24, 24, 1.0, 0.86, 1.0, 0),
            ("all", "demographic_matched", "free", 20, 18, 0.9, 0.7, 0.97, 4),
            ("all", "disguised_placebo", "choice", 24, 18, 0.75, 0.55, 0.88, 0),
            ("all", "disguised_placebo", "free", 0, 0, NAN, NAN, NAN, 24),
        ],
        schema=RECOGNITION_SCHEMA,
        orient="row",
    )
    out = tmp_path / "ties.png"
    plot_tie_recognition(ties, recognition, out)
    assert_png(out)
    plot_tie_recognition(ties, pl.DataFrame(schema=RECOGNITION_SCHEMA), tmp_path / "half.png")
    assert_png(tmp_path / "half.png")


def test_empty_tables_give_a_no_data_figure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    contrasts = contrasts_table().clear()
    calls = {
        "forest": lambda p: plot_contrast_forest(contrasts, p),
        "planted": lambda p: plot_planted(pl.DataFrame(schema=PLANTED_COLUMNS), p),
        "position": lambda p: plot_position_vs_demographic(
            pl.DataFrame(schema=POSITION_SCHEMA), None, p
        ),
        "ties": lambda p: plot_tie_recognition(
            pl.DataFrame(schema=TIES_SCHEMA), pl.DataFrame(schema=RECOGNITION_SCHEMA), p
        ),
    }
    for name, call in calls.items():
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="cueaudit.probing.figures"):
            call(tmp_path / f"{name}.png")
        assert "no data" in caplog.text, name
        assert_png(tmp_path / f"{name}.png")


def test_missing_columns_and_bad_paths_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="estimate_sd"):
        plot_contrast_forest(pl.DataFrame({"domain": ["hiring"]}), tmp_path / "x.png")
    with pytest.raises(InputError, match=r"\.png or \.pdf"):
        plot_planted(pl.DataFrame(schema=PLANTED_COLUMNS), tmp_path / "x.svg")
