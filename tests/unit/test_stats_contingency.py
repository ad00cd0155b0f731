"""The stratified G test against the deviance difference of two statsmodels binomial GLMs."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf
from scipy import stats
from statsmodels.stats.contingency_tables import StratifiedTable

from cueaudit.errors import InputError
from cueaudit.stats.contingency import fisher_odds_ratio, mantel_haenszel, stratified_g_test
from tests.r.rscript import run_reference


def glm_lr(counts: np.ndarray) -> tuple[float, int]:
    """Deviance difference and df of event ~ stratum * group against event ~ stratum."""
    rows = [
        {"stratum": s, "group": g, "no": counts[s, g, 0], "yes": counts[s, g, 1]}
        for s in range(counts.shape[0])
        for g in range(counts.shape[1])
        if counts[s, g].sum() > 0
    ]
    data = pd.DataFrame(rows)
    with warnings.catch_warnings():
        # the saturated model fits every cell exactly (no residual df, separation warnings)
        warnings.simplefilter("ignore")
        fits = [
            smf.glm(f"yes + no ~ {rhs}", data, family=sm.families.Binomial()).fit()
            for rhs in ("C(stratum) * C(group)", "C(stratum)")
        ]
    return fits[1].deviance - fits[0].deviance, int(fits[1].df_resid - fits[0].df_resid)


def test_g_test_matches_the_likelihood_ratio_of_two_logit_models() -> None:
    rng = np.random.default_rng(3)
    n = rng.integers(20, 80, size=(3, 4))
    p = np.array([[0.1, 0.2, 0.15, 0.3], [0.05, 0.05, 0.1, 0.2], [0.3, 0.25, 0.4, 0.35]])
    events = rng.binomial(n, p)
    counts = np.stack([n - events, events], axis=2)
    result = stratified_g_test(counts)
    reference, df = glm_lr(counts)
    assert result.statistic == pytest.approx(reference, rel=1e-8)
    assert result.df == df == 3 * 3 and result.n_strata == 3
    assert result.p_value == pytest.approx(stats.chi2.sf(reference, df), rel=1e-8)
    # one stratum alone is scipy's G test of its table
    alone = stratified_g_test(counts[:1])
    g, p_value, _, _ = stats.chi2_contingency(counts[0], lambda_="log-likelihood")
    assert alone.statistic == pytest.approx(g) and alone.p_value == pytest.approx(p_value)


def test_g_test_leaves_out_what_carries_no_information() -> None:
    rng = np.random.default_rng(5)
    n = rng.integers(30, 60, size=(2, 3))
    events = rng.binomial(n, 0.2)
    counts = np.stack([n - events, events], axis=2).astype(float)
    base = stratified_g_test(counts)
    no_event = np.array([[[40, 0], [35, 0], [20, 0]]], dtype=float)
    one_group = np.array([[[40, 5], [0, 0], [0, 0]]], dtype=float)
    padded = stratified_g_test(np.concatenate([counts, no_event, one_group]))
    assert (padded.statistic, padded.df, padded.n_strata) == (base.statistic, base.df, 2)
    # a group with no row in a stratum loses its degree of freedom there only
    counts[0, 2] = 0
    dropped = stratified_g_test(counts)
    assert dropped.df == 1 + 2
    assert dropped.statistic == pytest.approx(glm_lr(counts)[0], rel=1e-8)
    # a group without any event (where a logit fit separates) still has a finite statistic
    separated = np.array([[[50, 0], [40, 10], [45, 5]]], dtype=float)
    result = stratified_g_test(separated)
    assert np.isfinite(result.statistic) and result.p_value < 0.01
    empty = stratified_g_test(no_event)
    assert empty.df == 0 and empty.statistic == 0.0 and np.isnan(empty.p_value)
    with pytest.raises(InputError, match="shape"):
        stratified_g_test(np.zeros((2, 3)))
    with pytest.raises(InputError, match="non-negative"):
        stratified_g_test(-np.ones((1, 2, 2)))


TABLES = np.array(
    [
        [[12, 5], [7, 14]],
        [[3, 9], [4, 20]],
        [[30, 2], [25, 6]],
        [[8, 8], [1, 11]],
    ]
)


def test_mantel_haenszel_matches_statsmodels() -> None:
    ours = mantel_haenszel(TABLES)
    reference = StratifiedTable(np.moveaxis(TABLES, 0, -1))
    low, high = reference.oddsratio_pooled_confint()
    assert ours.estimate == pytest.approx(reference.oddsratio_pooled, rel=1e-12)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((low, high), rel=1e-10)
    assert ours.p_value == pytest.approx(reference.test_null_odds(correction=False).pvalue)
    assert ours.n_strata == 4


def test_both_match_r(tmp_path: Path) -> None:
    data = pd.DataFrame(
        [(i, *t.ravel()) for i, t in enumerate(TABLES)], columns=["stratum", "a", "b", "c", "d"]
    )
    r = run_reference("contingency_reference.R", "stats", data, tmp_path)
    for i, table in enumerate(TABLES):
        ours = fisher_odds_ratio(table)
        expected = r[f"fisher_{i}"]
        assert ours.estimate == pytest.approx(expected["estimate"], rel=1e-4)
        # R finds the exact interval's ends with uniroot's default tolerance; scipy is finer
        interval = (ours.ci_low, ours.ci_high)
        assert interval == pytest.approx((expected["ci_low"], expected["ci_high"]), rel=5e-3)
        assert ours.p_value == pytest.approx(expected["p"], rel=1e-6)
    pooled = mantel_haenszel(TABLES)
    assert pooled.estimate == pytest.approx(r["mh"]["estimate"], rel=1e-10)
    assert (pooled.ci_low, pooled.ci_high) == pytest.approx(
        (r["mh"]["ci_low"], r["mh"]["ci_high"]), rel=1e-8
    )
    assert pooled.p_value == pytest.approx(r["mh"]["p"], rel=1e-8)


def test_degenerate_tables() -> None:
    # one stratum is a single observation (left out); no b c: an infinite ratio, no interval
    only_ad = mantel_haenszel([[[3, 0], [0, 4]], [[1, 0], [0, 0]], [[2, 0], [1, 5]]])
    assert only_ad.n_strata == 2 and only_ad.estimate == np.inf and np.isnan(only_ad.ci_low)
    assert 0 < only_ad.p_value < 0.05
    assert np.isnan(mantel_haenszel([[[1, 0], [0, 0]]]).estimate)
    assert np.isnan(fisher_odds_ratio([[0, 0], [0, 0]]).p_value)
    # a constant margin: no association can show (ratio 1 or undefined, p 1)
    assert fisher_odds_ratio([[5, 3], [0, 0]]).p_value == pytest.approx(1.0)
    with pytest.raises(InputError, match="non-negative integers"):
        fisher_odds_ratio([[1.5, 2], [3, 4]])
    with pytest.raises(InputError, match="2 x 2 tables"):
        mantel_haenszel(np.ones((2, 3, 2)))
