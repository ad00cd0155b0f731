"""Group-sequential boundaries (cueaudit.stats.sequential) against R rpact, and their type I
error over looks by simulation of the sequential z statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from cueaudit.errors import InputError
from cueaudit.stats.sequential import (
    alpha_spent,
    boundaries,
    crossing_probabilities,
    reject_at,
)
from tests.r.rscript import run_reference

DESIGNS = {
    "of3": ((0.3, 0.6, 1.0), 0.025, "obrien_fleming", 1),
    "of3two": ((0.3, 0.6, 1.0), 0.05, "obrien_fleming", 2),
    "of2": ((0.5, 1.0), 0.025, "obrien_fleming", 1),
    "p4two": ((0.25, 0.5, 0.75, 1.0), 0.05, "pocock", 2),
    "p3": ((0.2, 0.7, 1.0), 0.025, "pocock", 1),
    "of5": ((0.1, 0.35, 0.5, 0.8, 1.0), 0.05, "obrien_fleming", 2),
}


def test_boundaries_match_rpact(tmp_path: Path) -> None:
    rows = [
        (name, k, t, alpha, spending, sided)
        for name, (fractions, alpha, spending, sided) in DESIGNS.items()
        for k, t in enumerate(fractions)
    ]
    data = pd.DataFrame(rows, columns=["design", "look", "fraction", "alpha", "spending", "sided"])
    r = run_reference("rpact_reference.R", "rpact", data, tmp_path)
    for name, (fractions, alpha, spending, sided) in DESIGNS.items():
        ours = boundaries(fractions, alpha, spending, sided)
        for k in range(len(fractions)):
            expected = r[f"{name}_{k}"]
            assert ours.critical[k] == pytest.approx(expected["critical"], abs=2e-6), (name, k)
            assert ours.alpha_spent[k] == pytest.approx(expected["alpha_spent"], rel=1e-6)
            assert ours.nominal[k] == pytest.approx(expected["nominal"], rel=1e-5)


def test_known_values_and_limits() -> None:
    # one look spends all of alpha at the fixed-sample critical value
    assert boundaries([1.0], 0.025).critical[0] == pytest.approx(stats.norm.isf(0.025))
    assert boundaries([1.0], 0.05, sided=2).critical[0] == pytest.approx(1.959964, abs=1e-6)
    # O'Brien-Fleming spends almost nothing early; Pocock's bounds are nearly flat
    of = boundaries([0.25, 0.5, 0.75, 1.0], 0.05, "obrien_fleming", 2)
    pocock = boundaries([0.25, 0.5, 0.75, 1.0], 0.05, "pocock", 2)
    assert of.critical[0] > 4 > 2.5 > pocock.critical[0]
    assert max(pocock.critical) - min(pocock.critical) < 0.02
    for design in (of, pocock):
        assert crossing_probabilities(design).sum() == pytest.approx(0.05, abs=1e-9)
    assert alpha_spent([1.0], 0.05, "pocock")[0] == pytest.approx(0.05)


def test_type_one_error_over_looks_by_simulation() -> None:
    """100,000 null paths of the sequential z statistics (independent increments): the
    spending design keeps its alpha over the looks; testing every look at 1.96 does not."""
    rng = np.random.default_rng(20261202)
    fractions = np.array([0.25, 0.5, 0.75, 1.0])
    steps = rng.standard_normal((100_000, 4)) * np.sqrt(np.diff(fractions, prepend=0.0))
    z = np.cumsum(steps, axis=1) / np.sqrt(fractions)
    for spending in ("obrien_fleming", "pocock"):
        design = boundaries(fractions, 0.05, spending, 2)
        crossed = (np.abs(z) >= np.asarray(design.critical)).any(axis=1)
        # binomial SE at 100,000 paths is 0.0007
        assert crossed.mean() == pytest.approx(0.05, abs=0.0025), spending
    naive = (np.abs(z) >= 1.959964).any(axis=1).mean()
    assert naive > 0.11  # the check fails on boundaries that ignore the looks


def test_power_under_drift() -> None:
    fixed = boundaries([1.0], 0.05, sided=2)
    # a two-sided z test at drift 2.8016 has power 0.80 (less the far tail)
    assert crossing_probabilities(fixed, 2.8016).sum() == pytest.approx(0.8, abs=1e-3)
    design = boundaries([0.5, 1.0], 0.05, "obrien_fleming", 2)
    power = crossing_probabilities(design, 2.8016).sum()
    assert 0.79 < power < 0.8  # the price of an interim look under O'Brien-Fleming is small


def test_reject_at() -> None:
    design = boundaries([0.5, 1.0], 0.025)
    assert reject_at(design, [3.0]) == 0
    assert reject_at(design, [2.0]) is None
    assert reject_at(design, [2.0, 2.0]) == 1
    with pytest.raises(InputError, match="3 looks taken"):
        reject_at(design, [0, 0, 0])


@pytest.mark.parametrize(
    ("fractions", "match"),
    [([0.5, 0.4], "increase"), ([0.0, 1.0], "increase"), ([0.5, 1.2], "increase"), ([], "look")],
)
def test_bad_fractions(fractions: list[float], match: str) -> None:
    with pytest.raises(InputError, match=match):
        boundaries(fractions)
