"""Fixed-effects OLS (within transformation) against statsmodels and linearmodels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from cueaudit.errors import InputError
from cueaudit.stats.fe import fe_ols


def _data(seed: int = 3, n_groups: int = 40) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(3, 15, size=n_groups)
    g = np.repeat(np.arange(n_groups), sizes)
    rng.shuffle(g)
    n = len(g)
    fe = rng.normal(0, 2, n_groups)
    label = rng.choice(3, size=n, p=[0.2, 0.7, 0.1])
    x = np.column_stack(
        [
            (label == 0).astype(float),
            (label == 2).astype(float),
            (rng.random(n) < 0.5).astype(float),
            rng.normal(8, 2, n) + 0.5 * fe[g],  # correlated with the fixed effect
        ]
    )
    slope = rng.normal(0, 0.3, n_groups)  # within-group correlated errors
    y = fe[g] + x @ np.array([0.3, -0.2, 0.1, -0.05]) + slope[g] * x[:, 2] + rng.normal(0, 1, n)
    return y, x, g


NAMES = ["inferred_Black", "inferred_Unknown", "cued_Black", "fk_grade"]


def test_coefficients_and_conventional_se_match_dummy_ols() -> None:
    y, x, g = _data()
    res = fe_ols(y, x, g, NAMES)
    dummies = pd.get_dummies(g, dtype=float).to_numpy()
    ref = sm.OLS(y, np.column_stack([x, dummies])).fit()
    assert np.allclose(res.coef, ref.params[:4], rtol=0, atol=1e-8)
    assert np.allclose(res.se_conventional, ref.bse[:4], rtol=1e-8, atol=0)
    assert res.n == len(y) and res.n_groups == 40


def test_cluster_se_paper_se_r2_aic_match_statsmodels_on_demeaned_data() -> None:
    y, x, g = _data(seed=5)
    res = fe_ols(y, x, g, NAMES)
    frame = pd.DataFrame(np.column_stack([y, x]), columns=["y", *NAMES])
    frame["g"] = g
    demeaned = frame[["y", *NAMES]] - frame.groupby("g")[["y", *NAMES]].transform("mean")
    ols = sm.OLS(demeaned["y"].to_numpy(), demeaned[NAMES].to_numpy())
    plain = ols.fit()
    clustered = ols.fit(cov_type="cluster", cov_kwds={"groups": g})
    assert np.allclose(res.coef, plain.params, rtol=0, atol=1e-8)
    assert np.allclose(res.se_paper, plain.bse, rtol=1e-8, atol=0)
    assert np.allclose(res.se_cluster, clustered.bse, rtol=1e-8, atol=0)
    assert res.r2_within == pytest.approx(plain.rsquared, abs=1e-10)  # uncentered
    assert res.aic == pytest.approx(plain.aic, rel=1e-10)
    assert res.bic == pytest.approx(plain.bic, rel=1e-10)


def test_cluster_se_matches_linearmodels_absorbing_ls() -> None:
    linearmodels = pytest.importorskip("linearmodels")
    y, x, g = _data(seed=9)
    res = fe_ols(y, x, g, NAMES)
    exog = pd.DataFrame(x, columns=NAMES)
    absorb = pd.DataFrame({"g": pd.Categorical(g)})
    ref = linearmodels.iv.absorbing.AbsorbingLS(pd.Series(y), exog, absorb=absorb).fit(
        cov_type="clustered", clusters=pd.Series(g), debiased=True
    )
    assert np.allclose(res.coef, ref.params.to_numpy(), rtol=0, atol=1e-8)
    assert np.allclose(res.se_cluster, ref.std_errors.to_numpy(), rtol=1e-6, atol=0)


def test_regressor_constant_within_groups_is_dropped_with_its_name() -> None:
    y, x, g = _data()
    per_group = np.random.default_rng(0).normal(size=g.max() + 1)[g]
    res = fe_ols(y, np.column_stack([x, per_group]), g, [*NAMES, "prompt_level"])
    assert res.dropped == ["prompt_level"]
    assert res.names == NAMES
    assert np.allclose(res.coef, fe_ols(y, x, g, NAMES).coef)
    with pytest.raises(InputError, match="absorbed"):
        fe_ols(y, per_group[:, None], g, ["prompt_level"])
    with pytest.raises(InputError, match="no observations"):
        fe_ols(np.array([]), np.empty((0, 1)), np.array([]), ["x"])
