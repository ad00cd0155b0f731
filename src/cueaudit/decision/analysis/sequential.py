"""Sequential top-ups that stay pre-registered: the looks of a ``sequential`` plan.

Look 1 is the primary design; look ``k + 1`` pools the primary rows with the first ``k``
top-up arms (:attr:`~cueaudit.decision.preregistration.SequentialPlan.arms`). Each look's
two-sided boundary comes from the plan's Lan-DeMets spending function at the planned
information fractions (:func:`cueaudit.stats.sequential.boundaries`), and each look's test
statistic is the family estimator's p-value on the z scale (``z = Phi^-1(1 - p / 2)`` signed
by the estimate), so a Satterthwaite t test is compared on the scale the boundaries are on.
A contrast is rejected at the first look whose ``|z|`` reaches its boundary and is not tested
after it. A look whose arm has no rows yet is listed as planned; one whose arm has rows, but
none in the cell, is no look (it would repeat the look before it) and tests nothing; the
workflow refuses such a plan before any inference (:func:`cueaudit.decision.study.sequential_arms`).

The looks are labelled pre-registered (as an interim, or the final look) while the lock holds
and no analysed answer predates it: the plan is part of the locked file, so a top-up declared
there is not a post-hoc extension.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import polars as pl
from scipy import stats

from cueaudit.decision.analysis.contrasts import exploratory_reason, fit_cell
from cueaudit.decision.analysis.fitters import FAMILY_ESTIMATOR
from cueaudit.decision.analysis.frames import PRIMARY, AnalysisFrames
from cueaudit.decision.analysis.verdicts import t_interval
from cueaudit.decision.preregistration import Preregistration, Status
from cueaudit.stats.sequential import boundaries

SEQUENTIAL_SCHEMA: Final = {
    "domain": pl.String(),
    "format": pl.String(),
    "contrast": pl.String(),
    "look": pl.Int64(),
    "looks": pl.Int64(),
    "arms": pl.String(),
    "information_fraction": pl.Float64(),
    "n_obs": pl.Int64(),
    "estimate": pl.Float64(),
    "se": pl.Float64(),
    "p_value": pl.Float64(),
    "z": pl.Float64(),
    "critical_z": pl.Float64(),
    "nominal_alpha": pl.Float64(),
    "alpha_spent": pl.Float64(),
    "decision": pl.String(),
    "label": pl.String(),
}


def look_frames(frames: AnalysisFrames, arms: tuple[str, ...], look: int) -> AnalysisFrames:
    """The rows of look ``look`` (1-based) as one arm, ``primary``: the primary rows and
    those of the first ``look - 1`` top-up arms."""
    keep = [PRIMARY, *arms[: look - 1]]
    relabel = pl.when(pl.col("arm").is_in(keep)).then(pl.lit(PRIMARY)).otherwise(pl.col("arm"))
    return AnalysisFrames(
        *(
            getattr(frames, name).with_columns(arm=relabel).filter(pl.col("arm") == PRIMARY)
            for name in ("judgements", "rankings", "probes")
        )
    )


def signed_z(estimate: float, p_value: float) -> float:
    """The two-sided p-value on the z scale, with the estimate's sign."""
    if not (np.isfinite(estimate) and np.isfinite(p_value)):
        return float("nan")
    return float(np.sign(estimate) * stats.norm.isf(p_value / 2))


def _present(frames: AnalysisFrames, arm: str) -> bool:
    return any((getattr(frames, name)["arm"] == arm).any() for name in ("judgements", "rankings"))


def _adds_rows(frames: AnalysisFrames, arm: str, domain: str, fmt: str) -> bool:
    """Whether ``arm`` has rows in the cell ``domain`` x ``fmt``."""
    rows = frames.rankings if fmt == "rank" else frames.judgements
    keep = (pl.col("arm") == arm) & (pl.col("domain") == domain)
    if fmt != "rank":
        keep &= pl.col("format") == fmt
    return rows.filter(keep).height > 0


def sequential_looks(
    frames: AnalysisFrames,
    prereg: Preregistration,
    *,
    pre_registered: Status | bool,
    estimator: str = FAMILY_ESTIMATOR,
) -> pl.DataFrame:
    """One row per planned contrast of the plan's cells and look (see the module)."""
    plan = prereg.sequential
    if plan is None:
        return pl.DataFrame(schema=SEQUENTIAL_SCHEMA)
    design = boundaries(plan.fractions, prereg.alpha, plan.spending, sided=2)
    reason = exploratory_reason(pre_registered, PRIMARY)
    looks = len(plan.fractions)
    records = []
    for domain, fmt in plan.cells:
        planned = [c for c in prereg.contrasts if (c.domain, c.format) == (domain, fmt)]
        rejected: dict[str, int] = {}
        for look in range(1, looks + 1):
            arm_rows = look == 1 or _present(frames, plan.arms[look - 2])
            # an arm with rows elsewhere but none in this cell would repeat the look before
            added = (
                look == 1 or not arm_rows or _adds_rows(frames, plan.arms[look - 2], domain, fmt)
            )
            fit = None
            if arm_rows and added:
                data = look_frames(frames, plan.arms, look)
                fit = fit_cell(data, domain, fmt, planned, estimator=estimator)
            for c in planned:
                e = fit.estimates[c.contrast] if fit is not None else None
                estimate = e.estimate if e is not None else float("nan")
                p = t_interval(e, prereg.alpha)[3] if e is not None else float("nan")
                z = signed_z(estimate, p)
                critical = design.critical[look - 1]
                if c.contrast in rejected:
                    decision = f"rejected at look {rejected[c.contrast]}"
                elif not arm_rows:
                    decision = "planned"
                elif not added:
                    decision = "no look: the arm added no rows to this cell"
                elif abs(z) >= critical:
                    rejected[c.contrast] = look
                    decision = "reject: stop"
                elif look == looks:
                    decision = "not rejected"
                else:
                    decision = "continue"
                kind = "final look" if look == looks else "interim"
                label = f"pre-registered {kind}" if reason is None else f"exploratory: {reason}"
                records.append(
                    {
                        "domain": domain,
                        "format": fmt,
                        "contrast": c.contrast,
                        "look": look,
                        "looks": looks,
                        "arms": ", ".join([PRIMARY, *plan.arms[: look - 1]]),
                        "information_fraction": plan.fractions[look - 1],
                        "n_obs": None if fit is None else (e.n_obs or fit.n_obs),
                        "estimate": estimate,
                        "se": e.se if e is not None else float("nan"),
                        "p_value": p,
                        "z": z,
                        "critical_z": critical,
                        "nominal_alpha": 2 * design.nominal[look - 1],
                        "alpha_spent": design.alpha_spent[look - 1],
                        "decision": decision,
                        "label": label,
                    }
                )
    return pl.DataFrame(records, schema=SEQUENTIAL_SCHEMA)
