"""Table 3 (race prediction): undefined precision / recall are null with a note, never 0.0.

Counts are written out per cue; precision and recall are checked against scikit-learn's
``precision_recall_fscore_support`` (``zero_division=nan``) on the same answers, F1 against it
where both are defined.
"""

from __future__ import annotations

import math

import duckdb
import numpy as np
import polars as pl
import pytest
from sklearn.metrics import precision_recall_fscore_support

from cueaudit.probing.analysis.race_prediction import race_prediction_metrics

#: cue -> list of (cued race, predicted label or None for unparsed, count)
DESIGN: dict[str, list[tuple[str, str | None, int]]] = {
    "name_rosenman": [
        ("Black", "Black", 7),
        ("Black", "White", 2),
        ("Black", "Unknown", 1),
        ("White", "White", 4),
        ("White", "Black", 3),
        ("White", "Unknown", 2),
        ("White", None, 1),
    ],
    # The paper's dialect row: AAVE cues Black only, so White has no true members (recall
    # undefined), and this model never says White either (precision undefined).
    "dialect_aave": [("Black", "Black", 3), ("Black", "Unknown", 5), ("Black", None, 2)],
    # Same cue, another model that does say White: precision 0/2 = 0.0 is defined.
    "dialect_aave@m2": [("Black", "Black", 1), ("Black", "White", 2), ("Black", "Unknown", 1)],
    # Every answer wrong: precision and recall defined and 0, so F1 = 0.0.
    "explicit": [("Black", "White", 4), ("White", "Black", 4)],
}


def _connection() -> duckdb.DuckDBPyConnection:
    prompts, predictions = [], []
    for key, cells in DESIGN.items():
        cue, _, model = key.partition("@")
        model = model or "m1"
        for race, predicted, count in cells:
            for i in range(count):
                uid = f"{model}-{cue}-{race}-{predicted}-{i}"
                prompts.append((uid, "healthcare", cue, race))
                predictions.append((model, "healthcare", uid, predicted))
    con = duckdb.connect()
    con.register(
        "prompts",
        pl.DataFrame(prompts, schema=["prompt_uid", "task", "cue", "race"], orient="row"),
    )
    con.register(
        "race_predictions",
        pl.DataFrame(
            predictions,
            schema=["model", "source_task", "source_prompt_uid", "predicted"],
            orient="row",
        ),
    )
    return con


def _row(table: pl.DataFrame, model: str, cue: str, cls: str) -> dict[str, object]:
    rows = table.filter(
        (pl.col("model") == model)
        & (pl.col("task") == "all")
        & (pl.col("cue") == cue)
        & (pl.col("class") == cls)
    ).to_dicts()
    assert len(rows) == 1
    return rows[0]


def test_undefined_metrics_are_null_with_a_note_not_zero() -> None:
    table = race_prediction_metrics(_connection())
    # dialect, model m1: no White prompts and no White answers
    white = _row(table, "m1", "dialect_aave", "White")
    assert (white["precision"], white["recall"], white["f1"]) == (None, None, None)
    assert (white["support"], white["predicted"], white["true_positive"]) == (0, 0, 0)
    assert "no parsed predictions for White prompts" in str(white["note"])
    assert "never predicted White" in str(white["note"])
    black = _row(table, "m1", "dialect_aave", "Black")
    assert (black["precision"], black["recall"]) == (1.0, 3 / 8)
    assert black["f1"] == pytest.approx(2 * 1.0 * 0.375 / 1.375)
    assert (black["n_parsed"], black["n_unparsed"], black["note"]) == (8, 2, None)
    # dialect, model m2: White predicted twice, never true: precision 0.0 is a real value,
    # recall undefined, so F1 is null
    white = _row(table, "m2", "dialect_aave", "White")
    assert (white["precision"], white["recall"], white["f1"]) == (0.0, None, None)
    assert white["note"] == "no parsed predictions for White prompts under this cue"
    # all wrong: both defined and 0, F1 0.0
    for cls in ("Black", "White"):
        wrong = _row(table, "m1", "explicit", cls)
        assert (wrong["precision"], wrong["recall"], wrong["f1"]) == (0.0, 0.0, 0.0)
        assert wrong["note"] is None


def test_precision_and_recall_match_scikit_learn() -> None:
    table = race_prediction_metrics(_connection())
    checked = 0
    for key, cells in DESIGN.items():
        cue, _, model = key.partition("@")
        model = model or "m1"
        truth = [race for race, predicted, n in cells for _ in range(n) if predicted is not None]
        said = [predicted for _, predicted, n in cells for _ in range(n) if predicted is not None]
        precision, recall, f1, support = precision_recall_fscore_support(
            truth, said, labels=["Black", "White"], zero_division=np.nan
        )
        for k, cls in enumerate(("Black", "White")):
            row = _row(table, model, cue, cls)
            for ours, theirs in ((row["precision"], precision[k]), (row["recall"], recall[k])):
                assert (ours is None) == math.isnan(theirs), (key, cls)
                if ours is not None:
                    assert ours == pytest.approx(theirs, abs=1e-15)
            if row["precision"] is not None and row["recall"] is not None:
                assert row["f1"] == pytest.approx(f1[k], abs=1e-15)
            else:
                assert row["f1"] is None
            assert row["support"] == support[k]
            checked += 1
    assert checked == 8
    rosenman_white = _row(table, "m1", "name_rosenman", "White")
    assert (rosenman_white["precision"], rosenman_white["recall"]) == (4 / 6, 4 / 9)
