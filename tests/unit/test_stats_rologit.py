"""Rank-ordered logit with ties against statsmodels, R survival and brute-force enumeration."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import optimize
from statsmodels.discrete.conditional_models import ConditionalLogit
from statsmodels.duration.hazard_regression import PHReg

from cueaudit.errors import InputError
from cueaudit.stats.rologit import (
    Ties,
    expected_rank_gain,
    expected_rank_gain_se,
    fit_rologit,
)
from tests.r.rscript import run_reference

BETA = np.array([0.5, -0.3, 0.2])


def _rankings(
    seed: int,
    n_bundles: int,
    width: int = 4,
    tie_p: float = 0.0,
    beta: np.ndarray = BETA,
    x: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plackett-Luce rankings (Gumbel utilities), adjacent places tied at random w.p. tie_p."""
    rng = np.random.default_rng(seed)
    n = n_bundles * width
    x = rng.normal(size=(n, len(beta))) if x is None else x
    utility = (x @ beta + rng.gumbel(size=n)).reshape(n_bundles, width)
    order = np.argsort(-utility, axis=1)
    merged = rng.random((n_bundles, width)) < tie_p
    merged[:, 0] = False
    place_rank = np.maximum.accumulate(np.where(merged, 0, np.arange(1, width + 1)), axis=1)
    rank = np.empty((n_bundles, width), dtype=np.int64)
    np.put_along_axis(rank, order, place_rank, axis=1)
    return x, np.repeat(np.arange(n_bundles), width), rank.ravel()


