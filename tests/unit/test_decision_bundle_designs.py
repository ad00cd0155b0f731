"""The exploratory bundle types' analyses (recognition against ties by type; position against
demographics at equal precision) on simulated studies of their designs."""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import polars as pl
import pytest

from cueaudit.decision.analysis.bundle_designs import (
    BY_TYPE_SCHEMA,
    LABEL,
    POSITION_VS_DEMOGRAPHICS_SCHEMA,
    position_vs_demographics,
    recognition_ties_by_type,
)
from cueaudit.decision.analysis.composition import check_analysis_subsamples
from cueaudit.decision.analysis.frames import AnalysisFrames
from cueaudit.decision.analysis.instrument import (
    complete_rankings,
    points_fit,
    recognition_rates,
    recognition_ties,
    tie_rates,
)
from cueaudit.decision.analysis.simulate import build_design, rank_lapse_needed, simulate
from cueaudit.decision.analysis.simulation_settings import SimulationSettings
from cueaudit.errors import InputError

RANKS = ["decision_rank_text", "decision_rank_json", "decision_rank_tool"]
PROBES = ["decision_probe_choice", "decision_probe_free"]
TYPES = {
    "demographic_matched": 4,
    "irrelevant_matched": 4,
    "paraphrase_matched": 8,
    "name_matched": 4,
    "position_balanced": 12,
    "disguised_demographic": 12,
}
DESIGN = {
    "domains": ["hiring"],
    "paraphrases": 1,
    "tasks": [*RANKS, *PROBES],
    "bundles_per_type": TYPES,
    "probe_bundles": 8,
}
#: Recognition goes with ties in paraphrase-matched bundles: 0.95 of the probes of a tied
#: bundle recognise, 0.35 of the others (both probes).
LINKED = {p: {"paraphrase_matched": 0.95} for p in ("choice", "free")}
UNLINKED = {p: {"paraphrase_matched": 0.35} for p in ("choice", "free")}


@cache
def study(linked: bool, seed: int = 0) -> AnalysisFrames:
    settings = SimulationSettings(
        design=DESIGN,
        seeds=(0, 1),
        recognition=UNLINKED,
        recognition_if_tied=LINKED if linked else {},
    )
    return simulate(settings, seed)


# --- recognition against ties ----------------------------------------------------------------
def test_every_tie_and_recognition_table_has_the_new_types() -> None:
    frames = study(linked=True)
    new = {"paraphrase_matched", "name_matched", "position_balanced"}
    ties = tie_rates(frames).filter(pl.col("domain") == "all")
    assert new <= set(ties["bundle_type"])
    rate = dict(zip(ties["bundle_type"], ties["tie_rate"], strict=True))
    # the simulator's tie rates: identical content always, four profiles never, paraphrased half
    assert rate["name_matched"] == 1.0 and rate["position_balanced"] == 0.0
    assert 0.35 < rate["paraphrase_matched"] < 0.65
    assert new <= set(recognition_rates(frames)["bundle_type"])
    assert new <= set(recognition_ties(frames)["bundle_type"])
    composition = check_analysis_subsamples(frames)
    checked = composition.filter(pl.col("subsample") == "design")
    names = set(checked["name"])
    assert {f"rankings {t}" for t in new} <= names and checked["passed"].all()
    assert {("half", "profile_id"), ("attribute", "race")} <= set(
        zip(checked["group"], checked["factor"], strict=True)
    )


