"""Derive race × gender name lists: race-specificity from a source × gender share from SSA.

For race r and gender g a name's score is P(r | name) from the source times the SSA share of
g among its births in the configured years; names below the minimum SSA count, below the
gender-share cut-off or (Tzioumis) below the minimum source count are dropped, and the
``top_n`` highest scores per subgroup are kept (ties broken by name). Names are title-cased.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import polars as pl

from cueaudit.cues.names import load_name_lists
from cueaudit.cues.vocabulary import GENDERS, NAME_LIST_RACES
from cueaudit.errors import InputError
from cueaudit.io import write_csv, write_parquet

log = logging.getLogger(__name__)

# Thresholds that reproduce most of the published lists from the real data (docs/cue-resources.md).
DEFAULTS: Final = {
    "top_n": 50,
    "min_ssa_count": 1000,
    "min_gender_share": 0.8,
    "min_race_share": 0.3,
    "min_source_count": 0,
    "ssa_years": [1880, 2017],
}


def derive_names(
    race_table: pl.DataFrame, ssa: pl.DataFrame, source: str, settings: Mapping[str, Any]
) -> pl.DataFrame:
    """``name, race, gender, source, score, p_race, gender_share, ssa_count`` per kept name."""
    s = {**DEFAULTS, **settings}
    joined = race_table.join(ssa, on="name", how="inner").with_columns(
        ssa_count=pl.col("count_female") + pl.col("count_male")
    )
    joined = joined.filter(pl.col("ssa_count") >= s["min_ssa_count"])
    if "obs" in joined.columns and s["min_source_count"]:
        joined = joined.filter(pl.col("obs") >= s["min_source_count"])
    parts = []
    for race in NAME_LIST_RACES:
        for gender in GENDERS:
            share = pl.col("count_female" if gender == "female" else "count_male") / pl.col(
                "ssa_count"
            )
            p_race = pl.col(f"p_{race.lower()}")
            cand = joined.with_columns(p_race=p_race, gender_share=share).filter(
                (pl.col("p_race") >= s["min_race_share"])
                & (pl.col("gender_share") >= s["min_gender_share"])
            )
            if "gender" in cand.columns:  # Elder & Hayes' own gender field, when present
                cand = cand.filter(pl.col("gender").is_null() | (pl.col("gender") == gender))
            cand = (
                cand.with_columns(score=pl.col("p_race") * pl.col("gender_share"))
                .sort(["score", "name"], descending=[True, False])
                .head(s["top_n"])
            )
            parts.append(
                cand.select(
                    name=pl.col("name").str.to_titlecase(),
                    race=pl.lit(race),
                    gender=pl.lit(gender),
                    source=pl.lit(source),
                    score="score",
                    p_race="p_race",
                    gender_share="gender_share",
                    ssa_count="ssa_count",
                )
            )
    out = pl.concat(parts)
    short = out.group_by("race", "gender").len().filter(pl.col("len") < s["top_n"])
    for race, gender, n in short.iter_rows():
        log.warning("%s %s/%s: only %d names pass the thresholds", source, race, gender, n)
    return out


def overlap_table(derived: pl.DataFrame, published: pl.DataFrame) -> pl.DataFrame:
    """Per source × race × gender: list sizes, intersection and Jaccard index (case-folded)."""
    rows = []
    sources = sorted(set(derived["source"]) | set(published["source"]))
    for source in sources:
        for race in NAME_LIST_RACES:
            for gender in GENDERS:

                def names(
                    frame: pl.DataFrame,
                    source: str = source,
                    race: str = race,
                    gender: str = gender,
                ) -> set[str]:
                    return set(
                        frame.filter(
                            (pl.col("source") == source)
                            & (pl.col("race") == race)
                            & (pl.col("gender") == gender)
                        )["name"].str.to_lowercase()
                    )

                d, p = names(derived), names(published)
                union = d | p
                rows.append(
                    {
                        "source": source,
                        "race": race,
                        "gender": gender,
                        "n_derived": len(d),
                        "n_published": len(p),
                        "intersection": len(d & p),
                        "jaccard": len(d & p) / len(union) if union else None,
                    }
                )
    return pl.DataFrame(
        rows,
        schema={
            "source": pl.String,
            "race": pl.String,
            "gender": pl.String,
            "n_derived": pl.Int64,
            "n_published": pl.Int64,
            "intersection": pl.Int64,
            "jaccard": pl.Float64,
        },
    )


def run_name_derivation(
    spec: Mapping[str, Any],
    published_lists: Mapping[str, str],
    *,
    derived_path: str | Path,
    overlap_path: str | Path,
) -> pl.DataFrame:
    """The ``derive_names`` rule: derive every configured source, write lists and overlap."""
    from cueaudit.cues.sources.loaders import load_source, load_ssa_source

    settings = {k: spec[k] for k in DEFAULTS if k in spec}
    years = settings.get("ssa_years", DEFAULTS["ssa_years"])
    if "ssa" not in spec:
        raise InputError("config", "name derivation needs an SSA source", "cues.names.derive.ssa")
    ssa = load_ssa_source(spec["ssa"], (int(years[0]), int(years[1])))
    frames = [
        derive_names(load_source(source, spec[source]), ssa, source, settings)
        for source in ("rosenman", "elder_hayes", "tzioumis")
        if source in spec
    ]
    if not frames:
        raise InputError("config", "no name source to derive from", "cues.names.derive")
    derived = pl.concat(frames)
    published = (
        load_name_lists(published_lists.values())
        if published_lists
        else pl.DataFrame(schema=dict.fromkeys(("name", "race", "gender", "source"), pl.String))
    )
    overlap = overlap_table(derived, published)
    write_parquet(derived, derived_path)
    write_csv(overlap, overlap_path)
    return overlap
