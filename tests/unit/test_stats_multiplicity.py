"""BH q-values, TOST and MDE against statsmodels, scipy and the decision-audit paper."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.weightstats import ztost

from cueaudit.errors import InputError
from cueaudit.stats.multiplicity import (
    EQUIVALENCE_FACTOR,
    MDE_FACTOR,
    bh_qvalues,
    equivalence_floor,
    mde,
    tost,
)


def _family(seed: int = 0, m: int = 36) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(size=m - 8), rng.uniform(0, 0.01, size=8)])
    p[[3, 17, 30]] = np.nan
    p[5] = p[6]  # a tie
    return p


def test_bh_matches_statsmodels_and_scipy_on_the_valid_p_values() -> None:
    p = _family()
    q = bh_qvalues(p)
    valid = ~np.isnan(p)
    assert np.array_equal(np.isnan(q), ~valid)
    reject, q_sm, _, _ = multipletests(p[valid], alpha=0.05, method="fdr_bh")
    assert np.max(np.abs(q[valid] - q_sm)) < 1e-15
    assert np.max(np.abs(q[valid] - stats.false_discovery_control(p[valid], method="bh"))) < 1e-15
    assert np.array_equal(q[valid] <= 0.05, reject)
    assert reject.sum() > 0  # the family has real discoveries


def test_bh_does_not_count_nans_in_m() -> None:
    # one p-value among m = 2 valid: q = 2 * 0.02, not 4 * 0.02
    q = bh_qvalues(np.array([0.02, np.nan, 0.5, np.nan]))
    assert q[0] == pytest.approx(0.04) and q[2] == pytest.approx(0.5)
    assert np.isnan(bh_qvalues(np.array([np.nan, np.nan]))).all()
    assert bh_qvalues(np.zeros((2, 3))).shape == (2, 3)
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        bh_qvalues(np.array([0.2, 1.5]))


def test_constants_follow_from_the_normal_quantiles() -> None:
    assert pytest.approx(2.8016, abs=1e-4) == MDE_FACTOR
    assert pytest.approx(2.9264, abs=1e-4) == EQUIVALENCE_FACTOR
    # statsmodels' power solver (it counts the negligible wrong-sign tail too)
    solved = NormalIndPower().solve_power(nobs1=1, ratio=0, alpha=0.05, power=0.8)
    assert solved == pytest.approx(MDE_FACTOR, abs=1e-4)
    assert float(mde(0.5)) == pytest.approx(0.5 * 2.8016, abs=1e-4)
    assert float(equivalence_floor(0.5)) == pytest.approx(0.5 * 2.9264, abs=1e-4)
    assert float(mde(1.0, power=0.9)) == pytest.approx(3.2415, abs=1e-4)


def test_power_at_the_mde_and_at_the_equivalence_floor_by_simulation() -> None:
    draws = np.random.default_rng(1).normal(size=100_000)
    detected = np.mean(np.abs(MDE_FACTOR + draws) > stats.norm.ppf(0.975))
    assert detected == pytest.approx(0.80, abs=0.005)
    equivalent = np.mean([tost(d, 1.0, EQUIVALENCE_FACTOR).equivalent for d in draws[:4000]])
    assert equivalent == pytest.approx(0.80, abs=0.02)


def test_tost_p_values_match_statsmodels_ztost() -> None:
    x = np.random.default_rng(2).normal(0.03, 0.4, size=500)
    se = x.std(ddof=1) / np.sqrt(len(x))
    for low, high in [(-0.05, 0.05), (-0.02, 0.08), (-0.2, 0.01)]:
        p_ref, (_, p_low), (_, p_high) = ztost(x, low, high)
        res = tost(float(x.mean()), float(se), (low, high))
        assert res.p_tost == pytest.approx(p_ref, abs=1e-12)
        assert res.p_low == pytest.approx(p_low, abs=1e-12)
        assert res.p_high == pytest.approx(p_high, abs=1e-12)


def test_tost_reproduces_the_papers_two_equivalence_bounds() -> None:
    # hiring Rate: +0.047 [+0.002, +0.092] against 0.090, bounded at 0.084, p = .029
    rate = tost(0.047, (0.092 - 0.002) / (2 * stats.norm.ppf(0.975)), 0.090)
    assert rate.bound == pytest.approx(0.084, abs=0.001)
    assert rate.p_tost == pytest.approx(0.029, abs=0.003)  # the CI is rounded to 3 decimals
    assert rate.verdict == "equivalent" and rate.different  # inside the margin, not zero
    # hiring Rank: +0.008 [-0.044, +0.060] against 0.067, bounded at 0.052, p = .013
    rank = tost(0.008, (0.060 + 0.044) / (2 * stats.norm.ppf(0.975)), 0.067)
    assert rank.bound == pytest.approx(0.052, abs=0.001)
    assert rank.p_tost == pytest.approx(0.013, abs=0.001)
    assert rank.verdict == "equivalent" and not rank.different


def test_tost_verdicts_and_the_mde_warning() -> None:
    # a lending-like floor: MDE 0.132 against a 0.067 margin decides nothing
    weak = tost(0.01, 0.132 / MDE_FACTOR, 0.067)
    assert weak.verdict == "inconclusive"
    assert weak.mde == pytest.approx(0.132) and weak.mde_exceeds_margin
    assert weak.floor_exceeds_margin and "exceeds the margin" in weak.summary()
    big = tost(0.30, 0.02, 0.067)
    assert big.verdict == "different" and not big.mde_exceeds_margin
    assert big.p_difference == pytest.approx(2 * stats.norm.sf(15.0))
    assert "exceeds" not in big.summary()
    with pytest.raises(InputError, match="positive SE"):
        tost(0.1, 0.0, 0.05)
    with pytest.raises(InputError, match="low < 0 < high"):
        tost(0.1, 0.1, (0.05, 0.2))