def test_recognition_goes_with_ties_where_it_was_planted_and_not_where_it_was_not() -> None:
    table = recognition_ties_by_type(study(linked=True))
    assert table.schema == pl.Schema(BY_TYPE_SCHEMA) and set(table["label"]) == {LABEL}
    assert table.height == 2 * len(TYPES)  # every type, both probes
    rows = {(r["probe"], r["bundle_type"]): r for r in table.iter_rows(named=True)}
    for probe in ("choice", "free"):
        para = rows[(probe, "paraphrase_matched")]
        assert (para["content"], para["demographic"]) == ("title line reworded", "race")
        assert para["method"] == "mantel_haenszel" and para["n_strata"] >= 3
        assert para["ci_low"] > 1.0 and para["odds_ratio"] > 5  # planted 0.95 vs 0.35: OR 35
        # always tied (matched, identical content) or never (four profiles): nothing to estimate
        for kind in ("demographic_matched", "name_matched", "position_balanced"):
            assert np.isnan(rows[(probe, kind)]["odds_ratio"]), kind
        assert rows[(probe, "name_matched")]["tie_rate"] == 1.0
        assert rows[(probe, "name_matched")]["content"] == "identical"
        assert rows[(probe, "name_matched")]["demographic"] == "none"
    # without the planted link the same table finds none: every interval covers 1
    unlinked = recognition_ties_by_type(study(linked=False))
    para = unlinked.filter(pl.col("bundle_type") == "paraphrase_matched")
    assert (para["ci_low"] < 1.0).all() and (para["ci_high"] > 1.0).all()
    assert para["recognition_rate"].is_between(0.25, 0.45).all()


def test_without_text_rankings_the_rates_stand_and_the_association_is_empty() -> None:
    frames = study(linked=True)
    no_text = dataclasses.replace(frames, rankings=frames.rankings.filter(pl.col("mode") != "text"))
    table = recognition_ties_by_type(no_text)
    assert (table["n_pairs"] == 0).all() and table["odds_ratio"].is_nan().all()
    assert table["tie_rate"].is_not_nan().all() and table["recognition_rate"].is_not_nan().all()
    empty = dataclasses.replace(
        frames, rankings=frames.rankings.clear(), probes=frames.probes.clear()
    )
    assert recognition_ties_by_type(empty).schema == pl.Schema(BY_TYPE_SCHEMA)
    assert recognition_ties_by_type(empty).is_empty()


# --- position against demographics ----------------------------------------------------------
def test_one_fit_gives_both_effects_at_equal_design_precision() -> None:
    frames = study(linked=False)
    table = position_vs_demographics(frames)
    assert table.schema == pl.Schema(POSITION_VS_DEMOGRAPHICS_SCHEMA)
    assert set(table["model"]) == {"sim-a", "sim-b", "sim-c", "sim-d", "sim-e", "all"}
    assert set(table["contrast_id"]) == {"black_vs_white", "female_vs_male"}
    assert set(table["bundle_type"]) == {"position_balanced"} and set(table["label"]) == {LABEL}
    pooled = table.filter(pl.col("model") == "all")
    assert (pooled["n_clusters"] == 12).all() and (pooled["n_answers"] == 12 * 3 * 5 * 2).all()
    # the design alone gives both contrasts the same SE: two candidates against two
    assert np.allclose(table["design_se_ratio"], 1.0)
    for row in table.iter_rows(named=True):
        assert np.isfinite([row["position"], row["demographic"], row["difference_se"]]).all()
        signs = np.sign(row["position"]) * np.sign(row["demographic"])
        joint = (
            row["position_se"] ** 2
            + row["demographic_se"] ** 2
            - 2 * signs * row["correlation"] * row["position_se"] * row["demographic_se"]
        )
        assert row["difference"] == pytest.approx(abs(row["position"]) - abs(row["demographic"]))
        assert row["difference_se"] == pytest.approx(np.sqrt(joint), rel=1e-6)
        assert row["se_independent"] == pytest.approx(
            np.hypot(row["position_se"], row["demographic_se"])
        )
        assert row["difference_sd"] == pytest.approx(row["difference"] / row["outcome_sd"])
        assert row["ci_low"] < row["difference"] < row["ci_high"]
    # the disguised bundles' race contrast is one candidate against one: sqrt(2 / (4/3))
    # times the first-listed gain's SE; gender (two against two) sqrt(3/4) times
    old = position_vs_demographics(
        frames, bundle_types=("disguised_demographic",), position="first_vs_rest"
    )
    ratio = dict(zip(old["contrast_id"], old["design_se_ratio"], strict=True))
    assert ratio["black_vs_white"] == pytest.approx(np.sqrt(1.5), rel=1e-6)
    assert ratio["female_vs_male"] == pytest.approx(np.sqrt(0.75), rel=1e-6)


