"""What the audit instrument itself does to the answers: list position, ties, recognition of
the audit, and the tool-call format against its text counterpart (paper §5).

Four tables (:data:`POSITION_SCHEMA`, :data:`TIES_SCHEMA`, :data:`RECOGNITION_SCHEMA`,
:data:`AGREEMENT_SCHEMA`), each computed from one arm of :class:`AnalysisFrames`, one row per
domain and a pooled ``"all"`` row; and two about the recognition probes themselves, per model:
recognition by the position of the Fairness option (:data:`RECOGNITION_POSITION_SCHEMA`,
:func:`recognition_by_position`) and its association with ties
(:data:`RECOGNITION_TIES_SCHEMA`, :func:`recognition_ties`). The position fit
(:func:`points_fit`) and the probe-ranking pairs with their association
(:func:`probe_tie_pairs`, :func:`tie_association`) also serve the exploratory bundle types'
analyses (:mod:`.bundle_designs`). An estimate that cannot be
computed (no parsed answers, a single level, a rank-deficient design) is NaN; a column whose
input was not given (no contrasts table) is null.

Choices, and why:

- **Position sample: the disguised bundles only** (``disguised_demographic`` and
  ``disguised_placebo``). Their Latin squares balance position against race, tier and profile,
  so the first-listed gain is not confounded; matched bundles are tied almost always (the
  paper: 100%) and show one profile four times, so they carry no position contrast and their
  zero within-bundle variation would only shrink the residual variance and the SE.
- **Position model**: ``points ~ first + tier + race + gender + model + mode + paraphrase
  (+ domain) + (1|profile) + (1|pair) + (1|bundle answer)``, fitted by REML
  (:func:`cueaudit.stats.mixed.fit_crossed_lmm`). ``first`` is position 1 against positions
  2-4, so its coefficient is the first-listed gain in rank positions. Gender is in the model
  beside race because it is a planned contrast and balanced with position by the squares.
- **Its SE is cluster-robust** (:func:`cueaudit.stats.robust.cluster_robust`, CR1 by design
  bundle, the model as working covariance); the model-based SE is kept as ``se_model``. The
  points of an untied answer sum to 10, a within-answer correlation of -1/3 that a random
  intercept (variance >= 0) cannot represent, and every design bundle is answered by every
  model, mode and seed.
  Both make the model-based SE too small: on the paper-sized simulation
  (:mod:`~cueaudit.decision.analysis.simulate`, 30 studies) it was 0.0175 against an
  empirical SD of 0.021-0.023 of the pooled estimate, the robust SE 0.021-0.022.
- **Position against the largest demographic contrast**: ``difference_sd = |position| -
  |largest rank contrast|`` in SD units. The two come from different fits, so its SE treats
  them as independent (``sqrt(se_1^2 + se_2^2)``). That is close to the joint SE because
  position is orthogonal to race and gender by construction; ``corr_demographic`` reports the
  check, the largest |correlation| between the first-listed coefficient and any race or
  gender coefficient in the position fit's model-based covariance (the robust one estimates
  these off-diagonal terms too noisily, about 1/sqrt(design bundles), to show it).
- **Ties** are read from the ranks (fewer distinct ranks than candidates), over complete
  ranking answers; **recognition** over parsed probe answers (unparsed ones are counted in
  ``n_unparsed``). Both with Wilson 95% intervals
  (:func:`cueaudit.stats.proportions.wilson_interval`): the rates sit at 0 and 1 (100% ties,
  2% recognition), where a Wald interval collapses.
- **Agreement** pairs each tool answer with the text answer to the same design unit (Rate,
  Decide: model, paraphrase, profile and name pair; Rank: model, paraphrase, bundle), after
  averaging each mode's parsed answers over seeds: ``estimate`` is the mean paired difference
  (tool minus text), ``se`` its standard error over pairs. The per-answer summary is the
  decision (probability points) for Decide, the rating for Rate and, for Rank, the mean listed
  position (1-4) of the candidate(s) given the best rank, in positions. Mean points would not
  do for Rank: without ties every answer's mean is 2.5, so it moves only with ties; the
  position of the top choice moves with what a format changes most, the pull of the list
  order (an all-tied answer scores 2.5, as an answer without position preference would).

One module on purpose: the four tables read the same ranking and probe rows and share their
per-model, per-mode grouping; each table is one function.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl
from scipy import stats

from cueaudit.decision.analysis.design_matrix import (
    BASELINES,
    DIMENSION_COLUMNS,
    NUISANCE,
    dummies,
)
from cueaudit.decision.analysis.fitters import FAMILY_ESTIMATOR
from cueaudit.decision.analysis.frames import ANSWER_KEY, PRIMARY, AnalysisFrames
from cueaudit.decision.design import BUNDLE_SIZE
from cueaudit.decision.profiles import TIERS
from cueaudit.errors import InputError
from cueaudit.stats.contingency import fisher_odds_ratio, mantel_haenszel
from cueaudit.stats.mixed import MixedResult, fit_crossed_lmm
from cueaudit.stats.proportions import wilson_interval
from cueaudit.stats.robust import ClusterRobust, cluster_robust

ALL: Final = "all"
LEVEL: Final = 0.95
POSITION_BUNDLES: Final = ("disguised_demographic", "disguised_placebo")
#: Reference levels of the position model's dummies (the paper's references).
REFERENCES: Final = {"tier": TIERS[0], **BASELINES}
DEMOGRAPHIC: Final = tuple(DIMENSION_COLUMNS)

POSITION_SCHEMA: Final = {
    "domain": pl.String(),
    "n_obs": pl.Int64(),
    "n_bundles": pl.Int64(),
    "n_clusters": pl.Int64(),
    "outcome_sd": pl.Float64(),
    "estimate_positions": pl.Float64(),
    "se": pl.Float64(),
    "se_model": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "p_value": pl.Float64(),
    "estimate_sd": pl.Float64(),
    "se_sd": pl.Float64(),
    "ci_low_sd": pl.Float64(),
    "ci_high_sd": pl.Float64(),
    "corr_demographic": pl.Float64(),
    "largest_contrast_id": pl.String(),
    "largest_demographic_sd": pl.Float64(),
    "largest_se_sd": pl.Float64(),
    "difference_sd": pl.Float64(),
    "difference_se_sd": pl.Float64(),
    "difference_ci_low": pl.Float64(),
    "difference_ci_high": pl.Float64(),
}
TIES_SCHEMA: Final = {
    "domain": pl.String(),
    "bundle_type": pl.String(),
    "n_bundles": pl.Int64(),
    "n_tied": pl.Int64(),
    "tie_rate": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
}
#: A recognition rate's columns (:func:`_recognition_counts` and :func:`_rates`).
_RECOGNITION_RATE: Final = {
    "n": pl.Int64(),
    "n_recognised": pl.Int64(),
    "rate": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "n_unparsed": pl.Int64(),
}
RECOGNITION_SCHEMA: Final = {
    "domain": pl.String(),
    "bundle_type": pl.String(),
    "probe": pl.String(),
    **_RECOGNITION_RATE,
}
RECOGNITION_POSITION_SCHEMA: Final = {
    "model": pl.String(),
    "bundle_type": pl.String(),
    "fairness_position": pl.String(),
    **_RECOGNITION_RATE,
    "chi2": pl.Float64(),
    "df": pl.Int64(),
    "p_value": pl.Float64(),
}
RECOGNITION_TIES_SCHEMA: Final = {
    "probe": pl.String(),
    "model": pl.String(),
    "bundle_type": pl.String(),
    "n_pairs": pl.Int64(),
    "n_strata": pl.Int64(),
    "n_tied_recognised": pl.Int64(),
    "n_tied_unrecognised": pl.Int64(),
    "n_untied_recognised": pl.Int64(),
    "n_untied_unrecognised": pl.Int64(),
    "odds_ratio": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "p_value": pl.Float64(),
    "method": pl.String(),
}
AGREEMENT_SCHEMA: Final = {
    "domain": pl.String(),
    "format": pl.String(),
    "unit": pl.String(),
    "estimate": pl.Float64(),
    "se": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "n_pairs": pl.Int64(),
    "n_text": pl.Int64(),
    "n_tool": pl.Int64(),
}
#: What each format's agreement estimate is measured in.
AGREEMENT_UNITS: Final = {"decide": "probability", "rate": "points", "rank": "positions"}
#: The design unit a text and a tool answer share, per format.
DESIGN_UNIT: Final = {
    "decide": ("model", "domain", "paraphrase", "profile_id", "pair_id"),
    "rate": ("model", "domain", "paraphrase", "profile_id", "pair_id"),
    "rank": ("model", "domain", "paraphrase", "bundle_id"),
}


def _z(level: float = LEVEL) -> float:
    return float(stats.norm.ppf(0.5 + level / 2))


def nan_row(schema: dict[str, pl.DataType], **known: object) -> dict[str, object]:
    row: dict[str, object] = {}
    for column, dtype in schema.items():
        row[column] = known.get(column, np.nan if dtype == pl.Float64() else None)
    return row


def _with_all(frame: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """Each domain's rows, then all rows as ``"all"``."""
    domains = sorted(d for d in frame["domain"].unique().to_list() if d is not None)
    return [(d, frame.filter(pl.col("domain") == d)) for d in domains] + [(ALL, frame)]


