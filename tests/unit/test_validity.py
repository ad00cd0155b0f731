"""Construct-validity analysis: deviations, Pearson correlations, Fisher-z averaging."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import polars as pl
import pytest
from scipy import stats

from cueaudit.errors import InputError
from cueaudit.probing.analysis.validity import (
    NOTE_CONSTANT,
    NOTE_FEW,
    correlation_matrix,
    deviation_correlations,
    fisher_average,
    prompt_deviations,
)

PAIRS = ("cue_a", "group_a", "cue_b", "group_b")
COLUMNS = [
    "model",
    "seed",
    "task",
    "prompt_uid",
    "base_id",
    "cue",
    "cue_type",
    "race",
    "gender",
    "outcome",
]


def observations(cells: list[tuple]) -> duckdb.DuckDBPyConnection:
    """In-memory DuckDB with an ``observations`` table.

    Each cell is (model, task, base_id, cue, race, gender, outcomes); outcome i goes to seed
    i % 2 and to prompt ``{cue}-{base_id}-{i // 2}`` (several names share a cell).
    """
    rows = []
    for model, task, base_id, cue, race, gender, outcomes in cells:
        for i, y in enumerate(outcomes):
            uid = f"{cue}-{base_id}-{i // 2}"
            rows.append((model, i % 2, task, uid, base_id, cue, cue, race, gender, y))
    frame = pl.DataFrame(
        rows,
        schema={
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
        },
        orient="row",
    )
    con = duckdb.connect()
    con.register("frame", frame)
    con.sql("CREATE TABLE observations AS SELECT * FROM frame")
    return con


# A 4-prompt example computed by hand (model m, task t).
# baseline means:          b1 0.5, b2 0,    b3 1,   b4 1 (one NULL ignored)
# name_rosenman / Black:   b1 .75, b2 .25,  b3 1,   b4 .5  -> dev  .25, .25,  0,  -.5
# explicit / Black:        b1 1,   b2 .5,   b3 .5,  b4 0   -> dev  .5,  .5, -.5,  -1
# name_rosenman / White:   b1 0,   b2 .5,   b3 0,   b4 -   -> dev -.5,  .5,  -1  (b4 unparsed)
# b5 has a cue but no baseline; model m2 has no baseline at all: both dropped.
HAND = [
    ("m", "t", "b1", "none", None, None, [1, 0]),
    ("m", "t", "b2", "none", None, None, [0, 0]),
    ("m", "t", "b3", "none", None, None, [1, 1]),
    ("m", "t", "b4", "none", None, None, [1, None]),
    ("m", "t", "b1", "name_rosenman", "Black", "male", [1, 1, 1, 0]),
    ("m", "t", "b2", "name_rosenman", "Black", "male", [1, 0, 0, 0]),
    ("m", "t", "b3", "name_rosenman", "Black", "female", [1, 1, 1, 1]),
    ("m", "t", "b4", "name_rosenman", "Black", "female", [0, 0, 1, 1]),
    ("m", "t", "b5", "name_rosenman", "Black", "female", [1, 1]),
    ("m", "t", "b1", "explicit", "Black", None, [1, 1]),
    ("m", "t", "b2", "explicit", "Black", None, [1, 0]),
    ("m", "t", "b3", "explicit", "Black", None, [1, 0]),
    ("m", "t", "b4", "explicit", "Black", None, [0, 0]),
    ("m", "t", "b1", "name_rosenman", "White", "male", [0, 0]),
    ("m", "t", "b2", "name_rosenman", "White", "male", [0, 1]),
    ("m", "t", "b3", "name_rosenman", "White", "female", [0, None]),
    ("m", "t", "b4", "name_rosenman", "White", "female", [None, None]),
    ("m2", "t", "b1", "name_rosenman", "Black", "male", [1, 0]),
]


def test_prompt_deviations_match_hand_computation() -> None:
    dev = prompt_deviations(observations(HAND), "race")
    assert dev.columns == [
        "model",
        "task",
        "cue",
        "group",
        "base_id",
        "cue_mean",
        "baseline_mean",
        "deviation",
        "n_cue",
        "n_baseline",
    ]
    got = {
        (r["cue"], r["group"], r["base_id"]): (r["deviation"], r["n_cue"], r["n_baseline"])
        for r in dev.iter_rows(named=True)
    }
    expected = {
        ("name_rosenman", "Black", "b1"): (0.25, 4, 2),
        ("name_rosenman", "Black", "b2"): (0.25, 4, 2),
        ("name_rosenman", "Black", "b3"): (0.0, 4, 2),
        ("name_rosenman", "Black", "b4"): (-0.5, 4, 1),
        ("explicit", "Black", "b1"): (0.5, 2, 2),
        ("explicit", "Black", "b2"): (0.5, 2, 2),
        ("explicit", "Black", "b3"): (-0.5, 2, 2),
        ("explicit", "Black", "b4"): (-1.0, 2, 1),
        ("name_rosenman", "White", "b1"): (-0.5, 2, 2),
        ("name_rosenman", "White", "b2"): (0.5, 2, 2),
        ("name_rosenman", "White", "b3"): (-1.0, 1, 2),
    }
    assert got.keys() == expected.keys()
    for key, (d, n_cue, n_base) in expected.items():
        assert got[key][0] == pytest.approx(d, abs=1e-12), key
        assert got[key][1:] == (n_cue, n_base), key
    assert set(dev["model"]) == {"m"}


def test_prompt_deviations_by_gender_skips_rows_without_gender() -> None:
    dev = prompt_deviations(observations(HAND), "gender")
    # explicit rows carry no gender; name_rosenman White b4 has no parsed outcome
    assert set(dev["cue"]) == {"name_rosenman"}
    male = dev.filter(pl.col("group") == "male").sort("base_id")
    # b1: Black 1,1,1,0 + White 0,0 -> 3/6; b2: Black 1,0,0,0 + White 0,1 -> 2/6
    assert male["deviation"].to_list() == pytest.approx([0.5 - 0.5, 2 / 6 - 0.0])
    female = dev.filter(pl.col("group") == "female").sort("base_id")
    # b3: Black 1,1,1,1 + White 0 -> 4/5 vs 1; b4: Black 0,0,1,1 -> 0.5 vs 1
    assert female["base_id"].to_list() == ["b3", "b4"]
    assert female["deviation"].to_list() == pytest.approx([4 / 5 - 1.0, 0.5 - 1.0])


def test_correlations_match_hand_computation() -> None:
    corr = deviation_correlations(prompt_deviations(observations(HAND), "race"))
    assert corr.columns == [
        "model",
        "task",
        "cue_a",
        "group_a",
        "cue_b",
        "group_b",
        "r",
        "n",
        "ci_low",
        "ci_high",
        "note",
    ]
    got = {(r["cue_a"], r["group_a"], r["cue_b"], r["group_b"]): r for r in corr.to_dicts()}
    # 3 vectors -> 3 unordered pairs, each once, focal group first in cross-group pairs
    assert len(got) == 3
    within = got[("explicit", "Black", "name_rosenman", "Black")]
    # x = (.25,.25,0,-.5), y = (.5,.5,-.5,-1): Sxy = .75, Sxx = .375, Syy = 1.6875
    assert within["n"] == 4
    assert within["r"] == pytest.approx(0.75 / math.sqrt(0.375 * 1.6875))
    assert within["r"] == pytest.approx(2 * math.sqrt(2) / 3)
    same_cue = got[("name_rosenman", "Black", "name_rosenman", "White")]
    # shared b1..b3: x = (.25,.25,0), y = (-.5,.5,-1): Sxy = 1/6, Sxx = 1/24, Syy = 7/6
    assert same_cue["n"] == 3
    assert same_cue["r"] == pytest.approx((1 / 6) / math.sqrt(1 / 24 * 7 / 6))
    cross = got[("explicit", "Black", "name_rosenman", "White")]
    # x = (.5,.5,-.5), y = (-.5,.5,-1): Sxy = 2/3, Sxx = 2/3, Syy = 7/6
    assert cross["r"] == pytest.approx((2 / 3) / math.sqrt(2 / 3 * 7 / 6))
    assert corr["note"].null_count() == 3


def _random_deviations(rng: np.random.Generator, n_base: int, p_missing: float) -> pl.DataFrame:
    rows = []
    shared = rng.normal(size=n_base)
    for model in ("m1", "m2"):
        for cue in ("name_rosenman", "explicit", "dialog_cad"):
            for group in ("Black", "White"):
                v = 0.6 * shared + rng.normal(size=n_base)
                for b in range(n_base):
                    if rng.random() >= p_missing:
                        rows.append((model, "t", cue, group, f"b{b:04d}", float(v[b])))
    return pl.DataFrame(
        rows, schema=["model", "task", "cue", "group", "base_id", "deviation"], orient="row"
    )


@pytest.mark.parametrize("p_missing", [0.0, 0.15])
def test_correlations_match_scipy_pearsonr(p_missing: float) -> None:
    dev = _random_deviations(np.random.default_rng(7), 300, p_missing)
    corr = deviation_correlations(dev)
    assert corr.height == 2 * 15  # 6 vectors per model -> 15 pairs
    vec = {
        (m, c, g): dict(zip(p["base_id"], p["deviation"], strict=True))
        for (m, c, g), p in dev.partition_by(["model", "cue", "group"], as_dict=True).items()
    }
    for rec in corr.iter_rows(named=True):
        a = vec[(rec["model"], rec["cue_a"], rec["group_a"])]
        b = vec[(rec["model"], rec["cue_b"], rec["group_b"])]
        shared = sorted(a.keys() & b.keys())
        expected = stats.pearsonr([a[k] for k in shared], [b[k] for k in shared]).statistic
        assert rec["n"] == len(shared)
        assert rec["r"] == pytest.approx(expected, abs=1e-12)


def test_degenerate_pairs_are_null_with_a_note() -> None:
    rows = [
        # constant vector (zero variance)
        *[("m", "t", "explicit", "Black", f"b{i}", 0.5) for i in range(5)],
        *[("m", "t", "name_rosenman", "Black", f"b{i}", float(i)) for i in range(5)],
        # shares only two prompts with the others
        ("m", "t", "dialog_cad", "Black", "b0", 1.0),
        ("m", "t", "dialog_cad", "Black", "b1", 2.0),
        # a single-prompt vector
        ("m", "t", "name_rosenman", "White", "b3", 1.0),
    ]
    dev = pl.DataFrame(
        rows, schema=["model", "task", "cue", "group", "base_id", "deviation"], orient="row"
    )
    corr = deviation_correlations(dev)
    got = {(r["cue_a"], r["group_a"], r["cue_b"], r["group_b"]): r for r in corr.to_dicts()}
    assert len(got) == 6
    constant = got[("explicit", "Black", "name_rosenman", "Black")]
    assert (constant["r"], constant["n"], constant["note"]) == (None, 5, NOTE_CONSTANT)
    few = got[("dialog_cad", "Black", "name_rosenman", "Black")]
    assert (few["r"], few["n"], few["note"]) == (None, 2, NOTE_FEW)
    single = got[("name_rosenman", "Black", "name_rosenman", "White")]
    assert (single["r"], single["n"], single["note"]) == (None, 1, NOTE_FEW)
    assert corr["r"].null_count() == 6
    assert not corr["r"].is_nan().any()


def test_empty_input_gives_empty_frames() -> None:
    con = observations([("m", "t", "b1", "none", None, None, [1, 0])])
    dev = prompt_deviations(con, "race")
    assert dev.is_empty()
    corr = deviation_correlations(dev)
    assert corr.is_empty() and "r" in corr.columns
    avg = fisher_average(corr)
    assert avg.is_empty() and avg.columns[-3:] == ["r", "n_models", "n_min"]


def test_duplicate_rows_are_rejected() -> None:
    dev = pl.DataFrame(
        [("m", "t", "explicit", "Black", "b1", 0.1)] * 2 + [("m", "t", "x", "Black", "b2", 0.3)],
        schema=["model", "task", "cue", "group", "base_id", "deviation"],
        orient="row",
    )
    with pytest.raises(InputError, match="several rows"):
        deviation_correlations(dev)


def _pairs(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={
            "model": pl.String,
            "task": pl.String,
            "cue_a": pl.String,
            "group_a": pl.String,
            "cue_b": pl.String,
            "group_b": pl.String,
            "r": pl.Float64,
            "n": pl.Int64,
        },
        orient="row",
    )


def test_fisher_average_matches_hand_computation() -> None:
    corr = _pairs(
        [
            ("m1", "t", "explicit", "Black", "name_rosenman", "Black", 0.5, 13),
            ("m2", "t", "explicit", "Black", "name_rosenman", "Black", 0.8, 23),
            ("m3", "t", "explicit", "Black", "name_rosenman", "Black", None, 2),
            ("m1", "t", "explicit", "Black", "explicit", "White", 1.0, 50),
            ("m2", "t", "explicit", "Black", "explicit", "White", 0.5, 50),
            ("m1", "t", "dialog_cad", "White", "explicit", "White", None, 1),
        ]
    )
    avg = fisher_average(corr, weights="n_minus_3")
    assert avg.columns == [
        "task",
        "cue_a",
        "group_a",
        "cue_b",
        "group_b",
        "r",
        "n_models",
        "n_min",
    ]
    got = {(r["cue_a"], r["group_a"], r["cue_b"], r["group_b"]): r for r in avg.to_dicts()}
    w = got[("explicit", "Black", "name_rosenman", "Black")]
    # weights n-3 = 10 and 20: z = (10*atanh(.5) + 20*atanh(.8)) / 30 = 0.91551024
    assert w["r"] == pytest.approx(math.tanh(0.9155102405567581))
    assert w["r"] == pytest.approx(0.7237665005807843)
    assert (w["n_models"], w["n_min"]) == (2, 13)
    clipped = got[("explicit", "Black", "explicit", "White")]
    z_one = math.atanh(1 - 1e-12)
    assert clipped["r"] == pytest.approx(math.tanh((z_one + math.atanh(0.5)) / 2))
    assert clipped["r"] < 1.0
    empty = got[("dialog_cad", "White", "explicit", "White")]
    assert (empty["r"], empty["n_models"], empty["n_min"]) == (None, 0, None)


def test_fisher_average_is_unweighted_by_default_as_the_paper_reads() -> None:
    """The default is tanh(mean(atanh r)) over models (unequal n do not weigh in); n - 3
    weights are the option. Checked against numpy on correlations of unequal n."""
    rng = np.random.default_rng(7)
    pairs = [
        ("explicit", "Black", "name_rosenman", "Black"),
        ("explicit", "Black", "explicit", "White"),
    ]
    models = ["m1", "m2", "m3", "m4"]
    rows, expected_equal, expected_weighted = [], {}, {}
    for pair in pairs:
        r = np.tanh(rng.normal(0.4, 0.4, len(models)))
        n = rng.integers(5, 400, len(models))
        rows += [("m" + str(i + 1), "t", *pair, float(r[i]), int(n[i])) for i in range(len(models))]
        rows.append(("m5", "t", *pair, None, 2))  # no r: skipped by both
        expected_equal[pair] = np.tanh(np.mean(np.arctanh(r)))
        expected_weighted[pair] = np.tanh(np.average(np.arctanh(r), weights=n - 3))
    corr = _pairs(rows)
    default = fisher_average(corr)
    equal = fisher_average(corr, weights="equal")
    weighted = fisher_average(corr, weights="n_minus_3")
    assert default.equals(equal)
    for table, expected in ((equal, expected_equal), (weighted, expected_weighted)):
        got = {tuple(row[:4]): row[4] for row in table.select(*PAIRS, "r").iter_rows()}
        assert got == pytest.approx(expected, abs=1e-12)
    assert default["n_models"].to_list() == [4, 4]
    # with unequal n the two weightings give different averages
    assert abs(equal["r"][0] - weighted["r"][0]) > 1e-3
    with pytest.raises(InputError, match="fisher_weights"):
        fisher_average(corr, weights="n")  # type: ignore[arg-type]


def test_fisher_average_over_task_keeps_model() -> None:
    corr = _pairs(
        [
            ("m1", "t1", "explicit", "Black", "explicit", "White", 0.2, 103),
            ("m1", "t2", "explicit", "Black", "explicit", "White", 0.4, 103),
        ]
    )
    avg = fisher_average(corr, over="task")
    assert avg.columns[0] == "model"
    expected = math.tanh((math.atanh(0.2) + math.atanh(0.4)) / 2)
    assert avg["r"].item() == pytest.approx(expected)


def test_correlation_matrix_is_symmetric_with_unit_diagonal() -> None:
    avg = fisher_average(deviation_correlations(prompt_deviations(observations(HAND), "race")))
    rows, cols, mat = correlation_matrix(avg, "Black", "Black")
    assert rows == cols == ["explicit", "name_rosenman"]
    assert np.allclose(np.diag(mat), 1.0)
    assert np.allclose(mat, mat.T)
    assert mat[0, 1] == pytest.approx(2 * math.sqrt(2) / 3)
    rows, cols, mat = correlation_matrix(avg, "White", "Black")
    assert rows == ["name_rosenman"] and cols == ["explicit", "name_rosenman"]
    assert mat[0] == pytest.approx([2 / math.sqrt(7), 2 / math.sqrt(7)])


def test_bad_requests_raise_input_error() -> None:
    con = observations(HAND)
    with pytest.raises(InputError, match="dimension"):
        prompt_deviations(con, "age")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="observations"):
        prompt_deviations(duckdb.connect(), "race")
    with pytest.raises(InputError, match="over"):
        fisher_average(_pairs([]), over="cue_a")