def test_position_fit_edge_cases() -> None:
    frames = study(linked=False)
    # always tied: every answer scores 2.5 a candidate, nothing to fit
    tied = position_vs_demographics(frames, bundle_types=("name_matched",))
    assert tied.height == 12 and tied["position"].is_nan().all()
    # one gender per paraphrase-matched bundle: no within-bundle gender contrast
    one_gender = position_vs_demographics(frames, bundle_types=("paraphrase_matched",))
    by = {c: g for (c,), g in one_gender.group_by("contrast_id")}
    assert by["female_vs_male"]["demographic"].is_nan().all()
    assert by["black_vs_white"]["design_se_ratio"].to_numpy() == pytest.approx(np.sqrt(2))
    empty = dataclasses.replace(frames, rankings=frames.rankings.clear())
    assert position_vs_demographics(empty).is_empty()
    with pytest.raises(InputError, match="position contrast"):
        position_vs_demographics(frames, position="last")
    with pytest.raises(InputError, match="position covariance"):
        position_vs_demographics(frames, cov="hc3")


# --- the simulation study --------------------------------------------------------------------
GAIN, RACE = 0.6, 0.2  # first-listed gain (half-of-list contrast 0.3) and Black vs White
STUDY_DESIGN = {
    "domains": ["hiring"],
    "paraphrases": 1,
    "tasks": RANKS,
    "bundles_per_type": {"position_balanced": 48, "disguised_demographic": 48},
}
#: (bundle type, position contrast) of each fit, and its true position contrast.
FITS = {
    ("position_balanced", "first_half_vs_second_half"): GAIN / 2,
    ("disguised_demographic", "first_vs_rest"): GAIN,
}


def _without_position_terms(frames: AnalysisFrames) -> dict[str, float]:
    """The deliberately wrong fit: the half-of-list column alone, without the two position
    columns beside it, so the first-position gain stays in the residuals, where the race
    contrast (whose Black candidate is first in half the bundles) picks it up."""
    sample = complete_rankings(frames.rankings.filter(pl.col("bundle_type") == "position_balanced"))
    half = sample["position"].is_in([1, 2]).cast(pl.Float64).to_numpy()
    result = points_fit(sample, {"first_half": half}, pooled=True, cr2=True)
    assert result is not None
    k = result.names.index("race[Black]")
    c = np.zeros(len(result.names))
    c[1], c[k] = 1.0, -1.0
    test = result.robust.test(c)
    low, high = test.conf_int()
    se = result.robust.se_cr2
    return {
        "position": result.fit.coef[1],
        "demographic": result.fit.coef[k],
        "position_se": se[1],
        "demographic_se": se[k],
        "se_ratio": se[k] / se[1],
        "design_se_ratio": 1.0,
        "correlation": result.robust.cov_cr2[1, k] / (se[1] * se[k]),
        "ci_low": low,
        "ci_high": high,
    }


