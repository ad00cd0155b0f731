"""Outcome ratios and group means with cluster-bootstrap CIs."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pytest

from cueaudit.errors import InputError
from cueaudit.probing.analysis.ratios import group_means, outcome_ratios

SCHEMA = {
    "model": pl.String,
    "seed": pl.Int32,
    "task": pl.String,
    "prompt_uid": pl.String,
    "base_id": pl.String,
    "cue": pl.String,
    "cue_type": pl.String,
    "race": pl.String,
    "gender": pl.String,
    "outcome": pl.Float64,
}


def observations(cells: list[tuple]) -> duckdb.DuckDBPyConnection:
    """In-memory DuckDB ``observations`` from cells (model, task, base_id, cue, race, gender,
    outcomes); outcome i goes to seed i % 2."""
    rows = [
        (model, i % 2, task, f"{cue}-{base}-{i}", base, cue, cue, race, gender, y)
        for model, task, base, cue, race, gender, outcomes in cells
        for i, y in enumerate(outcomes)
    ]
    frame = pl.DataFrame(rows, schema=SCHEMA, orient="row")
    con = duckdb.connect()
    con.register("frame", frame)
    con.sql("CREATE TABLE observations AS SELECT * FROM frame")
    return con


# Hand example (model m, task legal):
#   explicit Black: b1 1,1  b2 0,1,NULL  b3 1,0  -> 4/6;  White: b1 1,0  b2 0,0  b3 1,1 -> 3/6
#   ratio = (4/6) / (3/6) = 4/3
#   dialect_aave (Black only): b1 1,0  b2 1,1 -> 3/4; no-cue baseline b1 1,1 b2 0,1 b3 1,0 -> 4/6
#   ratio = (3/4) / (4/6) = 1.125, reference = baseline
#   name_tzioumis: Black unparsed; dialog_cad: White mean 0; dialog_prism: White prompts only
HAND = [
    ("m", "legal", "b1", "explicit", "Black", None, [1, 1]),
    ("m", "legal", "b2", "explicit", "Black", None, [0, 1, None]),
    ("m", "legal", "b3", "explicit", "Black", None, [1, 0]),
    ("m", "legal", "b1", "explicit", "White", None, [1, 0]),
    ("m", "legal", "b2", "explicit", "White", None, [0, 0]),
    ("m", "legal", "b3", "explicit", "White", None, [1, 1]),
    ("m", "legal", "b1", "dialect_aave", "Black", None, [1, 0]),
    ("m", "legal", "b2", "dialect_aave", "Black", None, [1, 1]),
    ("m", "legal", "b1", "none", None, None, [1, 1]),
    ("m", "legal", "b2", "none", None, None, [0, 1]),
    ("m", "legal", "b3", "none", None, None, [1, 0]),
    ("m", "legal", "b1", "name_tzioumis", "Black", "female", [None, None]),
    ("m", "legal", "b1", "name_tzioumis", "White", "male", [1, 0]),
    ("m", "legal", "b1", "dialog_cad", "Black", None, [1, 0]),
    ("m", "legal", "b1", "dialog_cad", "White", None, [0, 0]),
    ("m", "legal", "b1", "dialog_prism", "White", None, [1, 1]),
    # salary in USD, a single base prompt: (50k + 60k)/2 / ((40k + 80k)/2)
    ("m", "salary", "b1", "explicit", "Black", None, [50_000, 60_000]),
    ("m", "salary", "b1", "explicit", "White", None, [40_000, 80_000]),
    # a model with a Black-only cue and no baseline
    ("m2", "legal", "b1", "dialect_aave", "Black", None, [1, 0]),
]

RATIO_COLUMNS = [
    "model",
    "task",
    "cue",
    "dimension",
    "focal",
    "reference",
    "ratio",
    "ci_low",
    "ci_high",
    "n_prompts",
    "n_focal",
    "n_reference",
    "reference_cue",
    "note",
]


def _by_cue(frame: pl.DataFrame, model: str = "m", task: str = "legal") -> dict[str, dict]:
    sub = frame.filter((pl.col("model") == model) & (pl.col("task") == task))
    return {r["cue"]: r for r in sub.to_dicts()}


def test_ratio_point_estimates_match_hand_computation() -> None:
    ratios = outcome_ratios(observations(HAND), "race", n_boot=200)
    assert ratios.columns == RATIO_COLUMNS
    got = _by_cue(ratios)
    explicit = got["explicit"]
    assert explicit["ratio"] == pytest.approx(4 / 3)
    assert (explicit["n_prompts"], explicit["n_focal"], explicit["n_reference"]) == (3, 6, 6)
    assert (explicit["focal"], explicit["reference"], explicit["reference_cue"]) == (
        "Black",
        "White",
        "explicit",
    )
    # resamples drawing only b2 have a White mean of 0: they are dropped, and reported
    assert explicit["note"].endswith(
        "of 200 bootstrap replicates undefined and dropped from the CI"
    )
    assert explicit["ci_low"] <= explicit["ratio"] <= explicit["ci_high"]

    dialect = got["dialect_aave"]
    assert dialect["ratio"] == pytest.approx(1.125)
    assert dialect["reference_cue"] == "none"
    assert (dialect["n_prompts"], dialect["n_focal"], dialect["n_reference"]) == (3, 4, 6)

    salary = _by_cue(ratios, task="salary")["explicit"]
    assert salary["ratio"] == pytest.approx(55_000 / 60_000)
    # a single base prompt: every bootstrap replicate equals the point estimate
    assert salary["ci_low"] == pytest.approx(salary["ratio"])
    assert salary["ci_high"] == pytest.approx(salary["ratio"])


def test_undefined_ratios_are_null_with_a_note() -> None:
    ratios = outcome_ratios(observations(HAND), "race", n_boot=50)
    got = _by_cue(ratios)
    assert "no parsed outcomes for Black" in got["name_tzioumis"]["note"]
    assert got["name_tzioumis"]["n_focal"] == 0
    assert got["dialog_cad"]["note"] == "reference mean is 0"
    assert "carries no Black" in got["dialog_prism"]["note"]
    no_base = _by_cue(ratios, model="m2")["dialect_aave"]
    assert "baseline" in no_base["note"]
    for rec in (got["name_tzioumis"], got["dialog_cad"], got["dialog_prism"], no_base):
        assert (rec["ratio"], rec["ci_low"], rec["ci_high"]) == (None, None, None)
    assert not ratios["ratio"].is_nan().any()


def test_gender_ratios_use_female_over_male() -> None:
    ratios = outcome_ratios(observations(HAND), "gender", n_boot=50)
    rec = _by_cue(ratios)["name_tzioumis"]
    assert (rec["focal"], rec["reference"]) == ("female", "male")
    assert rec["ratio"] is None and "no parsed outcomes for female" in rec["note"]
    assert set(ratios["cue"]) == {"name_tzioumis"}  # only cue carrying gender


def _simulated(n_base: int, seed: int = 11) -> duckdb.DuckDBPyConnection:
    rng = np.random.default_rng(seed)
    cells = []
    for b in range(n_base):
        p = rng.uniform(0.2, 0.8)  # prompt-level propensity: outcomes cluster by prompt
        for race, shift in (("Black", 0.05), ("White", 0.0)):
            y = (rng.random(4) < min(p + shift, 1.0)).astype(float).tolist()
            cells.append(("m", "healthcare", f"b{b}", "name_rosenman", race, None, y))
    return observations(cells)


def _stats(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    return con.sql(
        """SELECT base_id, race, SUM(outcome) AS s, COUNT(outcome) AS c
           FROM observations GROUP BY ALL ORDER BY base_id, race"""
    ).pl()


def test_bootstrap_matches_a_naive_replicate_loop() -> None:
    con = _simulated(40)
    ratio = outcome_ratios(con, "race", n_boot=300, level=0.9, seed=5).row(0, named=True)
    st = _stats(con)
    sf = st.filter(pl.col("race") == "Black")["s"].to_numpy()
    cf = st.filter(pl.col("race") == "Black")["c"].to_numpy()
    sr = st.filter(pl.col("race") == "White")["s"].to_numpy()
    cr = st.filter(pl.col("race") == "White")["c"].to_numpy()
    assert ratio["ratio"] == pytest.approx((sf.sum() / cf.sum()) / (sr.sum() / cr.sum()))
    rng = np.random.default_rng(5)
    reps = []
    for _ in range(300):  # textbook cluster bootstrap: resample base prompts with replacement
        idx = rng.integers(0, 40, size=40)
        reps.append((sf[idx].sum() / cf[idx].sum()) / (sr[idx].sum() / cr[idx].sum()))
    lo, hi = np.quantile(reps, [0.05, 0.95])
    assert ratio["ci_low"] == pytest.approx(lo)
    assert ratio["ci_high"] == pytest.approx(hi)


def test_bootstrap_ci_contains_estimate_narrows_and_is_reproducible() -> None:
    small = outcome_ratios(_simulated(30), "race", n_boot=500, seed=1).row(0, named=True)
    large = outcome_ratios(_simulated(600), "race", n_boot=500, seed=1).row(0, named=True)
    for rec in (small, large):
        assert rec["ci_low"] < rec["ratio"] < rec["ci_high"]
    assert large["ci_high"] - large["ci_low"] < 0.5 * (small["ci_high"] - small["ci_low"])
    con = _simulated(30)
    a = outcome_ratios(con, "race", n_boot=500, seed=1)
    b = outcome_ratios(con, "race", n_boot=500, seed=1)
    c = outcome_ratios(con, "race", n_boot=500, seed=2)
    assert a.equals(b)
    assert a["ci_low"].item() != c["ci_low"].item() or a["ci_high"].item() != c["ci_high"].item()


def test_group_means_with_baseline_row() -> None:
    means = group_means(observations(HAND), "race", n_boot=200)
    assert means.columns == [
        "model",
        "task",
        "cue",
        "group",
        "mean",
        "ci_low",
        "ci_high",
        "n",
        "n_prompts",
        "note",
    ]
    got = {
        (r["cue"], r["group"]): r
        for r in means.filter((pl.col("model") == "m") & (pl.col("task") == "legal")).to_dicts()
    }
    base = got[("none", "none")]
    assert (base["mean"], base["n"], base["n_prompts"]) == (pytest.approx(4 / 6), 6, 3)
    black = got[("explicit", "Black")]
    assert (black["mean"], black["n"], black["n_prompts"]) == (pytest.approx(4 / 6), 6, 3)
    assert black["ci_low"] <= black["mean"] <= black["ci_high"]
    assert black["ci_low"] >= 0.0 and black["ci_high"] <= 1.0
    unparsed = got[("name_tzioumis", "Black")]
    assert unparsed["mean"] is None and unparsed["note"] == "no parsed outcomes"
    assert (unparsed["n"], unparsed["n_prompts"]) == (0, 0)
    # baseline first, then cues in figure order, focal group before reference
    order = [(r["cue"], r["group"]) for r in means.filter(pl.col("task") == "legal").to_dicts()]
    assert order[:4] == [
        ("none", "none"),
        ("dialect_aave", "Black"),
        ("dialog_cad", "Black"),
        ("dialog_cad", "White"),
    ]


def test_zero_replicates_and_bad_arguments() -> None:
    con = observations(HAND)
    rec = _by_cue(outcome_ratios(con, "race", n_boot=0))["explicit"]
    assert rec["ratio"] == pytest.approx(4 / 3) and rec["ci_low"] is None
    with pytest.raises(InputError, match="level"):
        outcome_ratios(con, "race", level=1.5)
    with pytest.raises(InputError, match="dimension"):
        group_means(con, "religion")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="observations"):
        outcome_ratios(duckdb.connect(), "race")


def test_no_observations_gives_empty_frames() -> None:
    con = duckdb.connect()
    frame = pl.DataFrame(schema=SCHEMA)
    con.register("frame", frame)
    con.sql("CREATE TABLE observations AS SELECT * FROM frame")
    assert outcome_ratios(con, "race").is_empty()
    assert group_means(con, "gender").columns[-1] == "note"
