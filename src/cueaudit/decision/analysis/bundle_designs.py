"""The paper's two open questions, on the exploratory bundle types
(:data:`cueaudit.decision.design.EXPLORATORY_BUNDLE_TYPES`); every row is exploratory.

**Recognition against ties** (:func:`recognition_ties_by_type`, :data:`BY_TYPE_SCHEMA`). In the
paper every identical-content bundle was tied and recognised as an audit, so their link could
not be tested. One row per probe and bundle type (pooled over models and domains) puts the
type's content and demographic variation (:data:`BUNDLE_CELLS`: demographic matched is
identical content under race-varying names, paraphrase matched the same with the title line
reworded, name matched identical content without demographic variation, irrelevant matched an
attribute line differing without it) beside its tie rate over complete ranking answers (every
mode), its recognition rate over parsed probe answers, both with Wilson 95% intervals, and
the odds ratio of recognising when tied within the type: each probe answer paired with the same
model's text ranking of the bundle (:func:`~.instrument.probe_tie_pairs`), stratified by
model (Fisher's exact test for one stratum in which both vary, Mantel-Haenszel for several:
:func:`~.instrument.tie_association`). A type whose rankings are all tied (or none) has no
association to estimate (NaN). So the paraphrase-matched row answers "does recognition go with
ties once content is not identical?": whether its tie rate falls below demographic matched's
while its recognition stays, and whether within it the recognising answers are the tied ones.
The pairs of one bundle (seeds, paraphrases) are not independent: the p-value describes.

**Position against demographics at equal precision** (:func:`position_vs_demographics`,
:data:`POSITION_VS_DEMOGRAPHICS_SCHEMA`). In a position-balanced bundle race (Black, White),
gender and the half of the list are mutually orthogonal, each two candidates against two. The
position contrast is therefore the **half of the list** (positions 1-2 against 3-4), not the
paper's first-listed gain (position 1 against 2-4): it is the position contrast that, like the
race and gender contrasts, compares two candidates with two in every bundle (four pairwise
comparisons each), so the three have the same design precision. (Under a gain at the first
position alone, g, the half contrast is g / 2; the first-listed gain is a one-against-three
contrast whose design SE is sqrt(4/3) times the race contrast's in these bundles.) Both
effects come from one fit of the type's complete rankings (:func:`~.instrument.points_fit`: the
position contrast's column and two position columns orthogonal to it that span the other
position differences (:data:`POSITION_CONTRASTS`), tier, race, gender, model, mode, paraphrase
and domain dummies, random intercepts for profile, name pair and answer), their covariance
CR2-clustered by design bundle, and the difference of their sizes, ``|position| -
|demographic|``, is tested as the linear contrast ``sign(position) e_position -
sign(demographic) e_demographic`` with its CR2 SE from the joint covariance and Satterthwaite's
degrees of freedom; ``se_independent`` is the SE had the two been independent. (A difference of
sizes is biased where a true effect is near zero relative to its SE: the sign is then a coin
toss.) The two further position columns matter: without them a first-position gain stays in the
residuals, and since the first candidate is Black in half the bundles and White in the other
half, the race contrast's bundle-level residuals carry it; on the simulator that made the CR2
SE of the race contrast 1.4 times the position contrast's where both estimates spread equally.
``design_se_ratio`` is the ratio of the demographic to the position SE that the design alone
implies (ordinary least squares within answers: 1 in position-balanced bundles, sqrt(3/2) for
Black vs White against the first-listed gain in disguised ones); ``se_ratio`` is the fit's. Per
model and pooled (``"all"``), in positions and in SD units of the sample's points.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np
import polars as pl

from cueaudit.decision.analysis.frames import ANSWER_KEY, PRIMARY, AnalysisFrames
from cueaudit.decision.analysis.instrument import (
    ALL,
    LEVEL,
    PointsFit,
    answer_ids,
    answer_ties,
    complete_rankings,
    nan_row,
    points_fit,
    probe_tie_pairs,
    tie_association,
)
from cueaudit.decision.design import BUNDLE_SIZE, BUNDLE_TYPES
from cueaudit.errors import InputError
from cueaudit.stats.multiplicity import TTest, t_test
from cueaudit.stats.proportions import wilson_interval

LABEL: Final = "exploratory: outside the pre-registered family"
#: Each bundle type's content (what differs between its four candidates) and which
#: demographic varies across them.
BUNDLE_CELLS: Final[Mapping[str, tuple[str, str]]] = {
    "demographic_matched": ("identical", "race"),
    "paraphrase_matched": ("title line reworded", "race"),
    "name_matched": ("identical", "none"),
    "irrelevant_matched": ("attribute line differs", "none"),
    "disguised_demographic": ("different profiles", "race and gender"),
    "disguised_placebo": ("different profiles", "gender"),
    "position_balanced": ("different profiles", "race and gender"),
}
BY_TYPE_SCHEMA: Final = {
    "probe": pl.String(),
    "bundle_type": pl.String(),
    "content": pl.String(),
    "demographic": pl.String(),
    "n_rankings": pl.Int64(),
    "n_tied": pl.Int64(),
    "tie_rate": pl.Float64(),
    "tie_ci_low": pl.Float64(),
    "tie_ci_high": pl.Float64(),
    "n_probes": pl.Int64(),
    "n_recognised": pl.Int64(),
    "recognition_rate": pl.Float64(),
    "recognition_ci_low": pl.Float64(),
    "recognition_ci_high": pl.Float64(),
    "n_pairs": pl.Int64(),
    "n_strata": pl.Int64(),
    "odds_ratio": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "p_value": pl.Float64(),
    "method": pl.String(),
    "label": pl.String(),
}
#: The position contrasts: name -> the fit's position columns, each by its value at
#: positions 1-4. The first is the contrast's focal side; the two others span the rest of the
#: position means, orthogonal to it, so that its coefficient is the contrast (the mean of the
#: focal positions minus that of the others) and no position effect is left in the residuals
#: (where the race and gender contrasts, sharing bundles with it, would pick it up as noise).
POSITION_CONTRASTS: Final[Mapping[str, Mapping[str, tuple[int, ...]]]] = {
    "first_half_vs_second_half": {
        "first_half": (1, 1, 0, 0),
        "position_1_vs_2": (1, -1, 0, 0),
        "position_3_vs_4": (0, 0, 1, -1),
    },
    "first_vs_rest": {
        "first": (1, 0, 0, 0),
        "position_2_vs_3": (0, 1, -1, 0),
        "position_23_vs_4": (0, 1, 1, -2),
    },
}
#: The demographic contrasts of a position fit: contrast id -> coefficient name.
DEMOGRAPHIC_CONTRASTS: Final[Mapping[str, str]] = {
    "black_vs_white": "race[Black]",
    "female_vs_male": "gender[female]",
}
#: The covariances a position fit can be read with (``model`` ignores the within-answer and
#: within-bundle correlation: for checks only).
COVARIANCES: Final = ("cr2", "cr1", "model")
POSITION_VS_DEMOGRAPHICS_SCHEMA: Final = {
    "bundle_type": pl.String(),
    "model": pl.String(),
    "position_contrast": pl.String(),
    "contrast_id": pl.String(),
    "covariance": pl.String(),
    "n_obs": pl.Int64(),
    "n_answers": pl.Int64(),
    "n_clusters": pl.Int64(),
    "outcome_sd": pl.Float64(),
    "position": pl.Float64(),
    "position_se": pl.Float64(),
    "demographic": pl.Float64(),
    "demographic_se": pl.Float64(),
    "se_ratio": pl.Float64(),
    "design_se_ratio": pl.Float64(),
    "correlation": pl.Float64(),
    "difference": pl.Float64(),
    "difference_se": pl.Float64(),
    "se_independent": pl.Float64(),
    "df": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "p_value": pl.Float64(),
    "position_sd": pl.Float64(),
    "demographic_sd": pl.Float64(),
    "difference_sd": pl.Float64(),
    "difference_se_sd": pl.Float64(),
    "ci_low_sd": pl.Float64(),
    "ci_high_sd": pl.Float64(),
    "label": pl.String(),
}


# --- recognition against ties ----------------------------------------------------------------
def _ordered(types: Sequence[str]) -> list[str]:
    known = [t for t in BUNDLE_TYPES if t in types]
    return known + sorted(set(types) - set(known))


def _rate(k: int, n: int) -> tuple[float, float, float]:
    low, high = wilson_interval(k, n, LEVEL)
    return (k / n if n else np.nan), float(low), float(high)


def recognition_ties_by_type(frames: AnalysisFrames, arm: str = PRIMARY) -> pl.DataFrame:
    """:data:`BY_TYPE_SCHEMA`: per probe and bundle type, the tie and recognition rates and
    the association of recognising with tying within the type (module docstring)."""
    part = frames.arm(arm)
    ties = answer_ties(part.rankings, by=("bundle_type",))
    tied = {
        t: (int(g["tied"].sum()), g.height)
        for (t,), g in ties.group_by("bundle_type")
        if t is not None
    }
    parsed = part.probes.filter(pl.col("recognised").is_not_null())
    known = {
        (p, t): (int(g["recognised"].sum()), g.height)
        for (p, t), g in parsed.group_by("probe", "bundle_type")
    }
    pairs = probe_tie_pairs(frames, arm)
    probes = sorted({p for p, _ in known}) or [None]
    rows = []
    for probe in probes:
        for kind in _ordered([*tied, *(t for p, t in known if p == probe)]):
            n_tied, n_rankings = tied.get(kind, (0, 0))
            n_recognised, n_probes = known.get((probe, kind), (0, 0))
            tie_rate, tie_low, tie_high = _rate(n_tied, n_rankings)
            rate, low, high = _rate(n_recognised, n_probes)
            content, demographic = BUNDLE_CELLS.get(kind, (None, None))
            mine = pairs.filter((pl.col("probe") == probe) & (pl.col("bundle_type") == kind))
            association = tie_association(mine)
            rows.append(
                {
                    "probe": probe,
                    "bundle_type": kind,
                    "content": content,
                    "demographic": demographic,
                    "n_rankings": n_rankings,
                    "n_tied": n_tied,
                    "tie_rate": tie_rate,
                    "tie_ci_low": tie_low,
                    "tie_ci_high": tie_high,
                    "n_probes": n_probes,
                    "n_recognised": n_recognised,
                    "recognition_rate": rate,
                    "recognition_ci_low": low,
                    "recognition_ci_high": high,
                    **{k: association.get(k) for k in BY_TYPE_SCHEMA if k in association},
                    "label": LABEL,
                }
            )
    return pl.DataFrame(rows, schema=BY_TYPE_SCHEMA)


# --- position against demographics -----------------------------------------------------------
def design_se_ratio(result: PointsFit, answers: np.ndarray, position: int, other: int) -> float:
    """The SE of coefficient ``other`` over that of ``position`` that the design alone gives:
    ordinary least squares on the fit's columns centred within each answer (the answer's
    points sum to a constant, so only within-answer contrasts carry information)."""
    x = result.x.copy()
    codes = np.unique(answers, return_inverse=True)[1].reshape(-1)
    counts = np.bincount(codes)
    for j in range(x.shape[1]):
        x[:, j] -= (np.bincount(codes, weights=x[:, j]) / counts)[codes]
    keep = [j for j in range(x.shape[1]) if np.abs(x[:, j]).max() > 1e-9]
    if position not in keep or other not in keep:
        return np.nan
    inverse = np.linalg.pinv(x[:, keep].T @ x[:, keep])
    i, k = keep.index(position), keep.index(other)
    return float(np.sqrt(inverse[k, k] / inverse[i, i]))


def _tests(result: PointsFit, contrast: np.ndarray, cov: str) -> TTest:
    """The t test of ``contrast @ coef`` under the covariance ``cov`` (:data:`COVARIANCES`)."""
    if cov == "model":
        variance = float(contrast @ result.fit.cov @ contrast)
        se = float(np.sqrt(variance)) if variance > 0 else np.nan
        return t_test(float(contrast @ result.fit.coef), se, np.inf)
    return result.robust.test(contrast, cov=cov)


def _covariance(result: PointsFit, cov: str) -> np.ndarray:
    if cov == "model":
        return result.fit.cov
    return result.robust.cov_cr2 if cov == "cr2" else result.robust.cov_cr1


def _position_rows(
    sample: pl.DataFrame, identity: dict[str, object], position: str, cov: str
) -> list[dict[str, object]]:
    sd = float(sample["points"].std()) if sample.height > 1 else np.nan
    base = nan_row(POSITION_VS_DEMOGRAPHICS_SCHEMA, **identity) | {
        "n_obs": sample.height,
        "n_answers": sample.select(ANSWER_KEY).n_unique(),
        "n_clusters": sample["bundle_id"].n_unique(),
        "outcome_sd": sd,
    }
    at = sample["position"].to_numpy() - 1
    columns = {
        name: np.asarray(values, dtype=np.float64)[at]
        for name, values in POSITION_CONTRASTS[position].items()
    }
    result = points_fit(sample, columns, pooled=True, cr2=cov == "cr2")
    answers = answer_ids(sample)
    rows = []
    for contrast_id, name in DEMOGRAPHIC_CONTRASTS.items():
        row = base | {"contrast_id": contrast_id}
        if result is None or name not in result.names:
            rows.append(row)
            continue
        k = result.names.index(name)
        ratio = design_se_ratio(result, answers, 1, k)
        if not np.isfinite(ratio):  # constant within every answer: no within-bundle contrast
            rows.append(row)
            continue
        basis = np.eye(len(result.names))
        first, other = _tests(result, basis[1], cov), _tests(result, basis[k], cov)
        signs = np.sign(first.estimate) or 1.0, np.sign(other.estimate) or 1.0
        difference = _tests(result, signs[0] * basis[1] - signs[1] * basis[k], cov)
        low, high = difference.conf_int(LEVEL)
        matrix = _covariance(result, cov)
        scale = sd if sd > 0 else np.nan
        row |= {
            "position": first.estimate,
            "position_se": first.se,
            "demographic": other.estimate,
            "demographic_se": other.se,
            "se_ratio": other.se / first.se,
            "design_se_ratio": ratio,
            "correlation": matrix[1, k] / np.sqrt(matrix[1, 1] * matrix[k, k]),
            "difference": difference.estimate,
            "difference_se": difference.se,
            "se_independent": float(np.hypot(first.se, other.se)),
            "df": difference.df,
            "ci_low": low,
            "ci_high": high,
            "p_value": difference.p,
            "position_sd": first.estimate / scale,
            "demographic_sd": other.estimate / scale,
            "difference_sd": difference.estimate / scale,
            "difference_se_sd": difference.se / scale,
            "ci_low_sd": low / scale,
            "ci_high_sd": high / scale,
        }
        rows.append(row)
    return rows


def position_vs_demographics(
    frames: AnalysisFrames,
    arm: str = PRIMARY,
    *,
    bundle_types: Sequence[str] = ("position_balanced",),
    position: str = "first_half_vs_second_half",
    cov: str = "cr2",
    per_model: bool = True,
) -> pl.DataFrame:
    """:data:`POSITION_VS_DEMOGRAPHICS_SCHEMA`: the position contrast (``position``, one of
    :data:`POSITION_CONTRASTS`) and each demographic contrast from one fit of the complete
    rankings of ``bundle_types``, and the difference of their sizes (module docstring); per
    model and pooled over models (``"all"``). ``cov`` is the covariance the SEs use
    (:data:`COVARIANCES`; the analysis uses CR2, the others are for checks); without
    ``per_model`` only the pooled rows."""
    if position not in POSITION_CONTRASTS:
        raise InputError("position contrast", f"one of {list(POSITION_CONTRASTS)}", "position")
    if cov not in COVARIANCES:
        raise InputError("position covariance", f"one of {list(COVARIANCES)}", "cov")
    sample = complete_rankings(
        frames.arm(arm).rankings.filter(pl.col("bundle_type").is_in(list(bundle_types)))
    )
    if sample.is_empty() or sample.height < BUNDLE_SIZE:
        return pl.DataFrame(schema=POSITION_VS_DEMOGRAPHICS_SCHEMA)
    identity = {
        "bundle_type": ",".join(_ordered(sample["bundle_type"].unique().to_list())),
        "position_contrast": position,
        "covariance": cov,
        "label": LABEL,
    }
    rows = []
    models = sorted(sample["model"].unique().to_list()) if per_model else []
    for model in [*models, ALL]:
        part = sample if model == ALL else sample.filter(pl.col("model") == model)
        rows += _position_rows(part, identity | {"model": model}, position, cov)
    return pl.DataFrame(rows, schema=POSITION_VS_DEMOGRAPHICS_SCHEMA)