def _bottom_status(bundle: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Cox status with each bundle's bottom tie group censored."""
    worst = pd.Series(rank).groupby(bundle).transform("max").to_numpy()
    return (rank < worst).astype(float)


def _plackett_luce_loglik(
    beta: np.ndarray, x: np.ndarray, bundle: np.ndarray, rank: np.ndarray
) -> float:
    """Exact-marginal log-likelihood by enumerating every strict order of every bundle."""
    total = 0.0
    for b in np.unique(bundle):
        rows = np.flatnonzero(bundle == b)
        w, r = np.exp(x[rows] @ beta), rank[rows]
        prob = 0.0
        for perm in itertools.permutations(range(len(rows))):
            if np.all(np.diff(r[list(perm)]) >= 0):  # consistent with the ties
                left = np.array(perm)
                term = 1.0
                for s in range(len(perm)):
                    term *= w[left[s]] / w[left[s:]].sum()
                prob += term
        total += np.log(prob)
    return total


def test_without_ties_every_mode_equals_exploded_conditional_logit_and_phreg() -> None:
    x, bundle, rank = _rankings(0, 300)
    fits = {t: fit_rologit(x, bundle, rank, t) for t in ("exact", "breslow", "efron")}
    res = fits["exact"]
    for other in fits.values():
        assert np.allclose(other.coef, res.coef, rtol=0, atol=1e-12)
        assert other.loglik == pytest.approx(res.loglik, abs=1e-9)
    # exploded data: one choice set per bundle x stage, the candidate placed there chosen
    rows, groups, chosen = [], [], []
    for b in range(300):
        members = np.flatnonzero(bundle == b)
        for stage in range(1, 4):
            risk = members[rank[members] >= stage]
            rows += list(risk)
            groups += [b * 4 + stage] * len(risk)
            chosen += list(rank[risk] == stage)
    clogit = ConditionalLogit(np.array(chosen, float), x[rows], groups=np.array(groups))
    ref = clogit.fit(method="newton", disp=0, tol=1e-12, maxiter=100)
    assert np.max(np.abs(res.coef - ref.params)) < 1e-6
    assert np.allclose(res.se_model, ref.bse, rtol=1e-5, atol=0)  # its Hessian is numerical
    cox = PHReg(rank.astype(float), x, status=np.ones(len(rank)), strata=bundle)
    ph = cox.fit()
    assert np.max(np.abs(res.coef - ph.params)) < 1e-8
    assert res.loglik == pytest.approx(ph.llf, abs=1e-8)
    assert np.allclose(res.se_model, ph.bse, rtol=1e-8, atol=0)
    robust = cox.fit(groups=bundle).bse * np.sqrt(300 / 299)  # PHReg has no G/(G-1)
    assert np.allclose(res.se_cluster, robust, rtol=1e-8, atol=0)
    assert res.n_bundles == res.n_informative == res.n_clusters == 300 and res.converged


@pytest.mark.parametrize("censor_bottom", [True, False])
@pytest.mark.parametrize("ties", ["breslow", "efron"])
def test_breslow_and_efron_equal_phreg_with_rank_as_time(ties: Ties, censor_bottom: bool) -> None:
    x, bundle, rank = _rankings(3, 400, tie_p=0.35)
    res = fit_rologit(x, bundle, rank, ties, censor_bottom=censor_bottom)
    status = _bottom_status(bundle, rank) if censor_bottom else np.ones(len(rank))
    # fully tied bundles have no event; PHReg would give them NaN score residuals
    keep = pd.Series(status).groupby(bundle).transform("max").to_numpy() > 0
    cox = PHReg(
        rank[keep].astype(float), x[keep], status=status[keep], strata=bundle[keep], ties=ties
    )
    ph = cox.fit()
    assert np.max(np.abs(res.coef - ph.params)) < 1e-8
    assert res.loglik == pytest.approx(ph.llf, abs=1e-8)
    assert np.allclose(res.se_model, ph.bse, rtol=1e-8, atol=0)
    assert res.n_informative == len(np.unique(bundle[keep]))
    if ties == "breslow":  # PHReg's score residuals are Breslow's whatever the ties
        g = res.n_clusters
        robust = cox.fit(groups=bundle[keep]).bse * np.sqrt(g / (g - 1))
        assert np.allclose(res.se_cluster, robust, rtol=1e-8, atol=0)


@pytest.mark.parametrize(
    ("ties", "censor_bottom"), [("breslow", True), ("efron", True), ("efron", False)]
)
def test_clustered_se_matches_r_coxph(tmp_path: Path, ties: Ties, censor_bottom: bool) -> None:
    x, bundle, rank = _rankings(5, 400, tie_p=0.35)
    cluster = bundle // 2  # two rankings per cluster
    res = fit_rologit(x, bundle, rank, ties, cluster=cluster, censor_bottom=censor_bottom)
    status = _bottom_status(bundle, rank) if censor_bottom else np.ones(len(rank))
    frame = pd.DataFrame(
        {"time": rank, "status": status.astype(int), "stratum": bundle, "cluster": cluster}
    )
    for j in range(x.shape[1]):
        frame[f"x_{j}"] = x[:, j]
    ref = run_reference("coxph_reference.R", "survival", frame, tmp_path, ties)
    names = [f"x_{j}" for j in range(x.shape[1])]
    g = res.n_clusters
    assert np.max(np.abs(res.coef - [ref["coef"][n] for n in names])) < 1e-8
    assert np.allclose(res.se_model, [ref["se"][n] for n in names], rtol=1e-8, atol=0)
    robust = np.array([ref["robust_se"][n] for n in names]) * np.sqrt(g / (g - 1))
    assert np.allclose(res.se_cluster, robust, rtol=1e-8, atol=0)
    assert res.loglik == pytest.approx(ref["loglik"]["final"], abs=1e-8)
    assert g < res.n_informative  # clusters hold several rankings


def test_exact_marginal_equals_brute_force_enumeration() -> None:
    x, bundle, rank = _rankings(8, 25, width=5, tie_p=0.5)
    assert len(np.unique(rank)) > 1 and any(
        np.bincount(rank[bundle == b]).max() >= 3 for b in range(25)
    )
    res = fit_rologit(x, bundle, rank, "exact")
    assert res.loglik == pytest.approx(_plackett_luce_loglik(res.coef, x, bundle, rank), abs=1e-8)
    for beta in (np.zeros(3), np.array([2.0, -1.0, 3.0]), np.array([-30.0, 20.0, 5.0])):
        at = fit_rologit(x, bundle, rank, "exact", start=beta, max_iter=0)
        assert at.n_iter == 0 and np.array_equal(at.coef, beta)
        assert at.loglik == pytest.approx(_plackett_luce_loglik(beta, x, bundle, rank), abs=1e-8)
    brute = optimize.minimize(
        lambda b: -_plackett_luce_loglik(b, x, bundle, rank),
        res.coef + 0.2,
        method="BFGS",
        options={"gtol": 1e-8},
    )
    assert np.max(np.abs(res.coef - brute.x)) < 1e-5
    assert res.loglik == pytest.approx(-brute.fun, abs=1e-8)


def test_fully_tied_bundles_carry_nothing_under_exact_marginal() -> None:
    x, bundle, rank = _rankings(2, 300, tie_p=0.3)
    tied_x = np.random.default_rng(9).normal(size=(400, 3))
    more = (
        np.vstack([x, tied_x]),
        np.concatenate([bundle, 300 + np.repeat(np.arange(100), 4)]),
        np.concatenate([rank, np.ones(400, dtype=np.int64)]),
    )
    base, padded = fit_rologit(x, bundle, rank), fit_rologit(*more)
    assert np.allclose(base.coef, padded.coef, rtol=0, atol=1e-12)
    assert padded.loglik == pytest.approx(base.loglik, abs=1e-9)
    assert np.allclose(base.se_model, padded.se_model, rtol=1e-10)
    assert padded.n_bundles == 400 and padded.n_informative == base.n_informative <= 300
    for ties in ("breslow", "efron"):
        kept = fit_rologit(*more, ties=ties, censor_bottom=True)
        assert kept.loglik == pytest.approx(fit_rologit(x, bundle, rank, ties).loglik, abs=1e-9)
        counted = fit_rologit(*more, ties=ties, censor_bottom=False)
        without = fit_rologit(x, bundle, rank, ties, censor_bottom=False)
        assert counted.loglik < without.loglik - 100  # each tied bundle adds a spurious term


def test_expected_rank_gain_equals_enumeration() -> None:
    for delta, n in [(0.0, 4), (0.4, 4), (-1.3, 5), (2.0, 3)]:
        w = np.array([np.exp(delta)] + [1.0] * (n - 1))
        expected = 0.0
        for perm in itertools.permutations(range(n)):
            left, p = list(perm), 1.0
            for s in range(n):
                p *= w[left[s]] / w[left[s:]].sum()
            expected += p * (perm.index(0) + 1)
        assert expected_rank_gain(delta, n) == pytest.approx((n + 1) / 2 - expected, abs=1e-12)


def test_planted_first_position_effect_of_011_positions_is_recovered() -> None:
    """Four-candidate bundles with ties; being listed first is worth 0.11 positions."""
    delta = optimize.brentq(lambda d: expected_rank_gain(d, 4) - 0.11, 0.0, 2.0)
    n_bundles, covered, gains, breslow = 4000, 0, [], []
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        first = np.tile([1.0, 0.0, 0.0, 0.0], n_bundles)
        black = rng.permuted(np.tile([1.0, 0.0, 0.0, 0.0], (n_bundles, 1)), axis=1).ravel()
        x = np.column_stack([first, black, rng.normal(size=4 * n_bundles)])
        x, bundle, rank = _rankings(
            seed, n_bundles, tie_p=0.3, beta=np.array([delta, -0.05, 0.4]), x=x
        )
        res = fit_rologit(x, bundle, rank, "exact")
        gain = expected_rank_gain(res.coef[0], 4)
        se = expected_rank_gain_se(res.coef[0], res.se_cluster[0], 4)
        covered += int(abs(gain - 0.11) <= 1.96 * se)
        gains.append(gain)
        breslow.append(expected_rank_gain(fit_rologit(x, bundle, rank, "breslow").coef[0], 4))
    assert covered >= 17
    assert abs(np.mean(gains) - 0.11) < 3 * np.std(gains) / np.sqrt(20)
    assert np.mean(breslow) < np.mean(gains) - 0.01  # Breslow ties attenuate the same effect


def test_bad_input_is_refused() -> None:
    x, bundle, rank = _rankings(1, 20)
    with pytest.raises(InputError, match="ties must be"):
        fit_rologit(x, bundle, rank, "average")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="spans clusters"):
        fit_rologit(x, bundle, rank, cluster=np.arange(len(rank)))
    with pytest.raises(InputError, match="no bundle carries information"):
        fit_rologit(x, bundle, np.ones(len(rank)))
    with pytest.raises(InputError, match="names"):
        fit_rologit(x, bundle, rank, names=["a"])


