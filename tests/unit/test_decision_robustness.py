"""Leave-one-name-out and leave-one-profile-out refits (LEAVE_ONE_OUT) against fresh fits of
the frames with the level removed, on synthetic frames with a planted outlier level."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from cueaudit.decision.analysis.contrasts import fit_cell
from cueaudit.decision.analysis.robustness import LEAVE_ONE_OUT_SCHEMA, leave_one_out
from tests.unit.test_decision_contrasts import (
    PREREG,
    judgement_frame,
    make_frames,
    ranking_frame,
)

OUTLIER_PAIR = "Black-female-0"
OUTLIER_PROFILE = "hiring-p2"


@pytest.fixture(scope="module")
def rate_frame() -> pl.DataFrame:
    """Hiring ratings where one Black pair is rated 1.5 points higher and, in one profile,
    every Black candidate 2 points higher: each the most influential level of its factor."""
    return judgement_frame(
        np.random.default_rng(12),
        models=("a", "b"),
        n_profiles=6,
        pairs_per_cell=2,
        effects={"Black": 0.1},
        level_effects={OUTLIER_PAIR: 1.5, (OUTLIER_PROFILE, "Black"): 2.0},
        sd_noise=0.5,
    )


@pytest.fixture(scope="module")
def table(rate_frame: pl.DataFrame) -> pl.DataFrame:
    return leave_one_out(make_frames([rate_frame]), PREREG)


def _row(table: pl.DataFrame, contrast_id: str, left_out: str) -> dict:
    rows = table.filter((pl.col("contrast_id") == contrast_id) & (pl.col("left_out") == left_out))
    assert rows.height == 1
    return rows.row(0, named=True)


def test_schema_and_one_row_per_planned_contrast_and_factor(table: pl.DataFrame) -> None:
    assert table.schema == pl.Schema(LEAVE_ONE_OUT_SCHEMA)
    assert table.height == 36 * 2
    assert set(table["contrast_id"]) == {c.id for c in PREREG.contrasts}
    hiring_rate = table.filter(pl.col("contrast_id").str.starts_with("hiring.rate."))
    assert dict(hiring_rate.select("left_out", "n_refits").unique().iter_rows()) == {
        "pair_id": 16,
        "profile_id": 6,
    }
    empty_cells = table.filter(~pl.col("contrast_id").str.starts_with("hiring.rate."))
    assert (empty_cells["n_refits"] == 0).all() and empty_cells["estimate"].is_nan().all()


def test_the_planted_outliers_are_the_most_influential_levels(table: pl.DataFrame) -> None:
    for left_out, level in (("pair_id", OUTLIER_PAIR), ("profile_id", OUTLIER_PROFILE)):
        row = _row(table, "hiring.rate.black_vs_white", left_out)
        assert row["min_estimate"] <= row["estimate"] <= row["max_estimate"]
        assert row["most_influential"] == level
        # the outlier inflated the Black rating: without it the contrast is at its smallest
        assert row["most_influential_estimate"] == row["min_estimate"]
        assert row["estimate"] - row["min_estimate"] > 0.15


def test_refits_equal_fresh_fits_without_the_level(
    rate_frame: pl.DataFrame, table: pl.DataFrame
) -> None:
    """The table's refits start from the full fit's variance components and subset the
    design; a fresh fit of the filtered frame starts cold and rebuilds it."""
    for factor in ("pair_id", "profile_id"):
        estimates = {}
        for level in rate_frame[factor].unique().to_list():
            frames = make_frames([rate_frame.filter(pl.col(factor) != level)])
            estimates[level] = fit_cell(frames, "hiring", "rate").estimates
        for contrast in ("black_vs_white", "asian_vs_white", "female_vs_male"):
            row = _row(table, f"hiring.rate.{contrast}", factor)
            values = {k: v[contrast].estimate for k, v in estimates.items()}
            assert row["min_estimate"] == pytest.approx(min(values.values()), abs=1e-6)
            assert row["max_estimate"] == pytest.approx(max(values.values()), abs=1e-6)
            assert row["most_influential_estimate"] == pytest.approx(
                values[row["most_influential"]], abs=1e-6
            )
            full = fit_cell(make_frames([rate_frame]), "hiring", "rate").estimates[contrast]
            assert row["estimate"] == pytest.approx(full.estimate, abs=1e-12)


def test_rank_cells_leave_candidates_out_of_their_bundles() -> None:
    rng = np.random.default_rng(3)
    rankings = ranking_frame(
        rng,
        models=("a", "b"),
        bundles={"demographic_matched": 8, "disguised_demographic": 96},
        worth={"Black": 0.3, "Hispanic-male-1": 3.0},
    )
    table = leave_one_out(make_frames(rankings=[rankings]), PREREG)
    row = _row(table, "hiring.rank.hispanic_vs_white", "pair_id")
    assert row["n_refits"] == rankings["pair_id"].n_unique()
    assert row["min_estimate"] <= row["estimate"] <= row["max_estimate"]
    assert row["most_influential"] == "Hispanic-male-1"
    assert row["most_influential_estimate"] == row["min_estimate"]
    profile = _row(table, "hiring.rank.black_vs_white", "profile_id")
    assert profile["n_refits"] == 12
    assert profile["min_estimate"] <= profile["estimate"] <= profile["max_estimate"]
