"""From raw completions to outcomes: parsed answers and answer-token probabilities."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final, Literal

import polars as pl

from cueaudit.io import write_parquet
from cueaudit.parsing import parse_answers, parse_race_answers

OutcomeKind = Literal["binary", "usd", "race"]

OUTCOME_SCHEMA: Final = {
    "prompt_uid": pl.String,
    "model": pl.String,
    "seed": pl.Int64,
    "task": pl.String,
    "answer": pl.Float64,
    "parse_error": pl.String,
    "p_affirmative": pl.Float64,
    "answer_mass": pl.Float64,
    "answer_label": pl.String,  # race prediction: Black / White / Unknown (null otherwise)
}


def parse_responses(responses: pl.DataFrame, kind: OutcomeKind) -> pl.DataFrame:
    """One outcome row per response.

    ``answer`` is the parsed completion (null with a ``parse_error`` reason when it cannot be
    read); for yes/no tasks ``p_affirmative`` is P(Yes) / (P(Yes) + P(No)) at the first
    generated token and ``answer_mass`` is P(Yes) + P(No).
    """
    if kind == "race":
        labels = parse_race_answers(responses["completion"])
        parsed = pl.DataFrame(
            {"outcome": pl.Series([None] * responses.height, dtype=pl.Float64)}
        ).with_columns(parse_error=labels["parse_error"], label=labels["label"])
    else:
        parsed = parse_answers(responses["completion"], kind).with_columns(
            label=pl.lit(None, pl.String)
        )
    mass = responses["p_yes"] + responses["p_no"]
    binary = kind == "binary"
    return (
        responses.select("prompt_uid", "model", "seed", "task")
        .with_columns(
            answer=parsed["outcome"],
            parse_error=parsed["parse_error"],
            answer_label=parsed["label"],
            p_affirmative=(
                pl.when(pl.lit(binary) & (mass > 0)).then(responses["p_yes"] / mass).otherwise(None)
            ),
            answer_mass=pl.when(pl.lit(binary)).then(mass).otherwise(None),
        )
        .select(list(OUTCOME_SCHEMA))
        .cast(OUTCOME_SCHEMA)
    )


def parse_response_files(
    paths: Sequence[str | Path], kind: OutcomeKind, out_path: str | Path
) -> pl.DataFrame:
    """Parse the response shards of one model, seed and task into one outcome table."""
    responses = pl.concat([pl.read_parquet(p) for p in paths])
    outcomes = parse_responses(responses, kind)
    write_parquet(outcomes, out_path)
    return outcomes
