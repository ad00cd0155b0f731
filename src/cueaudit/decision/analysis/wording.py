"""The wording arm (paper: "A wording 'reversal' was a composition artifact"): the demographic
contrasts of an extension arm with several instruction paraphrases, by paraphrase and as
paraphrase × group.

For every extension arm and domain × format cell whose analysed rows (:func:`cell_rows`) hold
more than one paraphrase:

``by paraphrase``
    each paraphrase's rows fitted alone by the family's lmm (:func:`fit_design`): the
    contrast a single-wording audit would report;
``paraphrase x group``
    one joint lmm of the cell with the paraphrase × group interaction (:func:`design_of` with
    ``interaction="paraphrase"``: every contrast dummy times each paraphrase after the first),
    its product terms read as the difference of the contrast between that paraphrase and the
    first, with the fit's Satterthwaite (Rate, Decide) or bundle-CR2 (Rank) SE. The
    paraphrases show the same profiles and name pairs, whose random intercepts the joint fit
    shares, so the difference is not that of two independent estimates.

Each row carries the arm's ``name_assignment`` and whether the composition check flagged the
cell (:func:`~cueaudit.decision.analysis.composition.check_with_flags`): in an arm that ties
race to the application (``fixed_per_profile``) each paraphrase's contrast compares different
applications, and a reversal between paraphrases is the construction's, not the wording's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import polars as pl

from cueaudit.decision.analysis.contrasts import CONTRASTS_SCHEMA, exploratory_reason
from cueaudit.decision.analysis.design_matrix import (
    ContrastSpec,
    cell_rows,
    default_contrasts,
    design_of,
    interaction_contrasts,
)
from cueaudit.decision.analysis.fitters import CellFit, fit_design
from cueaudit.decision.analysis.frames import PRIMARY, AnalysisFrames
from cueaudit.decision.analysis.verdicts import estimate_fields
from cueaudit.decision.tasks import NAME_ASSIGNMENTS

FORMATS: Final = ("rate", "decide", "rank")
BY_PARAPHRASE: Final = "by paraphrase"
INTERACTION: Final = "paraphrase x group"
#: The columns of an estimate row shared by the wording and paired-arm tables (typed as the
#: contrast tables'), and ``note``: why an estimate is NaN.
ESTIMATE_COLUMNS: Final = (
    *("estimator", "unit", "estimate", "se", "df", "inference"),
    *("ci_low", "ci_high", "p_value", "n_obs"),
)
ESTIMATE_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    **{c: CONTRASTS_SCHEMA[c] for c in ESTIMATE_COLUMNS},
    "note": pl.String(),
}
WORDING_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    "arm": pl.String(),
    "name_assignment": pl.String(),
    "domain": pl.String(),
    "format": pl.String(),
    "contrast": pl.String(),
    "term": pl.String(),
    "paraphrase": pl.String(),
    **ESTIMATE_SCHEMA,
    "composition_flagged": pl.Boolean(),
    "label": pl.String(),
}


def _flagged(flags: pl.DataFrame | None, arm: str, domain: str, fmt: str) -> bool | None:
    if flags is None:
        return None
    hit = flags.filter(
        (pl.col("arm") == arm) & (pl.col("domain") == domain) & (pl.col("cell") == fmt)
    )
    return not hit.is_empty()


def wording_contrasts(
    frames: AnalysisFrames,
    *,
    arms: Sequence[str] | None = None,
    name_assignments: Mapping[str, str] | None = None,
    flags: pl.DataFrame | None = None,
    alpha: float = 0.05,
) -> pl.DataFrame:
    """The WORDING table (see the module docstring) of ``arms`` (default: every extension arm
    of the frames); ``name_assignments`` arm -> its design's (default ``crossed``), ``flags``
    the composition flags table (``composition_flagged`` is null without it), ``alpha`` the
    intervals' level. Arms or cells with one paraphrase give no rows."""
    assignments = dict(name_assignments or {})
    if arms is None:
        present = {a for name in ("judgements", "rankings") for a in getattr(frames, name)["arm"]}
        arms = sorted(present - {PRIMARY, None})
    specs = default_contrasts()
    records: list[dict[str, object]] = []
    for arm in arms:
        data = frames.arm(arm)
        reason = exploratory_reason(True, arm)
        label = "pre-registered" if reason is None else f"exploratory: {reason}"
        for fmt in FORMATS:
            source = data.rankings if fmt == "rank" else data.judgements
            if fmt != "rank":
                source = source.filter(pl.col("format") == fmt)
            for domain in sorted(set(source["domain"].drop_nulls())):
                rows = cell_rows(data, domain, fmt)
                paraphrases = sorted(set(rows["paraphrase"].drop_nulls()))
                if len(paraphrases) < 2:
                    continue
                common = {
                    "arm": arm,
                    "name_assignment": assignments.get(arm, NAME_ASSIGNMENTS[0]),
                    "domain": domain,
                    "format": fmt,
                    "composition_flagged": _flagged(flags, arm, domain, fmt),
                    "label": label,
                }
                for term, paraphrase, fit, names in _fits(rows, fmt, paraphrases, specs):
                    records += [
                        {
                            **common,
                            "contrast": contrast,
                            "term": term,
                            "paraphrase": paraphrase,
                            **estimate_fields(fit, fit.estimates[name], alpha),
                        }
                        for contrast, name in names.items()
                    ]
    return pl.DataFrame(records, schema=dict(WORDING_SCHEMA)).sort(
        "arm", "domain", "format", "contrast", "term", "paraphrase"
    )


def _fits(
    rows: pl.DataFrame, fmt: str, paraphrases: Sequence[str], specs: Sequence[ContrastSpec]
) -> list[tuple[str, str, CellFit, dict[str, str]]]:
    """(term, paraphrase, fit, contrast -> its name in the fit) of one cell: each paraphrase
    fitted alone, then the joint fit's difference of each later paraphrase from the first."""
    fits = []
    for paraphrase in paraphrases:
        part = rows.filter(pl.col("paraphrase") == paraphrase)
        fit = fit_design(design_of(part, fmt), specs)
        fits.append((BY_PARAPHRASE, paraphrase, fit, {c.contrast: c.contrast for c in specs}))
    read = interaction_contrasts(specs, "paraphrase", paraphrases)
    differences = [spec for (_, _, kind), spec in read.items() if kind == "difference"]
    joint = fit_design(design_of(rows, fmt, interaction="paraphrase"), differences)
    first, *others = sorted(paraphrases)
    for level in others:
        names = {c.contrast: read[(c.contrast, level, "difference")].contrast for c in specs}
        fits.append((INTERACTION, f"{level}-{first}", joint, names))
    return fits


def reversals(table: pl.DataFrame, *, min_size: float = 0.0) -> pl.DataFrame:
    """The contrasts of the WORDING table whose ``by paraphrase`` estimates change sign
    between paraphrases, each of size above ``min_size``: arm, domain, format, contrast and
    the smallest and largest estimate."""
    by = table.filter(pl.col("term") == BY_PARAPHRASE)
    keys = ["arm", "domain", "format", "contrast"]
    grouped = by.group_by(keys, maintain_order=True).agg(
        low=pl.col("estimate").min(), high=pl.col("estimate").max(),
        smallest=pl.col("estimate").abs().min(),
    )  # fmt: skip
    sign_change = (pl.col("low") < 0) & (pl.col("high") > 0) & (pl.col("smallest") > min_size)
    return grouped.filter(sign_change & pl.col("smallest").is_finite()).select(*keys, "low", "high")
