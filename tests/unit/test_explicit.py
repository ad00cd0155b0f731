from __future__ import annotations

import pytest

from cueaudit.cues.explicit import EXPLICIT_CATEGORIES, explicit_descriptors
from cueaudit.errors import InputError


def test_23_distinct_variants_with_paper_category_sizes() -> None:
    table = explicit_descriptors()
    assert table.columns == ["descriptor", "category", "race", "gender"]
    assert table.height == 23
    assert table["descriptor"].n_unique() == 23
    counts = dict(table.group_by("category").len().rows())
    assert counts == {
        "race_gender": 10,
        "race": 5,
        "gender": 2,
        "nationality_gender": 2,
        "nationality_race_gender": 4,
    }


@pytest.mark.parametrize(
    ("descriptor", "category", "race", "gender"),
    [
        ("a Black male", "race_gender", "Black", "male"),
        ("an African American male", "race_gender", "Black", "male"),
        ("a White American female", "race_gender", "White", "female"),
        ("Black American", "race", "Black", None),
        ("White", "race", "White", None),
        ("a female", "gender", None, "female"),
        ("an American male", "nationality_gender", None, "male"),
        ("an American White female", "nationality_race_gender", "White", "female"),
        ("an American Black male", "nationality_race_gender", "Black", "male"),
    ],
)
def test_exact_rows(descriptor: str, category: str, race: str | None, gender: str | None) -> None:
    table = explicit_descriptors()
    rows = table.filter(table["descriptor"] == descriptor).rows()
    assert rows == [(descriptor, category, race, gender)]


def test_redundant_nationality_is_never_added() -> None:
    descriptors = explicit_descriptors()["descriptor"].to_list()
    assert not [d for d in descriptors if d.count("American") > 1]
    assert "an American African American male" not in descriptors
    assert "a African American male" not in descriptors


def test_category_selection_and_order() -> None:
    table = explicit_descriptors(["gender", "race"])
    assert table["category"].to_list() == ["gender"] * 2 + ["race"] * 5
    assert explicit_descriptors(list(EXPLICIT_CATEGORIES)).equals(explicit_descriptors())


def test_unknown_category_is_named() -> None:
    with pytest.raises(InputError, match="field 'categories': unknown category 'religion'"):
        explicit_descriptors(["race", "religion"])
    with pytest.raises(InputError, match="categories"):
        explicit_descriptors("race")
