"""The analyses' frames do not depend on the order the answers reach the database."""

from __future__ import annotations

import duckdb
import polars as pl

from cueaudit.decision.analysis.frames import load_frames


def outcome_rows() -> pl.DataFrame:
    """Rate and Rank answers of two tasks, as the decision_outcomes view holds them."""
    rate = [
        {
            "model": "m",
            "seed": 0,
            "task": "decision_rate_text",
            "prompt_uid": f"r{i}",
            "format": "rate",
            "profile_id": f"p{i % 3}",
            "race": ("Black", "White")[i % 2],
            "answer": float(1 + i % 5),
            "ranks": None,
            "candidates_position": None,
            "candidates_race": None,
        }
        for i in range(6)
    ]
    rank = [
        {
            "model": "m",
            "seed": 0,
            "task": "decision_rank_json",
            "prompt_uid": f"k{i}",
            "format": "rank",
            "profile_id": None,
            "race": None,
            "answer": None,
            "ranks": [1 + (i + j) % 4 for j in range(4)],
            "candidates_position": [1, 2, 3, 4],
            "candidates_race": ["Black", "White", "Asian", "Hispanic"],
        }
        for i in range(4)
    ]
    return pl.DataFrame(rate + rank)


def frames_from(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    con = duckdb.connect()
    con.register("decision_outcomes", rows.to_arrow())
    frames = load_frames(con)
    return frames.judgements, frames.rankings


def test_frames_are_the_same_whatever_order_the_answers_arrive_in() -> None:
    rows = outcome_rows()
    judgements, rankings = frames_from(rows)
    assert judgements.height == 6 and rankings.height == 16
    for seed in range(3):
        shuffled = rows.sample(fraction=1.0, shuffle=True, seed=seed)
        assert not shuffled.equals(rows)  # the check is on another order
        again_judgements, again_rankings = frames_from(shuffled)
        assert again_judgements.equals(judgements)
        assert again_rankings.equals(rankings)
    # rows come in answer order, and a ranking's candidates in its listed order
    assert judgements["prompt_uid"].to_list() == [f"r{i}" for i in range(6)]
    assert rankings["prompt_uid"].to_list()[:4] == ["k0"] * 4
    assert rankings["position"].to_list()[:4] == [1, 2, 3, 4]