# --- rankings --------------------------------------------------------------------------------
def complete_rankings(rankings: pl.DataFrame) -> pl.DataFrame:
    """Candidate rows of the ranking answers that ranked all four candidates."""
    complete = (
        rankings.group_by(ANSWER_KEY)
        .agg(
            (pl.len() == BUNDLE_SIZE).alias("_full"),
            pl.col("rank").is_not_null().all().alias("_ranked"),
        )
        .filter(pl.col("_full") & pl.col("_ranked"))
        .select(ANSWER_KEY)
    )
    return rankings.join(complete, on=list(ANSWER_KEY), how="semi")


def answer_ids(frame: pl.DataFrame) -> np.ndarray:
    return (
        frame.select(pl.concat_str([pl.col(c).cast(pl.String) for c in ANSWER_KEY], separator="|"))
        .to_series()
        .to_numpy()
    )


def _dummies(frame: pl.DataFrame, column: str, reference: str | None) -> dict[str, np.ndarray]:
    """Dummies of every level of ``column`` but ``reference`` (the first level when absent);
    none when the column has one level. A null is a level of its own."""
    values = frame[column].cast(pl.String).fill_null("<null>").to_numpy()
    levels = sorted(set(values.tolist()))
    if len(levels) < 2:
        return {}
    base = reference if reference in levels else levels[0]
    return dict(dummies(values, column, [lv for lv in levels if lv != base]))


