from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.contingency_tables import StratifiedTable

from cueaudit.errors import InputError
from cueaudit.stats.contingency import fisher_odds_ratio, mantel_haenszel
from tests.r.rscript import run_reference

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