def _strict_rankings(n_bundles: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    bundle = np.repeat(np.arange(n_bundles), 4)
    x = rng.normal(size=(4 * n_bundles, 1))
    utility = 0.5 * x[:, 0] + rng.gumbel(size=4 * n_bundles)
    rank = np.empty(4 * n_bundles, dtype=np.int64)
    for b in range(n_bundles):
        rows = np.arange(4 * b, 4 * b + 4)
        rank[rows[np.argsort(-utility[rows])]] = np.arange(1, 5)
    return x, bundle, rank


def test_a_regressor_constant_within_every_bundle_is_refused() -> None:
    x, bundle, rank = _strict_rankings(60, 1)
    level = np.random.default_rng(2).normal(size=60)[bundle]  # one value per bundle
    with pytest.raises(InputError, match="no variation inside any informative ranking") as err:
        fit_rologit(np.column_stack([x, level]), bundle, rank, names=["x", "bundle_level"])
    assert err.value.field == "bundle_level"
    # without it the same data fit, with a finite SE
    assert np.isfinite(fit_rologit(x, bundle, rank, cluster=bundle // 2).se_cluster).all()


def test_collinear_regressors_are_an_input_error_not_a_linalg_crash() -> None:
    x, bundle, rank = _strict_rankings(60, 3)
    with pytest.raises(InputError, match="collinear inside the rankings: x, twice_x"):
        fit_rologit(np.column_stack([x, 2 * x]), bundle, rank, names=["x", "twice_x"])


def test_complete_separation_has_no_finite_estimate() -> None:
    x, bundle, _ = _strict_rankings(50, 4)
    rank = np.empty_like(bundle)
    for b in range(50):  # every ranking ordered exactly by x
        rows = np.arange(4 * b, 4 * b + 4)
        rank[rows[np.argsort(-x[rows, 0])]] = np.arange(1, 5)
    with pytest.raises(InputError, match="complete separation") as refused:
        fit_rologit(x, bundle, rank, cluster=bundle // 5, names=["x"])
    # refused once the coefficient is past the bound and the likelihood stops moving, not after
    # running out every iteration (each halving its step some 20 times)
    iterations = int(re.search(r"after (\d+) iterations", str(refused.value))[1])
    assert iterations < 100, str(refused.value)