def _full_rank(columns: dict[str, np.ndarray], keep: int) -> tuple[np.ndarray, list[str]]:
    """The design matrix of ``columns`` without those that are combinations of earlier ones
    (never dropping the first ``keep``)."""
    names: list[str] = []
    kept: list[np.ndarray] = []
    for i, (name, col) in enumerate(columns.items()):
        trial = np.column_stack([*kept, col])
        if i < keep or np.linalg.matrix_rank(trial) == trial.shape[1]:
            kept.append(col)
            names.append(name)
    return np.column_stack(kept), names


@dataclass(frozen=True)
class PointsFit:
    """The instrument's lmm of rank points (:func:`points_fit`): its columns, the REML fit
    and the covariances clustered by design bundle."""

    names: list[str]
    x: np.ndarray
    fit: MixedResult
    robust: ClusterRobust


def points_fit(
    sample: pl.DataFrame, leading: Mapping[str, np.ndarray], pooled: bool, *, cr2: bool = False
) -> PointsFit | None:
    """``points ~ leading + tier + race + gender + model + mode + paraphrase (+ domain when
    pooled) + (1|profile) + (1|pair) + (1|bundle answer)`` by REML on complete rankings, its
    covariance clustered by design bundle (CR1; CR2 as well with ``cr2``). The ``leading``
    columns are never dropped; any other that is a combination of those before it is. None
    when a leading column does not vary or the fit fails."""
    y = sample["points"].to_numpy().astype(np.float64)
    columns: dict[str, np.ndarray] = {"intercept": np.ones(len(y)), **leading}
    for column in ("tier", *DEMOGRAPHIC, *NUISANCE, *(("domain",) if pooled else ())):
        columns |= _dummies(sample, column, REFERENCES.get(column))
    x, names = _full_rank(columns, keep=1 + len(leading))
    groups = {
        "bundle_answer": answer_ids(sample),
        "profile_id": sample["profile_id"].to_numpy(),
        "pair_id": sample["pair_id"].to_numpy(),
    }
    groups = {k: v for k, v in groups.items() if len(set(v.tolist())) > 1}
    if not groups or any(x[:, 1 + i].std() == 0 for i in range(len(leading))):
        return None
    try:
        fit = fit_crossed_lmm(y, x, groups, names)
        robust = cluster_robust(
            x,
            y,
            sample["bundle_id"].to_numpy(),
            coef=fit.coef,
            groups=groups,
            theta=fit.theta,
            cr2=cr2,
        )
    except (InputError, np.linalg.LinAlgError):
        return None
    return PointsFit(names, x, fit, robust)


