"""Reading a fitted contrast of the decision audit: its t test, the BH q-values of the planned
family, TOST against the format's margin, the MDE and equivalence floor, and the verdict.

Every test, interval, BH q-value, TOST, MDE and equivalence floor uses the row's ``df``
(``inference`` says which): t quantiles and tails, not z. NaN marks a contrast that could not
be estimated; null marks a field that does not apply (the q-value of a row outside the family,
the margin of Decide).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from cueaudit.decision.analysis.fitters import CellFit, Estimate
from cueaudit.stats.multiplicity import bh_qvalues, equivalence_floor, mde, t_test, tost


def t_interval(e: Estimate, alpha: float) -> tuple[float, float, float, float]:
    """``(df, ci_low, ci_high, p)`` of an estimate's t test; NaN where it has none."""
    nan = float("nan")
    if not (np.isfinite(e.estimate) and np.isfinite(e.se) and e.se > 0 and e.df > 0):
        return nan, nan, nan, nan
    test = t_test(e.estimate, e.se, e.df)
    return float(e.df), *test.conf_int(1 - alpha), test.p


def estimate_fields(fit: CellFit, e: Estimate, alpha: float) -> dict[str, object]:
    """A fitted contrast as table columns (:data:`cueaudit.decision.analysis.wording.
    ESTIMATE_SCHEMA`): estimator, unit, estimate, SE, its t test's df, inference, interval and
    p at ``alpha`` (:func:`t_interval`), the rows it used and why it is NaN (``note``); a
    table whose schema lacks a column drops it."""
    df, low, high, p = t_interval(e, alpha)
    return {
        "estimator": fit.estimator,
        "unit": fit.unit,
        "estimate": e.estimate,
        "se": e.se,
        "df": df,
        "inference": fit.inference,
        "ci_low": low,
        "ci_high": high,
        "p_value": p,
        "n_obs": fit.n_obs if e.n_obs is None else e.n_obs,
        "note": e.reason,
    }


def equivalence(
    e: Estimate, df: float, margin: float | None, alpha: float, power: float
) -> dict[str, float | None]:
    """The MDE, the equivalence floor, the TOST bound (the smallest symmetric margin the data
    exclude) and TOST's p against ``margin`` (null without one), at the t test's ``df``
    (:func:`t_interval`; all NaN when it is not finite)."""
    nan = float("nan")
    if not np.isfinite(df):
        return {"mde": nan, "equivalence_floor": nan, "tost_bound": nan, "p_tost": None}
    against = None if margin is None else tost(e.estimate, e.se, margin, alpha, power, df)
    return {
        "mde": float(mde(e.se, alpha, power, df)),
        "equivalence_floor": float(equivalence_floor(e.se, alpha, power, df)),
        "tost_bound": tost(e.estimate, e.se, margin or 1.0, alpha, power, df).bound,
        "p_tost": None if against is None else against.p_tost,
    }


def verdict(
    estimate: float,
    se: float,
    margin: float | None,
    p_difference: float,
    *,
    alpha: float = 0.05,
    power: float = 0.80,
    reason: str | None = None,
    df: float = np.inf,
) -> str:
    """The verdict of one contrast: ``"equivalent"`` when TOST against ``(-margin, margin)``
    rejects at ``alpha``; else ``"different"`` when ``p_difference`` (the q-value for a planned
    contrast) is below ``alpha``; else ``"inconclusive"``, naming the MDE when it exceeds the
    margin. ``"no margin"`` without a margin; ``"inconclusive: not estimable (reason)"``
    without a finite estimate, SE and degrees of freedom."""
    ok = np.isfinite(estimate) and np.isfinite(se) and se > 0 and df is not None and df > 0
    if reason is not None or not ok:
        return f"inconclusive: not estimable ({reason or 'no standard error'})"
    if margin is None:
        return "no margin"
    test = tost(estimate, se, margin, alpha, power, df)
    if test.equivalent:
        return "equivalent"
    if p_difference < alpha:
        return "different"
    if test.mde > margin:
        return f"inconclusive: MDE {test.mde:.3f} exceeds margin {margin:.3f}"
    return "inconclusive"


def with_verdicts(table: pl.DataFrame, *, alpha: float, power: float) -> pl.DataFrame:
    """``table`` (rows of estimates with ``estimate, se, df, margin, p_value, in_family`` and
    the reason an estimate is missing as ``_reason``) with ``q_value``, BH over the in-family
    rows (null elsewhere), and each row's :func:`verdict` (on its q-value in the family, on
    its p-value outside it)."""
    family = table["in_family"].to_numpy()
    p = table["p_value"].to_numpy().copy()
    q = np.full(len(p), np.nan)
    q[family] = bh_qvalues(p[family])
    table = table.with_columns(
        pl.when(pl.col("in_family")).then(pl.Series(q)).otherwise(None).alias("q_value")
    )
    verdicts = [
        verdict(
            row["estimate"],
            row["se"],
            row["margin"],
            row["q_value"] if row["in_family"] else row["p_value"],
            alpha=alpha,
            power=power,
            reason=row["_reason"],
            df=row["df"],
        )
        for row in table.iter_rows(named=True)
    ]
    return table.with_columns(pl.Series("verdict", verdicts, dtype=pl.String()))