def simulation_study(n: int) -> dict[str, dict[str, float]]:
    """``n`` studies, each a fresh randomisation of the design (its seed) and of the answers,
    planted GAIN at the first position and RACE for Black names; per fit the mean SEs, the
    spread of the estimates and the coverage of the difference's 95% interval."""
    settings = SimulationSettings(
        design=STUDY_DESIGN,
        planted={("hiring", "rank", "black_vs_white"): RACE},
        position_gain={"position_balanced": GAIN, "disguised_demographic": GAIN},
    )
    rows = build_design(settings).arms[0].rankings
    settings = dataclasses.replace(settings, rank_lapse=rank_lapse_needed(settings, rows))
    found: dict[str, list[dict[str, float]]] = {"balanced": [], "disguised": [], "wrong": []}
    for seed in range(n):
        design = {**STUDY_DESIGN, "seed": seed}
        frames = simulate(dataclasses.replace(settings, design=design), seed)
        for name, (kind, position) in zip(("balanced", "disguised"), FITS, strict=True):
            table = position_vs_demographics(
                frames, bundle_types=(kind,), position=position, per_model=False
            )
            found[name].append(
                table.filter(pl.col("contrast_id") == "black_vs_white").row(0, named=True)
            )
        found["wrong"].append(_without_position_terms(frames))
    summary = {}
    truths = {"balanced": GAIN / 2, "disguised": GAIN, "wrong": GAIN / 2}
    for name, records in found.items():
        rows = pl.DataFrame(records).select(
            "position", "demographic", "position_se", "demographic_se", "se_ratio",
            "design_se_ratio", "correlation", "ci_low", "ci_high",
        )  # fmt: skip
        truth = truths[name] - RACE
        covered = (rows["ci_low"] <= truth) & (truth <= rows["ci_high"])
        summary[name] = {
            "se_position": rows["position_se"].mean(),
            "se_race": rows["demographic_se"].mean(),
            "se_ratio": rows["se_ratio"].mean(),
            "design_se_ratio": rows["design_se_ratio"].mean(),
            "sd_position": rows["position"].std(),
            "sd_race": rows["demographic"].std(),
            "position": rows["position"].mean(),
            "race": rows["demographic"].mean(),
            "coverage": covered.mean(),
            "correlation": rows["correlation"].mean(),
        }
    return summary


def _unequal(r: dict[str, float]) -> list[str]:
    """The precision checks a fit fails over 30 studies, each at 3 of its SDs: the SE ratio's
    mean (an SD of 0.18 a study: 0.033), an SD's relative error (1 / sqrt(2 x 29) = 0.13; the
    log of a ratio of two: 0.19, so 0.57 to 1.75), the coverage (a binomial SD of 0.04: at
    least 0.83, 25 of 30; no upper bound, 30 of 30 being likely)."""
    checks = {
        "se_ratio": 0.9 <= r["se_ratio"] <= 1.1,
        "sd_ratio": 0.57 <= r["sd_race"] / r["sd_position"] <= 1.75,
        "se_position": 0.6 <= r["se_position"] / r["sd_position"] <= 1.4,
        "se_race": 0.6 <= r["se_race"] / r["sd_race"] <= 1.4,
        "coverage": r["coverage"] >= 0.83,
        "correlation": abs(r["correlation"]) < 0.1,  # orthogonal by construction
    }
    return [name for name, passed in checks.items() if not passed]


@pytest.mark.slow
def test_equal_precision_and_coverage_over_30_simulated_studies() -> None:
    """Position-balanced bundles: both effects recovered, their SEs equal (by the fit and by
    the spread of the estimates), the two uncorrelated and the difference's interval covering
    the truth at its nominal rate. The checks fail where they should: in the disguised bundles
    the race contrast is markedly less precise than the first-listed gain, and a fit that
    leaves the first-position gain in the residuals inflates the race SE (ratio about 1.4)."""
    result = simulation_study(30)
    good = result["balanced"]
    # the means of 30 estimates with an SD of 0.04: 3 SEs are 0.023
    assert good["position"] == pytest.approx(GAIN / 2, abs=0.025)
    assert good["race"] == pytest.approx(RACE, abs=0.025)
    assert good["design_se_ratio"] == pytest.approx(1.0)
    assert not _unequal(good), (good, _unequal(good))
    old = result["disguised"]
    assert old["design_se_ratio"] == pytest.approx(np.sqrt(1.5))
    assert old["se_ratio"] > 1.1 and old["sd_race"] / old["sd_position"] > 1.07, old
    assert "se_ratio" in _unequal(old)
    wrong = result["wrong"]
    assert wrong["se_ratio"] > 1.2 and wrong["se_race"] / good["sd_race"] > 1.25, wrong
    assert "se_ratio" in _unequal(wrong)