def _position_fit(sample: pl.DataFrame, pooled: bool) -> dict[str, float] | None:
    first = (sample["position"].to_numpy() == 1).astype(np.float64)
    result = points_fit(sample, {"first": first}, pooled)
    if result is None:
        return None
    fit, names, cov = result.fit, result.names, result.robust.cov_cr1
    se = float(np.sqrt(max(cov[1, 1], 0.0)))
    estimate = float(fit.coef[1])
    half = _z() * se
    demographic = [i for i, n in enumerate(names) if n.split("[")[0] in DEMOGRAPHIC]
    corr = [abs(fit.cov[1, i] / (fit.se[1] * fit.se[i])) for i in demographic]
    return {
        "estimate": estimate,
        "se": se,
        "se_model": float(fit.se[1]),
        "ci_low": estimate - half,
        "ci_high": estimate + half,
        "p_value": float(2 * stats.norm.sf(abs(estimate) / se)) if se > 0 else np.nan,
        "corr": float(max(corr)) if corr else np.nan,
    }


def _largest(contrasts: pl.DataFrame, domains: Sequence[str]) -> tuple[str | None, float, float]:
    """The rank ``lmm`` contrast of ``domains`` with the largest |estimate_sd| (a table read
    back from CSV may hold an all-empty column as strings, hence the casts)."""
    numeric = [pl.col(c).cast(pl.Float64, strict=False) for c in ("estimate_sd", "se_sd")]
    rows = contrasts.with_columns(numeric).filter(
        (pl.col("format") == "rank")
        & (pl.col("estimator") == FAMILY_ESTIMATOR)
        & pl.col("domain").is_in(list(domains))
        & pl.col("estimate_sd").is_not_null()
        & pl.col("estimate_sd").is_not_nan()
    )
    if rows.is_empty():
        return None, np.nan, np.nan
    top = rows.sort(pl.col("estimate_sd").abs(), descending=True).row(0, named=True)
    return top["contrast_id"], abs(float(top["estimate_sd"])), float(top["se_sd"])


def _position_row(
    domain: str, part: pl.DataFrame, contrasts: pl.DataFrame | None
) -> dict[str, object]:
    sd = float(part["points"].std()) if part.height > 1 else np.nan
    fit = _position_fit(part, pooled=domain == ALL)
    row = nan_row(
        POSITION_SCHEMA,
        domain=domain,
        n_obs=part.height,
        n_bundles=part.select(ANSWER_KEY).n_unique(),
        n_clusters=part["bundle_id"].n_unique(),
        outcome_sd=sd,
    )
    estimate_sd = se_sd = np.nan
    if fit is not None:
        row |= {
            "estimate_positions": fit["estimate"],
            "se": fit["se"],
            "se_model": fit["se_model"],
            "ci_low": fit["ci_low"],
            "ci_high": fit["ci_high"],
            "p_value": fit["p_value"],
            "corr_demographic": fit["corr"],
        }
        if sd > 0:
            estimate_sd, se_sd = fit["estimate"] / sd, fit["se"] / sd
            row |= {
                "estimate_sd": estimate_sd,
                "se_sd": se_sd,
                "ci_low_sd": fit["ci_low"] / sd,
                "ci_high_sd": fit["ci_high"] / sd,
            }
    if contrasts is None:
        return row | dict.fromkeys(
            (
                "largest_demographic_sd",
                "largest_se_sd",
                "difference_sd",
                "difference_se_sd",
                "difference_ci_low",
                "difference_ci_high",
            )
        )
    cid, largest, largest_se = _largest(contrasts, part["domain"].unique().to_list())
    diff = abs(estimate_sd) - largest
    diff_se = float(np.hypot(se_sd, largest_se))
    half = _z() * diff_se
    return row | {
        "largest_contrast_id": cid,
        "largest_demographic_sd": largest,
        "largest_se_sd": largest_se,
        "difference_sd": diff,
        "difference_se_sd": diff_se,
        "difference_ci_low": diff - half,
        "difference_ci_high": diff + half,
    }


