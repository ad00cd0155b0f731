"""Leave-one-name-out and leave-one-profile-out refits of the planned lmm contrasts
(LEAVE_ONE_OUT).

Each domain x format cell of the family is refitted once per name pair and once per profile
with that level's rows removed, by the same model as :func:`contrasts.estimate_contrasts`
(:func:`fitters.fit_design` on a :meth:`CellDesign.subset`). In a ranking only the rows of
the left-out level go: the other candidates of its bundles keep the points they were given,
so a bundle stays one level of the bundle factor. Refits read estimates only (no SEs). The
table reports, per contrast and factor, the range of the refitted estimates and the level
whose removal moves the estimate most
(natural units, as ``estimate`` in CONTRASTS). Refits whose contrast is not estimable (the
only Asian pair left out of a tiny cell) are not counted in ``n_refits``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import numpy as np
import polars as pl

from cueaudit.decision.analysis.contrasts import family_cells
from cueaudit.decision.analysis.design_matrix import cell_rows, design_of
from cueaudit.decision.analysis.fitters import fit_design
from cueaudit.decision.analysis.frames import PRIMARY, AnalysisFrames
from cueaudit.decision.preregistration import Preregistration

LEFT_OUT: Final = ("pair_id", "profile_id")
LEAVE_ONE_OUT_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    "contrast_id": pl.String(),
    "left_out": pl.String(),
    "n_refits": pl.Int64(),
    "estimate": pl.Float64(),
    "min_estimate": pl.Float64(),
    "max_estimate": pl.Float64(),
    "most_influential": pl.String(),
    "most_influential_estimate": pl.Float64(),
}


def leave_one_out(
    frames: AnalysisFrames, prereg: Preregistration, *, arm: str = PRIMARY
) -> pl.DataFrame:
    """The LEAVE_ONE_OUT table: one row per in-family contrast and left-out factor."""
    data = frames.arm(arm)
    records = []
    for (domain, fmt), planned in family_cells(prereg).items():
        design = design_of(cell_rows(data, domain, fmt), fmt)
        full = fit_design(design, planned, inference=False)
        for factor in LEFT_OUT:
            labels = design.labels[factor]
            levels = [str(v) for v in np.unique(labels)] if design.n else []
            refits = {
                level: fit_design(
                    design.subset(labels != level), planned, start=full, inference=False
                )
                for level in levels
            }
            for c in planned:
                estimate = full.estimates[c.contrast].estimate
                values = {
                    level: fit.estimates[c.contrast].estimate for level, fit in refits.items()
                }
                values = {k: v for k, v in values.items() if np.isfinite(v)}
                rec: dict[str, object] = {
                    "contrast_id": c.id,
                    "left_out": factor,
                    "n_refits": len(values),
                    "estimate": estimate,
                    "min_estimate": min(values.values()) if values else np.nan,
                    "max_estimate": max(values.values()) if values else np.nan,
                    "most_influential": None,
                    "most_influential_estimate": np.nan,
                }
                if values and np.isfinite(estimate):
                    level = max(values, key=lambda k: abs(values[k] - estimate))
                    rec["most_influential"] = level
                    rec["most_influential_estimate"] = values[level]
                records.append(rec)
    table = pl.DataFrame(records, schema=dict(LEAVE_ONE_OUT_SCHEMA))
    return table.sort(["contrast_id", "left_out"])
