"""The specification curve's array-level inference (cueaudit.stats.specification_curve) against
values computed by hand on a tiny curve, its edge cases (ties in a statistic, specifications
that could not be estimated, no permutations), and the within-strata relabellings: counts
checked against the multinomial formula, every distinct relabelling when there are few, a
sample without replacement when there are many."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cueaudit.errors import InputError
from cueaudit.stats.specification_curve import (
    curve_statistics,
    curve_test,
    distinct_relabellings,
    permutation_p,
    within_strata_permutations,
)

NAN = float("nan")
#: Observed: three usable specifications (the fourth could not be estimated).
ESTIMATES = [0.5, -0.2, 0.3, NAN]
P_VALUES = [0.01, 0.2, 0.04, 0.5]
#: Four permuted curves: A, B, E by hand below; the last could not be estimated anywhere.
PERMUTED_ESTIMATES = np.array(
    [
        [0.1, -0.1, 0.2, 0.0],
        [-0.4, -0.3, -0.5, NAN],
        [0.2, -0.2, NAN, NAN],
        [NAN, NAN, NAN, NAN],
    ]
)
PERMUTED_P = np.array(
    [
        [0.5, 0.6, 0.01, 0.9],
        [0.01, 0.02, 0.001, NAN],
        [0.01, 0.01, NAN, NAN],
        [NAN, NAN, NAN, NAN],
    ]
)


def test_curve_statistics_by_hand() -> None:
    stats = curve_statistics(ESTIMATES, P_VALUES, 0.05)
    # median of 0.5, -0.2, 0.3; 0.5 and 0.3 significant, both positive
    assert stats.specifications == 3
    assert stats.median == pytest.approx(0.3)
    assert stats.significant == 2
    assert stats.share_significant == pytest.approx(2 / 3)
    assert (stats.dominant_sign, stats.dominant) == (1, 2)
    # one significant each way: no dominant sign, one in it
    split = curve_statistics([0.2, -0.2], [0.01, 0.01], 0.05)
    assert (split.dominant_sign, split.dominant, split.median) == (0, 1, 0.0)
    negative = curve_statistics([-0.4, -0.3, -0.5], [0.01, 0.02, 0.001], 0.05)
    assert (negative.dominant_sign, negative.dominant, negative.median) == (-1, 3, -0.4)


def test_curve_test_p_values_by_hand() -> None:
    test = curve_test(ESTIMATES, P_VALUES, PERMUTED_ESTIMATES, PERMUTED_P, 0.05)
    # permuted |median| 0.05, 0.4, 0.0 (the all-NaN curve left out): one >= 0.3
    assert test.permutations == 3
    assert test.p_median == pytest.approx((1 + 1) / (1 + 3))
    # permuted shares 0.25, 1.0, 1.0: two >= 2/3
    assert test.p_share == pytest.approx((1 + 2) / (1 + 3))
    # permuted dominant counts 1, 3, 1: one >= 2
    assert test.p_dominant == pytest.approx((1 + 1) / (1 + 3))
    assert test.observed == curve_statistics(ESTIMATES, P_VALUES, 0.05)


def test_ties_count_as_extreme_up_to_rounding() -> None:
    # a permuted statistic equal to the observed one, or below it by rounding, counts
    assert permutation_p(0.3, np.array([0.3, 0.1])) == pytest.approx(2 / 3)
    assert permutation_p(0.3, np.array([0.3 - 1e-13, 0.1])) == pytest.approx(2 / 3)
    assert permutation_p(0.3, np.array([0.3 - 1e-6, 0.1])) == pytest.approx(1 / 3)
    # the median's statistic is two-sided: a curve with the opposite median ties
    mirrored = curve_test([0.3, 0.5], [0.01, 0.01], -np.array([[0.3, 0.5]]), [[0.01, 0.01]], 0.05)
    assert (mirrored.p_median, mirrored.p_share, mirrored.p_dominant) == (1.0, 1.0, 1.0)
    # count statistics tie exactly: two permuted curves with as many significant
    counts = curve_test(
        [0.1, 0.2], [0.01, 0.5], np.array([[0.3, 0.1], [-0.2, 0.1]]), [[0.5, 0.01], [0.01, 0.5]],
        0.05,
    )  # fmt: skip
    assert counts.p_share == 1.0 and counts.p_dominant == 1.0


def test_unusable_curves_and_missing_permutations() -> None:
    empty = curve_test([NAN, NAN], [NAN, 0.1], np.array([[0.1, 0.2]]), [[0.01, 0.01]], 0.05)
    assert empty.observed.specifications == 0
    assert np.isnan(empty.observed.median) and np.isnan(empty.observed.share_significant)
    assert all(np.isnan([empty.p_median, empty.p_share, empty.p_dominant]))
    none = curve_test(ESTIMATES, P_VALUES, np.empty((0, 4)), np.empty((0, 4)), 0.05)
    assert none.permutations == 0 and np.isnan(none.p_median)
    assert none.observed.median == pytest.approx(0.3)
    everything_nan = curve_test(
        ESTIMATES, P_VALUES, np.full((3, 4), NAN), np.full((3, 4), NAN), 0.05
    )
    assert everything_nan.permutations == 0 and np.isnan(everything_nan.p_share)


def test_bad_input_is_refused() -> None:
    with pytest.raises(InputError, match="alpha"):
        curve_statistics([0.1], [0.01], 1.0)
    with pytest.raises(InputError, match="p-values"):
        curve_statistics([0.1, 0.2], [0.01], 0.05)
    with pytest.raises(InputError, match=r"expected \(B, 4\)"):
        curve_test(ESTIMATES, P_VALUES, np.zeros((2, 3)), np.zeros((2, 3)), 0.05)


# --- relabellings ------------------------------------------------------------------------------
RACES = ["Black", "White", "Hispanic", "Asian"]
#: One name pair per race x gender.
PAIR_RACE = RACES * 2
PAIR_GENDER = ["female"] * 4 + ["male"] * 4


def _within(rows: np.ndarray, labels: list[str], strata: list[str]) -> bool:
    """Each row permutes the labels within each stratum."""
    for s in set(strata):
        where = [i for i, t in enumerate(strata) if t == s]
        wanted = sorted(labels[i] for i in where)
        if any(sorted(row[where].tolist()) != wanted for row in rows):
            return False
    return True


def test_few_relabellings_are_all_enumerated() -> None:
    assert distinct_relabellings(PAIR_RACE, PAIR_GENDER) == 24 * 24
    race = within_strata_permutations(PAIR_RACE, PAIR_GENDER, 1000, np.random.default_rng(0))
    assert race.distinct == 575 and race.exhaustive
    rows = {tuple(r) for r in race.labels.tolist()}
    assert len(rows) == 575 and tuple(PAIR_RACE) not in rows
    assert _within(race.labels, PAIR_RACE, PAIR_GENDER)
    # gender among the two pairs of each race: 2^4 labellings
    gender = within_strata_permutations(PAIR_GENDER, PAIR_RACE, 99, np.random.default_rng(0))
    assert (gender.distinct, gender.exhaustive, gender.labels.shape) == (15, True, (15, 8))


def test_more_relabellings_than_asked_are_drawn_without_replacement() -> None:
    draw = within_strata_permutations(PAIR_RACE, PAIR_GENDER, 20, np.random.default_rng(3))
    again = within_strata_permutations(PAIR_RACE, PAIR_GENDER, 20, np.random.default_rng(3))
    assert not draw.exhaustive and draw.labels.shape == (20, 8)
    assert len({tuple(r) for r in draw.labels.tolist()}) == 20
    assert (draw.labels == again.labels).all()
    # 40 pairs (five per race x gender): too many to enumerate, sampled with rejection of repeats
    labels = [r for r in RACES for _ in range(5)] * 2
    strata = ["female"] * 20 + ["male"] * 20
    assert (
        distinct_relabellings(labels, strata) == (math.factorial(20) // math.factorial(5) ** 4) ** 2
    )
    big = within_strata_permutations(labels, strata, 50, np.random.default_rng(1))
    assert big.labels.shape == (50, 40) and not big.exhaustive
    assert len({tuple(r) for r in big.labels.tolist()}) == 50
    assert _within(big.labels, labels, strata)


def test_relabelling_edge_cases() -> None:
    assert distinct_relabellings(["a", "a", "b"], ["s", "s", "s"]) == 3
    repeated = within_strata_permutations(["a", "a", "b"], ["s"] * 3, 10, np.random.default_rng(0))
    assert sorted(map(tuple, repeated.labels.tolist())) == [("a", "b", "a"), ("b", "a", "a")]
    # a stratum of one unit has nothing to permute
    alone = within_strata_permutations(["a", "b"], ["s", "t"], 10, np.random.default_rng(0))
    assert (alone.distinct, alone.labels.shape, alone.exhaustive) == (0, (0, 2), True)
    nothing = within_strata_permutations(PAIR_RACE, PAIR_GENDER, 0, np.random.default_rng(0))
    assert nothing.labels.shape == (0, 8) and nothing.distinct == 575
    with pytest.raises(InputError, match="non-negative"):
        within_strata_permutations(PAIR_RACE, PAIR_GENDER, -1, np.random.default_rng(0))
    with pytest.raises(InputError, match="strata"):
        distinct_relabellings(PAIR_RACE, PAIR_GENDER[:3])