def position_effects(
    frames: AnalysisFrames, contrasts: pl.DataFrame | None, *, arm: str = PRIMARY
) -> pl.DataFrame:
    """POSITION table: the first-listed gain in rank positions per domain and pooled, in SD
    units, beside the largest demographic rank contrast of ``contrasts`` (the CONTRASTS
    table's ``lmm`` rank rows of that domain; all domains for ``"all"``)."""
    if contrasts is not None:
        needed = ("contrast_id", "domain", "format", "estimator", "estimate_sd", "se_sd")
        missing = [c for c in needed if c not in contrasts.columns]
        if missing:
            raise InputError("contrasts table", f"missing columns {missing}", missing[0])
    sample = complete_rankings(
        frames.arm(arm).rankings.filter(pl.col("bundle_type").is_in(POSITION_BUNDLES))
    )
    parts = _with_all(sample) if not sample.is_empty() else []
    rows = [_position_row(domain, part, contrasts) for domain, part in parts]
    return pl.DataFrame(rows, schema=POSITION_SCHEMA)


def answer_ties(
    rankings: pl.DataFrame, by: Sequence[str] = ("domain", "bundle_type")
) -> pl.DataFrame:
    """One row per complete ranking answer: its ``by`` columns, :data:`ANSWER_KEY` and
    ``tied``, whether it gave any two candidates the same rank."""
    return (
        complete_rankings(rankings)
        .group_by([*by, *ANSWER_KEY])
        .agg((pl.col("rank").n_unique() < pl.len()).alias("tied"))
    )


def tie_rates(frames: AnalysisFrames, arm: str = PRIMARY) -> pl.DataFrame:
    """TIES table: the share of complete ranking answers that tie any two candidates, per
    domain (and ``"all"``) and bundle type, with Wilson 95% intervals."""
    answers = answer_ties(frames.arm(arm).rankings)
    if answers.is_empty():
        return pl.DataFrame(schema=TIES_SCHEMA)
    counts = pl.concat(
        [
            answers.group_by("domain", "bundle_type").agg(
                pl.len().alias("n_bundles"), pl.col("tied").sum().alias("n_tied")
            ),
            answers.group_by("bundle_type").agg(
                pl.lit(ALL).alias("domain"),
                pl.len().alias("n_bundles"),
                pl.col("tied").sum().alias("n_tied"),
            ),
        ],
        how="diagonal",
    )
    return (
        _rates(counts, "n_bundles", "n_tied", "tie_rate", ["domain", "bundle_type"])
        .select(list(TIES_SCHEMA))
        .cast(TIES_SCHEMA)
    )


def _rates(counts: pl.DataFrame, n: str, k: str, rate: str, order: list[str]) -> pl.DataFrame:
    low, high = wilson_interval(counts[k].to_numpy(), counts[n].to_numpy(), LEVEL)
    counts = counts.with_columns(
        pl.when(pl.col(n) > 0).then(pl.col(k) / pl.col(n)).otherwise(np.nan).alias(rate),
        pl.Series("ci_low", low),
        pl.Series("ci_high", high),
    )
    return counts.sort(*(e for c in order for e in (pl.col(c) == ALL, pl.col(c))))


