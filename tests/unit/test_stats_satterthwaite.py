"""Satterthwaite t tests of crossed random-intercept REML fits against R lmerTest, and the
identifiability checks lme4 makes before fitting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cueaudit.errors import InputError
from cueaudit.stats import numdiff
from cueaudit.stats.mixed import fit_crossed_lmm
from tests.r.rscript import run_reference
from tests.unit.test_stats_mixed import NAMES, _crossed


def _lmertest(
    tmp_path: Path,
    y: np.ndarray,
    x: np.ndarray,
    groups: dict[str, np.ndarray],
    contrasts: dict[str, np.ndarray],
) -> dict:
    frame = pd.DataFrame({"y": y, **{f"x_{n}": x[:, j] for j, n in enumerate(NAMES)}})
    for k, v in groups.items():
        frame[f"g_{k}"] = v
    weights = pd.DataFrame(
        [{"name": k, **{f"x_{n}": c[j] for j, n in enumerate(NAMES)}} for k, c in contrasts.items()]
    )
    weights.to_csv(tmp_path / "contrasts.csv", index=False)
    return run_reference(
        "lmertest_reference.R", "lmerTest", frame, tmp_path, str(tmp_path / "contrasts.csv")
    )


@pytest.mark.parametrize(
    ("seed", "n_bundles", "sd"),
    [(1, 600, (0.5, 0.15, 0.3)), (7, 150, (0.5, 0.15, 0.3)), (4, 300, (0.5, 0.0, 0.3))],
    ids=["2400-rows", "600-rows", "pair-variance-on-its-boundary"],
)
def test_satterthwaite_df_and_p_equal_lmertest(
    tmp_path: Path, seed: int, n_bundles: int, sd: tuple[float, float, float]
) -> None:
    y, x, groups = _crossed(seed, n_bundles, sd)
    res = fit_crossed_lmm(y, x, groups, NAMES)
    contrasts = {f"x_{n}": np.eye(3)[j] for j, n in enumerate(NAMES)}
    contrasts["black_minus_quality"] = np.array([0.0, 1.0, -1.0])
    ref = _lmertest(
        tmp_path, y, x, groups, {"black_minus_quality": contrasts["black_minus_quality"]}
    )
    for name, c in contrasts.items():
        test = res.test(c)
        assert test.estimate == pytest.approx(ref["estimate"][name], abs=1e-6)
        assert test.se == pytest.approx(ref["se"][name], rel=1e-5)
        assert test.df == pytest.approx(ref["df"][name], rel=1e-4), name
        assert test.p == pytest.approx(ref["p"][name], rel=1e-4, abs=1e-12), name
    # the name-pair contrast has few degrees of freedom (40 pairs), the row-level one many
    assert res.test(contrasts["x_black"]).df < 60 < res.test(contrasts["x_quality"]).df


def test_the_interval_uses_the_t_quantile() -> None:
    y, x, groups = _crossed(7, 150)
    test = fit_crossed_lmm(y, x, groups, NAMES).test(np.array([0.0, 1.0, 0.0]))
    low, high = test.conf_int(0.95)
    from scipy import stats

    assert high - low == pytest.approx(2 * stats.t.ppf(0.975, test.df) * test.se, rel=1e-12)
    assert high - low > 2 * 1.959964 * test.se


def test_richardson_derivatives_are_exact_on_a_polynomial() -> None:
    def f(v: np.ndarray) -> float:
        return float(v[0] ** 3 * v[1] + 2.0 * v[1] ** 2 - v[0] * v[2] ** 4)

    x = np.array([1.3, -0.7, 0.0])  # a component at zero takes numDeriv's absolute step
    exact = np.array(
        [
            [6 * x[0] * x[1], 3 * x[0] ** 2, -4 * x[2] ** 3],
            [3 * x[0] ** 2, 4.0, 0.0],
            [-4 * x[2] ** 3, 0.0, -12 * x[0] * x[2] ** 2],
        ]
    )
    assert np.allclose(numdiff.hessian(f, x), exact, atol=1e-7)
    jac = numdiff.jacobian(lambda v: np.array([v[0] ** 2, v[0] * v[1]]), x)
    assert np.allclose(jac, [[2 * x[0], 0, 0], [x[1], x[0], 0]], atol=1e-9)


def test_a_factor_with_one_level_per_row_is_refused_as_lme4_does() -> None:
    y, x, groups = _crossed(3, 60)
    with pytest.raises(InputError, match="one level per observation") as error:
        fit_crossed_lmm(y, x, {**groups, "row": np.arange(len(y))}, NAMES)
    assert error.value.field == "row"


def test_two_factors_with_the_same_partition_are_refused() -> None:
    y, x, groups = _crossed(3, 60)
    renamed = np.char.add("b", groups["bundle"].astype(str))
    with pytest.raises(InputError, match="group the observations the same way"):
        fit_crossed_lmm(y, x, {**groups, "bundle_copy": renamed}, NAMES)
    # nested is not the same partition: pairs within bundles are accepted
    nested = np.char.add(groups["bundle"].astype(str), groups["pair"])
    assert fit_crossed_lmm(y, x, {"bundle": groups["bundle"], "slot": nested}, NAMES).converged
