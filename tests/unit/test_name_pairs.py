from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from cueaudit.cues.name_pairs import (
    NAME_PAIR_SCHEMA,
    load_name_pairs,
    pairs_from_stimuli,
)
from cueaudit.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "resources/names/elder_hayes_pairs.csv"
STIMULI = ROOT.parent / "shared/data/fairfund/stimuli.csv"


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
    from cueaudit.decision.fairfund import load_fairfund_stimuli

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