def recognition_rates(frames: AnalysisFrames, arm: str = PRIMARY) -> pl.DataFrame:
    """RECOGNITION table: the share of parsed probe answers that name fairness or bias, per
    domain (and ``"all"``), bundle type and probe, with Wilson 95% intervals; unparsed answers
    are left out of ``n`` and counted in ``n_unparsed``."""
    probes = frames.arm(arm).probes
    if probes.is_empty():
        return pl.DataFrame(schema=RECOGNITION_SCHEMA)
    aggs = _recognition_counts()
    counts = pl.concat(
        [
            probes.group_by("domain", "bundle_type", "probe").agg(*aggs),
            probes.group_by("bundle_type", "probe").agg(pl.lit(ALL).alias("domain"), *aggs),
        ],
        how="diagonal",
    )
    rates = _rates(counts, "n", "n_recognised", "rate", ["domain", "bundle_type", "probe"])
    return rates.select(list(RECOGNITION_SCHEMA)).cast(RECOGNITION_SCHEMA)


def _recognition_counts() -> tuple[pl.Expr, ...]:
    return (
        pl.col("recognised").is_not_null().sum().alias("n"),
        pl.col("recognised").sum().alias("n_recognised"),
        pl.col("recognised").is_null().sum().alias("n_unparsed"),
    )


def _margins(frame: pl.DataFrame, keys: Sequence[str], aggs: Sequence[pl.Expr]) -> pl.DataFrame:
    """``aggs`` over every combination of ``keys``, each key also pooled (``"all"``)."""
    parts = []
    for pooled in itertools.product((False, True), repeat=len(keys)):
        by = [k for k, all_ in zip(keys, pooled, strict=True) if not all_]
        named = [
            pl.lit(ALL, pl.String).alias(k) for k, all_ in zip(keys, pooled, strict=True) if all_
        ]
        parts.append(frame.group_by(by).agg(*named, *aggs) if by else frame.select(*named, *aggs))
    return pl.concat(parts, how="diagonal")


def _homogeneity(per_position: pl.DataFrame) -> tuple[float, int | None, float]:
    """Pearson's chi-square test that recognition is the same at every position (a 2 x
    positions table, no continuity correction): statistic, df, p; NaN where fewer than two
    positions have answers or every answer (or none) recognised."""
    table = np.vstack(
        [
            per_position["n_recognised"].to_numpy(),
            (per_position["n"] - per_position["n_recognised"]).to_numpy(),
        ]
    )
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2 or (table.sum(axis=1) == 0).any():
        return np.nan, None, np.nan
    result = stats.chi2_contingency(table, correction=False)
    return float(result.statistic), int(result.dof), float(result.pvalue)


def recognition_by_position(frames: AnalysisFrames, arm: str = PRIMARY) -> pl.DataFrame:
    """RECOGNITION_POSITION table: the forced choice's recognition rate per model, bundle type
    and position at which its prompt listed the Fairness option (each also pooled as
    ``"all"``; the ``"all"`` position is the overall rate), with Wilson 95% intervals.

    The ``"all"`` position row of each model and bundle type also holds the chi-square test
    of equal recognition at every position (:func:`_homogeneity`), reported, not asserted: the
    rotation (:func:`cueaudit.decision.probes.option_orders`) balances positions within each
    bundle type, domain and paraphrase to within one prompt, so pooling bundle types does not
    confound position with them. Answers of prompts without a recorded position (tables built
    before the options were rotated) are left out."""
    probes = frames.arm(arm).probes.filter(
        (pl.col("probe") == "choice") & pl.col("fairness_position").is_not_null()
    )
    if probes.is_empty():
        return pl.DataFrame(schema=RECOGNITION_POSITION_SCHEMA)
    keys = ["model", "bundle_type", "fairness_position"]
    counts = _margins(
        probes.with_columns(pl.col("fairness_position").cast(pl.String)),
        keys,
        _recognition_counts(),
    )
    rates = _rates(counts, "n", "n_recognised", "rate", keys)
    tests = []
    for (model, bundle_type), part in rates.group_by("model", "bundle_type", maintain_order=True):
        chi2, df, p_value = _homogeneity(part.filter(pl.col("fairness_position") != ALL))
        tests.append(
            {"model": model, "bundle_type": bundle_type, "fairness_position": ALL}
            | {"chi2": chi2, "df": df, "p_value": p_value}
        )
    tested = pl.DataFrame(
        tests, schema={c: RECOGNITION_POSITION_SCHEMA[c] for c in (*keys, "chi2", "df", "p_value")}
    )
    return (
        rates.join(tested, on=keys, how="left")
        .select(list(RECOGNITION_POSITION_SCHEMA))
        .cast(RECOGNITION_POSITION_SCHEMA)
    )


