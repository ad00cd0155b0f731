from __future__ import annotations

from itertools import combinations
from pathlib import Path

import polars as pl
import pytest

from cueaudit.cues import REGISTRY
from cueaudit.cues.names import load_name_list, load_name_lists, sample_names
from cueaudit.errors import InputError

NAMES_DIR = Path(__file__).resolve().parents[2] / "resources" / "names"
NAME_SOURCES = REGISTRY["name"].sources
SHIPPED = [NAMES_DIR / f"{source}.csv" for source in NAME_SOURCES]


def _write(tmp_path: Path, text: str, name: str = "names.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("path", SHIPPED, ids=NAME_SOURCES)
def test_shipped_list_has_50_names_per_subgroup(path: Path) -> None:
    names = load_name_list(path)
    assert names.columns == ["name", "race", "gender", "source"]
    assert names.height == 200
    assert names["source"].unique().to_list() == [path.stem]
    counts = names.group_by("race", "gender").len().sort("race", "gender")
    assert counts.rows() == [
        ("Black", "female", 50),
        ("Black", "male", 50),
        ("White", "female", 50),
        ("White", "male", 50),
    ]


def test_shipped_lists_spot_check_and_overlap_statement() -> None:
    names = load_name_lists(SHIPPED)
    assert names.height == 600
    groups = {
        key: set(frame["name"].to_list())
        for key, frame in names.group_by("source", "race", "gender")
    }
    assert {"Tyrone", "Jamal"} <= groups[("elder_hayes", "Black", "male")]
    assert "Micahel" in groups[("tzioumis", "White", "male")]  # verbatim from the source
    assert "Xzavion" in groups[("rosenman", "Black", "male")]
    # Appendix A.1: no name is in all three sources for any group; Elder-Hayes and Tzioumis
    # share 17 Black names per gender and no White names; Rosenman shares no Black names
    # with either and at most two White names.
    for race in ("Black", "White"):
        for gender in ("male", "female"):
            sets = {s: groups[(s, race, gender)] for s in NAME_SOURCES}
            assert not set.intersection(*sets.values())
            for a, b in combinations(NAME_SOURCES, 2):
                shared = len(sets[a] & sets[b])
                if {a, b} == {"elder_hayes", "tzioumis"}:
                    assert shared == (17 if race == "Black" else 0)
                elif race == "Black":
                    assert shared == 0
                else:
                    assert shared <= 2


def test_normalises_case_and_whitespace(tmp_path: Path) -> None:
    path = _write(tmp_path, "name,race,gender,source,note\n Ana , white ,FEMALE, x ,hi\n")
    names = load_name_list(path)
    assert names.rows() == [("Ana", "White", "female", "x")]


@pytest.mark.parametrize(
    ("text", "field", "fragment"),
    [
        ("name,race,gender\nAna,White,female\n", "source", "required column"),
        ("name,race,gender,source\nAna,Asian,female,x\n", "race", "'Asian'"),
        ("name,race,gender,source\nAna,White,woman,x\n", "gender", "'woman'"),
        ("name,race,gender,source\n ,White,female,x\n", "name", "line 2"),
        ("name,race,gender,source\nAna,White,female,x\nAna,white,Female,x\n", "name", "line 3"),
        ("name,race,gender,source\nAna,White,female,\n", "source", "empty source"),
    ],
)
def test_bad_rows_raise_naming_file_and_field(
    tmp_path: Path, text: str, field: str, fragment: str
) -> None:
    path = _write(tmp_path, text, "bad_list.csv")
    with pytest.raises(InputError) as info:
        load_name_list(path)
    message = str(info.value)
    assert "bad_list.csv" in message
    assert f"field '{field}'" in message
    assert fragment in message
    assert info.value.field == field


def test_empty_missing_and_non_utf8_files(tmp_path: Path) -> None:
    empty = _write(tmp_path, "", "empty.csv")
    with pytest.raises(InputError, match=r"empty\.csv: file is empty"):
        load_name_list(empty)
    header_only = _write(tmp_path, "name,race,gender,source\n", "header.csv")
    with pytest.raises(InputError, match=r"header\.csv: no data rows"):
        load_name_list(header_only)
    with pytest.raises(InputError, match=r"absent\.csv: file not found"):
        load_name_list(tmp_path / "absent.csv")
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes("name,race,gender,source\nJosé,White,male,x\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1\.csv: not valid UTF-8 at line 2"):
        load_name_list(latin1)
    ragged = _write(tmp_path, "name,race,gender,source\nAna,White,female\n", "ragged.csv")
    with pytest.raises(InputError, match=r"ragged\.csv: line 2: 3 fields, header has 4"):
        load_name_list(ragged)


def test_load_name_lists_requires_one_distinct_source_per_file(tmp_path: Path) -> None:
    mixed = _write(tmp_path, "name,race,gender,source\nAna,White,female,a\nBo,White,male,b\n")
    with pytest.raises(InputError, match=r"names\.csv: field 'source': one source per file"):
        load_name_lists([mixed])
    first = _write(tmp_path, "name,race,gender,source\nAna,White,female,a\n", "one.csv")
    second = _write(tmp_path, "name,race,gender,source\nBo,White,male,a\n", "two.csv")
    with pytest.raises(InputError, match=r"two\.csv: field 'source': .*one\.csv"):
        load_name_lists([first, second])


def _group(names: list[str], source: str = "s") -> pl.DataFrame:
    return pl.DataFrame(
        {
            "name": names,
            "race": ["Black"] * len(names),
            "gender": ["male"] * len(names),
            "source": [source] * len(names),
        }
    )


def test_sample_names_is_deterministic_and_per_group() -> None:
    names = load_name_lists(SHIPPED)
    first = sample_names(names, 5, seed=1)
    assert first.height == 12 * 5
    assert first.group_by("source", "race", "gender").len()["len"].to_list() == [5] * 12
    assert first.equals(sample_names(names.reverse(), 5, seed=1))  # row order is irrelevant
    assert not first.equals(sample_names(names, 5, seed=2))
    assert sample_names(names, None, seed=1).height == 600


def test_adding_a_name_changes_only_its_subgroup_by_at_most_one() -> None:
    names = load_name_lists(SHIPPED)
    before = sample_names(names, 10, seed=3)
    extra = pl.DataFrame(
        [("Zebedee", "White", "male", "tzioumis")], schema=names.schema, orient="row"
    )
    after = sample_names(pl.concat([names, extra]), 10, seed=3)
    changed = before.join(after, on=list(before.columns), how="anti")
    assert changed.height <= 1
    assert set(changed["gender"].to_list()) <= {"male"}
    other = pl.col("source") != "tzioumis"
    assert before.filter(other).equals(after.filter(other))


def test_sample_names_rejects_bad_sizes() -> None:
    names = _group(["A", "B", "C"])
    assert sample_names(names, 3, seed=0)["name"].to_list() == ["A", "B", "C"]
    with pytest.raises(InputError, match="per_group"):
        sample_names(names, 4, seed=0)
    with pytest.raises(InputError, match="per_group"):
        sample_names(names, 0, seed=0)