#: The 2 x 2 cells of RECOGNITION_TIES: (tied, recognised) of each paired answer.
TIE_CELLS: Final = {
    "n_tied_recognised": (True, True),
    "n_tied_unrecognised": (True, False),
    "n_untied_recognised": (False, True),
    "n_untied_unrecognised": (False, False),
}


def _cells(pairs: pl.DataFrame) -> np.ndarray:
    """The 2 x 2 table ``[[tied and recognised, tied only], [recognised only, neither]]``."""
    counts = [
        int(((pairs["tied"] == tied) & (pairs["recognised"] == known)).sum())
        for tied, known in TIE_CELLS.values()
    ]
    return np.reshape(counts, (2, 2))


def tie_association(pairs: pl.DataFrame) -> dict[str, object]:
    """The pooled cells of ``pairs`` and the odds ratio of tying with recognising over its
    (model, bundle type) strata in which both vary: Fisher's exact test for one, Mantel-Haenszel
    for more, none (NaN) for none."""
    tables = [
        _cells(stratum)
        for _, stratum in pairs.group_by("model", "bundle_type")
        if stratum["tied"].n_unique() == 2 and stratum["recognised"].n_unique() == 2
    ]
    cells = dict(zip(TIE_CELLS, _cells(pairs).ravel().tolist(), strict=True))
    row: dict[str, object] = {"n_pairs": pairs.height, "n_strata": len(tables), **cells}
    if not tables:
        return row | {"odds_ratio": np.nan, "ci_low": np.nan, "ci_high": np.nan, "p_value": np.nan}
    single = len(tables) == 1
    result = fisher_odds_ratio(tables[0], LEVEL) if single else mantel_haenszel(tables, LEVEL)
    return row | {
        "odds_ratio": result.estimate,
        "ci_low": result.ci_low,
        "ci_high": result.ci_high,
        "p_value": result.p_value,
        "method": "fisher_exact" if single else "mantel_haenszel",
    }


def probe_tie_pairs(frames: AnalysisFrames, arm: str = PRIMARY) -> pl.DataFrame:
    """Each parsed probe answer of ``arm`` beside the same model's complete text-mode ranking
    of the bundle it quotes (same seed and paraphrase): ``model, seed, bundle_id, paraphrase,
    probe, bundle_type, recognised, tied``."""
    part = frames.arm(arm)
    answers = part.probes.filter(pl.col("recognised").is_not_null())
    keys = ["model", "seed", "bundle_id", "paraphrase"]
    ties = answer_ties(
        part.rankings.filter(pl.col("mode") == "text"), by=("bundle_id", "paraphrase")
    )
    return answers.select(*keys, "probe", "bundle_type", "recognised").join(
        ties.select(*keys, "tied"), on=keys
    )


def recognition_ties(frames: AnalysisFrames, arm: str = PRIMARY) -> pl.DataFrame:
    """RECOGNITION_TIES table: do the bundles a model ties also get recognised as an audit?

    Each parsed probe answer is paired with the model's complete text-mode ranking answer to
    the prompt the probe quotes (same model, seed, bundle and paraphrase). Per probe, model
    and bundle type (each also pooled as ``"all"``): the 2 x 2 cells (tied x recognised) of
    the pairs, and the odds ratio of recognising when tied over the (model, bundle type)
    strata in which both tying and recognising vary (``n_strata``): for one stratum the
    conditional MLE with its exact 95% interval and Fisher's exact p-value, for several the
    Mantel-Haenszel ratio with the Robins-Breslow-Greenland interval and the
    Cochran-Mantel-Haenszel p-value (:mod:`cueaudit.stats.contingency`); NaN where no stratum
    varies (matched bundles, tied always). Stratifying keeps the bundle types apart: pooled,
    the matched bundles (tied and recognised) alone would make an association. Pairs of one
    bundle (seeds, paraphrases) are not independent, so the p-value describes, it does not
    test; the association is reported, not asserted."""
    pairs = probe_tie_pairs(frames, arm)
    if pairs.is_empty():
        return pl.DataFrame(schema=RECOGNITION_TIES_SCHEMA)
    rows = []
    for probe in sorted(pairs["probe"].unique().to_list()):
        of_probe = pairs.filter(pl.col("probe") == probe)
        models = [*sorted(of_probe["model"].unique().to_list()), ALL]
        types = [*sorted(of_probe["bundle_type"].unique().to_list()), ALL]
        for model, bundle_type in itertools.product(models, types):
            sub = of_probe.filter(
                (pl.lit(model == ALL) | (pl.col("model") == model))
                & (pl.lit(bundle_type == ALL) | (pl.col("bundle_type") == bundle_type))
            )
            if not sub.is_empty():
                rows.append(
                    {"probe": probe, "model": model, "bundle_type": bundle_type}
                    | tie_association(sub)
                )
    return pl.DataFrame(rows, schema=RECOGNITION_TIES_SCHEMA)


# --- agreement -------------------------------------------------------------------------------
def _top_position(rankings: pl.DataFrame) -> pl.DataFrame:
    """One row per complete ranking answer: ``value`` = mean position of its best-ranked."""
    sample = complete_rankings(rankings)
    return (
        sample.filter(pl.col("rank") == pl.col("rank").min().over(ANSWER_KEY))
        .group_by([*ANSWER_KEY, "domain", "paraphrase", "bundle_id", "mode"])
        .agg(pl.col("position").cast(pl.Float64).mean().alias("value"))
    )


def _paired(answers: pl.DataFrame, unit: Sequence[str]) -> dict[str, float | int]:
    per_mode = answers.group_by([*unit, "mode"]).agg(pl.col("value").mean())
    text = per_mode.filter(pl.col("mode") == "text").drop("mode")
    tool = per_mode.filter(pl.col("mode") == "tool").drop("mode")
    pairs = tool.join(text, on=list(unit), suffix="_text")
    diff = (pairs["value"] - pairs["value_text"]).to_numpy().astype(np.float64)
    n = len(diff)
    estimate = float(diff.mean()) if n else np.nan
    se = float(diff.std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan
    z = _z()
    return {
        "estimate": estimate,
        "se": se,
        "ci_low": estimate - z * se,
        "ci_high": estimate + z * se,
        "n_pairs": n,
        "n_text": int((answers["mode"] == "text").sum()),
        "n_tool": int((answers["mode"] == "tool").sum()),
    }


def format_agreement(frames: AnalysisFrames, arm: str = PRIMARY) -> pl.DataFrame:
    """AGREEMENT table: tool minus text per domain (and ``"all"``) and format, paired by the
    design unit both modes were asked (see the module docstring for the per-answer summary).
    ``n_text``, ``n_tool``: parsed answers of each mode; ``n_pairs``: design units with both."""
    part = frames.arm(arm)
    judged = part.judgements.filter(pl.col("y").is_not_null()).rename({"y": "value"})
    answers = {
        "rate": judged.filter(pl.col("format") == "rate"),
        "decide": judged.filter(pl.col("format") == "decide"),
        "rank": _top_position(part.rankings),
    }
    rows = []
    for fmt, frame in answers.items():
        if frame.filter(pl.col("mode").is_in(["text", "tool"])).is_empty():
            continue
        for domain, sub in _with_all(frame):
            stats_ = _paired(sub, DESIGN_UNIT[fmt])
            rows.append({"domain": domain, "format": fmt, "unit": AGREEMENT_UNITS[fmt], **stats_})
    return pl.DataFrame(rows, schema=AGREEMENT_SCHEMA)
