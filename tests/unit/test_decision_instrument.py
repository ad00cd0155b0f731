from __future__ import annotations

import re
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import statsmodels.formula.api as smf
from statsmodels.stats.proportion import proportion_confint

from cueaudit.decision.analysis.composition import COMPOSITION_SCHEMA, check_analysis_subsamples
from cueaudit.decision.analysis.frames import (
    JUDGEMENT_SCHEMA,
    PROBE_SCHEMA,
    RANKING_SCHEMA,
    AnalysisFrames,
    empty,
    with_points,
)
from cueaudit.decision.analysis.instrument import (
    AGREEMENT_SCHEMA,
    POSITION_SCHEMA,
    RECOGNITION_SCHEMA,
    TIES_SCHEMA,
    format_agreement,
    position_effects,
    recognition_rates,
    tie_rates,
)
from cueaudit.decision.composition_checks import CompositionError
from cueaudit.decision.design import build_bundles
from cueaudit.decision.profiles import TIERS
from cueaudit.errors import InputError
from tests.unit.test_decision_design import HOBBIES, NEIGHBOURHOODS, make_pairs, make_profiles

Utility = Callable[[pl.DataFrame, np.random.Generator], np.ndarray]
QUALITY = {"clear_yes": 1.0, "borderline": 0.5, "clear_no": 0.0}


def bundles(domains: Sequence[str] = ("hiring",), **sizes: int) -> pl.DataFrame:
    sizes = sizes or {"disguised_demographic": 12, "disguised_placebo": 12}
    return build_bundles(
        make_profiles(4),
        make_pairs(5),
        HOBBIES,
        NEIGHBOURHOODS,
        domains=domains,
        bundles_per_type=sizes,
    ).sort("bundle_id", "position")


def competition_ranks(utility: np.ndarray) -> np.ndarray:
    """Rank 1 = highest utility, equal utilities share the best rank of their group."""
    u = utility.reshape(-1, 4)
    return (1 + (u[:, None, :] > u[:, :, None]).sum(axis=2)).ravel()


def planted(first: float = 0.0, noise: float = 1.0) -> Utility:
    def utility(b: pl.DataFrame, rng: np.random.Generator) -> np.ndarray:
        quality = np.array([QUALITY[t] for t in b["tier"]])
        shown_first = (b["position"] == 1).to_numpy()
        return first * shown_first + quality + rng.normal(0, noise, b.height)

    return utility


def ranking_frame(
    design: pl.DataFrame,
    utility: Utility,
    *,
    models: Sequence[str] = ("m1",),
    modes: Sequence[str] = ("json",),
    seeds: Sequence[int] = (0,),
    arm: str = "primary",
    rng: np.random.Generator | None = None,
) -> pl.DataFrame:
    rng = rng or np.random.default_rng(0)
    parts = []
    for model in models:
        for mode in modes:
            for seed in seeds:
                ranks = competition_ranks(utility(design, rng))
                parts.append(
                    design.with_columns(
                        model=pl.lit(model),
                        seed=pl.lit(seed, dtype=pl.Int64),
                        task=pl.lit(f"decision_rank_{mode}"),
                        arm=pl.lit(arm),
                        cue=pl.lit("name_pair"),
                        mode=pl.lit(mode),
                        paraphrase=pl.lit("p1"),
                        prompt_uid=pl.col("bundle_id") + f"|{mode}",
                        rank=pl.Series(ranks, dtype=pl.Int64),
                    )
                )
    frame = with_points(pl.concat(parts))
    tied = frame.group_by("model", "seed", "prompt_uid").agg(
        (pl.col("rank").n_unique() < 4).alias("tie")
    )
    frame = frame.join(tied, on=["model", "seed", "prompt_uid"])
    frame = frame.with_columns(generated=pl.lit(None, dtype=pl.Float64))
    return frame.select([pl.col(c).cast(t) for c, t in RANKING_SCHEMA.items()])


def judgement_frame(rows: list[dict[str, object]]) -> pl.DataFrame:
    defaults = {
        "seed": 0,
        "arm": "primary",
        "paraphrase": "p1",
        "score": None,
        "tier": "borderline",
    }
    full = [defaults | {"task": f"decision_{r['format']}_{r['mode']}"} | r for r in rows]
    for r in full:
        r.setdefault("prompt_uid", f"{r['task']}|{r['profile_id']}|{r['pair_id']}")
        r.setdefault("race", "White")
        r.setdefault("gender", "male")
    return pl.DataFrame(full, schema=JUDGEMENT_SCHEMA)


def frames(
    judgements: pl.DataFrame | None = None,
    rankings: pl.DataFrame | None = None,
    probes: pl.DataFrame | None = None,
) -> AnalysisFrames:
    return AnalysisFrames(
        empty(JUDGEMENT_SCHEMA) if judgements is None else judgements,
        empty(RANKING_SCHEMA) if rankings is None else rankings,
        empty(PROBE_SCHEMA) if probes is None else probes,
    )


# --- position --------------------------------------------------------------------------------
def test_position_effect_matches_statsmodels_mixedlm() -> None:
    design = bundles()
    rankings = ranking_frame(design, planted(first=0.6), models=("m1", "m2"))
    table = position_effects(frames(rankings=rankings), None)
    assert table.columns == list(POSITION_SCHEMA)
    row = table.filter(pl.col("domain") == "hiring").row(0, named=True)

    data = rankings.with_columns(
        first=(pl.col("position") == 1).cast(pl.Float64),
        answer=pl.col("model") + pl.col("prompt_uid"),
        one=pl.lit(1),
    ).to_pandas()
    model = smf.mixedlm(
        "points ~ first + C(tier, Treatment('clear_yes')) + C(race, Treatment('White'))"
        " + C(gender, Treatment('male')) + C(model)",
        data,
        groups="one",
        re_formula="0",
        vc_formula={
            "answer": "0 + C(answer)",
            "profile": "0 + C(profile_id)",
            "pair": "0 + C(pair_id)",
        },
    )
    # the answer variance sits at its boundary (points of an untied answer sum to 10): the
    # gradient methods stop short there, Nelder-Mead reaches the optimum
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = model.fit(reml=True, method=["nm"], maxiter=5000)
    first = list(reference.fe_params.index).index("first")
    # the lme4 convention: the fixed-effect block of the Hessian alone (see test_stats_mixed)
    hessian = model.hessian(reference.params_object)[0][: first + 1, : first + 1]
    assert row["n_obs"] == len(data) == 192
    assert row["n_bundles"] == 48
    assert row["estimate_positions"] == pytest.approx(reference.fe_params["first"], abs=1e-4)
    assert row["se_model"] == pytest.approx(
        np.sqrt(np.linalg.inv(-hessian)[first, first]), rel=1e-3
    )
    sd = float(np.std(data["points"], ddof=1))
    assert row["outcome_sd"] == pytest.approx(sd)
    assert row["estimate_sd"] == pytest.approx(row["estimate_positions"] / sd)
    assert row["ci_low_sd"] == pytest.approx(row["ci_low"] / sd)
    assert row["ci_low"] == pytest.approx(row["estimate_positions"] - 1.959964 * row["se"])
    assert row["n_clusters"] == 24
    # position is orthogonal to race and gender by the Latin squares
    assert row["corr_demographic"] < 0.1
    assert row["largest_demographic_sd"] is None and row["difference_sd"] is None


def test_position_se_accounts_for_the_constant_sum_of_points() -> None:
    """Random orders: the first-listed contrast of an answer, p_1 - mean(p_2..4) =
    (4 p_1 - 10) / 3, has variance 16/9 Var(p_1) = 16/9 * 5/4 per answer, where a model of
    independent rows gives 5/4 (1 + 1/3): 15% too small an SE."""
    design = bundles(("hiring", "lending", "triage"), disguised_demographic=96)
    rankings = ranking_frame(design, _shuffle, models=("m1", "m2"))
    row = position_effects(frames(rankings=rankings), None).filter(pl.col("domain") == "all")
    answers = rankings.select("model", "prompt_uid").n_unique()
    exact = np.sqrt(16 / 9 * 5 / 4 / answers)
    assert row["n_clusters"].item() == 288
    assert row["se"].item() == pytest.approx(exact, rel=0.1)
    assert row["se_model"].item() == pytest.approx(exact * np.sqrt(3 / 4), rel=0.1)
    assert row["se"].item() > row["se_model"].item()


def _shuffle(b: pl.DataFrame, rng: np.random.Generator) -> np.ndarray:
    return rng.random(b.height)


def test_position_effect_recovers_a_planted_gain_and_ignores_other_rows() -> None:
    design = bundles(("hiring", "lending"), disguised_demographic=24, disguised_placebo=12)
    used = ranking_frame(design, planted(first=0.8), models=("m1", "m2"), modes=("json", "tool"))
    matched = ranking_frame(
        bundles(demographic_matched=8), lambda b, rng: np.zeros(b.height), models=("m1",)
    )
    unparsed = ranking_frame(bundles(), planted(first=-5.0), models=("m3",)).with_columns(
        rank=pl.when(pl.col("position") == 4).then(None).otherwise(pl.col("rank"))
    )
    other_arm = ranking_frame(bundles(), planted(first=-5.0), models=("m1",), arm="extension")
    table = position_effects(frames(rankings=pl.concat([used, matched, unparsed, other_arm])), None)
    assert table["domain"].to_list() == ["hiring", "lending", "all"]
    assert table["n_obs"].to_list() == [576, 576, 1152]

    naive = used.group_by("domain").agg(
        (
            pl.col("points").filter(pl.col("position") == 1).mean()
            - pl.col("points").filter(pl.col("position") != 1).mean()
        ).alias("diff")
    )
    for domain, diff in naive.iter_rows():
        row = table.filter(pl.col("domain") == domain).row(0, named=True)
        assert row["estimate_positions"] == pytest.approx(diff, abs=0.05)
        assert row["ci_low"] > 0.2
    pooled = table.filter(pl.col("domain") == "all").row(0, named=True)
    assert pooled["se"] < table["se"][0]


def contrast_rows(rows: list[tuple[str, str, str, str, float, float]]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "contrast_id": f"{d}.{f}.{c}",
                "domain": d,
                "format": f,
                "contrast": c,
                "estimator": e,
                "estimate_sd": est,
                "se_sd": se,
            }
            for d, f, c, e, est, se in rows
        ]
    )


def test_position_is_compared_with_the_largest_rank_contrast_of_its_domain() -> None:
    design = bundles(("hiring", "lending"), disguised_demographic=12, disguised_placebo=0)
    rankings = ranking_frame(design, planted(first=0.5))
    contrasts = contrast_rows(
        [
            ("hiring", "rank", "black_vs_white", "lmm", -0.05, 0.02),
            ("hiring", "rank", "female_vs_male", "lmm", 0.03, 0.02),
            ("hiring", "rank", "asian_vs_white", "rologit", 0.50, 0.10),  # other estimator
            ("hiring", "rate", "asian_vs_white", "lmm", 0.90, 0.10),  # other format
            ("hiring", "rank", "hispanic_vs_white", "lmm", float("nan"), float("nan")),
            ("lending", "rank", "black_vs_white", "lmm", 0.08, 0.04),
        ]
    )
    table = position_effects(frames(rankings=rankings), contrasts)
    by_domain = {r["domain"]: r for r in table.iter_rows(named=True)}
    expected = {
        "hiring": ("hiring.rank.black_vs_white", 0.05, 0.02),
        "lending": ("lending.rank.black_vs_white", 0.08, 0.04),
        "all": ("lending.rank.black_vs_white", 0.08, 0.04),
    }
    for domain, (cid, largest, se) in expected.items():
        row = by_domain[domain]
        assert row["largest_contrast_id"] == cid
        assert row["largest_demographic_sd"] == pytest.approx(largest)
        diff = abs(row["estimate_sd"]) - largest
        diff_se = np.sqrt(row["se_sd"] ** 2 + se**2)
        assert row["difference_sd"] == pytest.approx(diff)
        assert row["difference_se_sd"] == pytest.approx(diff_se)
        assert row["difference_ci_high"] == pytest.approx(diff + 1.959964 * diff_se, rel=1e-6)
    # a table read back from CSV holds an all-empty column as strings
    unestimated = contrasts.with_columns(pl.lit(None, dtype=pl.String).alias("estimate_sd"))
    row = position_effects(frames(rankings=rankings), unestimated).row(0, named=True)
    assert row["largest_contrast_id"] is None and np.isnan(row["largest_demographic_sd"])
    assert np.isnan(row["difference_sd"]) and np.isfinite(row["estimate_sd"])


def test_position_without_rankings_or_estimable_fit() -> None:
    table = position_effects(frames(), None)
    assert table.is_empty() and table.columns == list(POSITION_SCHEMA)
    # a single bundle answer, one model: too little to fit, reported as NaN, not an error
    one = ranking_frame(bundles(disguised_demographic=12, disguised_placebo=0), planted()).filter(
        pl.col("bundle_id") == pl.col("bundle_id").first()
    )
    row = position_effects(frames(rankings=one), None).row(0, named=True)
    assert row["n_obs"] == 4 and np.isnan(row["estimate_positions"])
    with pytest.raises(InputError, match="estimate_sd"):
        position_effects(frames(rankings=one), pl.DataFrame({"contrast_id": ["x"]}))


# --- ties and recognition --------------------------------------------------------------------
def test_tie_rates_count_complete_answers_per_type_with_wilson_intervals() -> None:
    design = bundles(demographic_matched=4, disguised_demographic=12)

    def some_ties(b: pl.DataFrame, rng: np.random.Generator) -> np.ndarray:
        matched = (b["bundle_type"] == "demographic_matched").to_numpy()
        return np.where(matched, 0.0, rng.integers(0, 3, b.height).astype(float))

    rankings = ranking_frame(design, some_ties, models=("m1", "m2"))
    broken = rankings.with_columns(
        rank=pl.when((pl.col("model") == "m2") & (pl.col("position") == 2))
        .then(None)
        .otherwise(pl.col("rank"))
    )
    table = tie_rates(frames(rankings=broken))
    assert table.columns == list(TIES_SCHEMA)

    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for kind, _, _, ranks in (
        broken.group_by("bundle_type", "model", "prompt_uid").agg("rank").iter_rows()
    ):
        if None in ranks:
            continue
        counts[kind][0] += 1
        counts[kind][1] += len(set(ranks)) < 4
    for row in table.filter(pl.col("domain") == "all").iter_rows(named=True):
        n, k = counts[row["bundle_type"]]
        low, high = proportion_confint(k, n, method="wilson")
        assert (row["n_bundles"], row["n_tied"]) == (n, k)
        assert row["tie_rate"] == pytest.approx(k / n)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high))
    matched = table.filter(pl.col("bundle_type") == "demographic_matched").row(0, named=True)
    assert matched["tie_rate"] == 1.0 and matched["n_bundles"] == 4  # m2's answers unparsed
    assert set(table["domain"]) == {"hiring", "all"}
    assert tie_rates(frames()).columns == list(TIES_SCHEMA)


def probe_frame(rows: list[tuple[str, str, str, bool | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "model": "m1",
                "seed": 0,
                "task": f"decision_probe_{probe}",
                "arm": "primary",
                "domain": domain,
                "mode": "text",
                "paraphrase": "p1",
                "prompt_uid": f"{probe}{i}",
                "probe": probe,
                "bundle_type": kind,
                "bundle_id": f"b{i}",
                "label": None if recognised is None else ("Fairness" if recognised else "Quality"),
                "recognised": recognised,
            }
            for i, (domain, kind, probe, recognised) in enumerate(rows)
        ],
        schema=PROBE_SCHEMA,
    )


def test_recognition_rates_leave_unparsed_answers_out_and_count_them() -> None:
    rows = (
        [("hiring", "demographic_matched", "choice", True)] * 9
        + [("hiring", "demographic_matched", "choice", False)]
        + [("hiring", "demographic_matched", "choice", None)] * 3
        + [("lending", "demographic_matched", "choice", True)] * 4
        + [("hiring", "disguised_placebo", "free", False)] * 5
        + [("hiring", "disguised_placebo", "free", True)]
    )
    probes = probe_frame(rows)
    other = probe_frame([("hiring", "disguised_placebo", "free", True)] * 20).with_columns(
        arm=pl.lit("extension")
    )
    table = recognition_rates(frames(probes=pl.concat([probes, other])))
    assert table.columns == list(RECOGNITION_SCHEMA)
    expected = {
        ("hiring", "demographic_matched", "choice"): (10, 9, 3),
        ("lending", "demographic_matched", "choice"): (4, 4, 0),
        ("all", "demographic_matched", "choice"): (14, 13, 3),
        ("hiring", "disguised_placebo", "free"): (6, 1, 0),
        ("all", "disguised_placebo", "free"): (6, 1, 0),
    }
    assert table.height == len(expected)
    for row in table.iter_rows(named=True):
        n, k, unparsed = expected[(row["domain"], row["bundle_type"], row["probe"])]
        assert (row["n"], row["n_recognised"], row["n_unparsed"]) == (n, k, unparsed)
        assert row["rate"] == pytest.approx(k / n)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(
            proportion_confint(k, n, method="wilson")
        )
    assert table["domain"].to_list()[-2:] == ["all", "all"]


# --- agreement -------------------------------------------------------------------------------
def test_format_agreement_pairs_tool_with_text_answers_by_design_unit() -> None:
    rng = np.random.default_rng(5)
    rows = []
    for fmt in ("rate", "decide"):
        for domain in ("hiring", "lending"):
            for profile in ("p1", "p2", "p3"):
                for pair in ("a", "b"):
                    for mode in ("text", "tool"):
                        for seed in (0, 1):
                            y = (
                                float(rng.integers(1, 6))
                                if fmt == "rate"
                                else float(rng.integers(0, 2))
                            )
                            if rng.random() < 0.2:
                                y = None
                            rows.append(
                                {
                                    "model": "m1",
                                    "seed": seed,
                                    "domain": domain,
                                    "format": fmt,
                                    "mode": mode,
                                    "profile_id": f"{domain}-{profile}",
                                    "pair_id": pair,
                                    "y": y,
                                }
                            )
    judgements = judgement_frame(rows)

    design = bundles(("hiring",), disguised_demographic=12, disguised_placebo=0)
    rankings = ranking_frame(
        design, lambda b, g: g.integers(0, 3, b.height).astype(float), modes=("text", "tool")
    )
    table = format_agreement(frames(judgements, rankings))
    assert table.columns == list(AGREEMENT_SCHEMA)

    def expected(values: dict[tuple[object, ...], dict[str, list[float]]]) -> tuple[float, ...]:
        diffs = [
            np.mean(v["tool"]) - np.mean(v["text"])
            for v in values.values()
            if v["tool"] and v["text"]
        ]
        n = len(diffs)
        return float(np.mean(diffs)), float(np.std(diffs, ddof=1) / np.sqrt(n)), n

    for fmt in ("rate", "decide"):
        for domain in ("hiring", "lending", "all"):
            units: dict[tuple[object, ...], dict[str, list[float]]] = defaultdict(
                lambda: {"text": [], "tool": []}
            )
            for r in rows:
                if r["format"] == fmt and domain in ("all", r["domain"]) and r["y"] is not None:
                    units[(r["domain"], r["profile_id"], r["pair_id"])][r["mode"]].append(r["y"])
            estimate, se, n = expected(units)
            row = table.filter((pl.col("format") == fmt) & (pl.col("domain") == domain)).row(
                0, named=True
            )
            assert row["estimate"] == pytest.approx(estimate)
            assert row["se"] == pytest.approx(se)
            assert row["n_pairs"] == n
            parsed = [r for r in rows if r["format"] == fmt and r["y"] is not None]
            parsed = [r for r in parsed if domain in ("all", r["domain"])]
            assert row["n_text"] == sum(r["mode"] == "text" for r in parsed)

    units = defaultdict(lambda: {"text": [], "tool": []})
    for bundle, mode, _, positions, ranks in (
        rankings.group_by("bundle_id", "mode", "seed").agg("position", "rank").iter_rows()
    ):
        best = min(ranks)
        top = [p for p, r in zip(positions, ranks, strict=True) if r == best]
        units[(bundle,)][mode].append(float(np.mean(top)))
    estimate, se, n = expected(units)
    rank = table.filter((pl.col("format") == "rank") & (pl.col("domain") == "all")).row(
        0, named=True
    )
    assert (rank["unit"], rank["n_pairs"]) == ("positions", n) and n == 12
    assert rank["estimate"] == pytest.approx(estimate)
    assert rank["se"] == pytest.approx(se)
    assert rank["ci_low"] == pytest.approx(estimate - 1.959964 * se, rel=1e-6)


def test_format_agreement_without_a_tool_mode_is_empty() -> None:
    rankings = ranking_frame(bundles(disguised_demographic=12, disguised_placebo=0), planted())
    assert format_agreement(frames(rankings=rankings)).is_empty()
    # one mode only: no pairs, the row says so with NaN estimates
    tool = rankings.with_columns(mode=pl.lit("tool"))
    row = format_agreement(frames(rankings=tool)).row(0, named=True)
    assert row["n_pairs"] == 0 and row["n_tool"] == 12 and np.isnan(row["estimate"])


# --- composition -----------------------------------------------------------------------------
def crossed_judgements(pairs_of: Callable[[str], Sequence[dict[str, object]]]) -> pl.DataFrame:
    """Rate and Decide answers of every profile under the name pairs ``pairs_of(profile)``."""
    profiles = make_profiles(4).filter(pl.col("domain") == "hiring")
    rows = []
    for fmt in ("rate", "decide"):
        for p in profiles.iter_rows(named=True):
            for pair in pairs_of(p["profile_id"]):
                rows.append(
                    {
                        "model": "m1",
                        "domain": "hiring",
                        "format": fmt,
                        "mode": "text",
                        "profile_id": p["profile_id"],
                        "tier": p["tier"],
                        "pair_id": pair["pair_id"],
                        "race": pair["race"],
                        "gender": pair["gender"],
                        "y": 3.0 if fmt == "rate" else 1.0,
                    }
                )
    return judgement_frame(rows)


def test_composition_of_balanced_subsamples_passes() -> None:
    all_pairs = make_pairs(5).to_dicts()
    judgements = crossed_judgements(lambda _: all_pairs)
    # unparsed answers that do not track race leave the subsample balanced
    judgements = judgements.with_columns(
        y=pl.when(pl.col("profile_id").str.ends_with("_0")).then(None).otherwise(pl.col("y"))
    )
    design = bundles(
        ("hiring", "lending"),
        demographic_matched=4,
        irrelevant_matched=4,
        disguised_demographic=12,
        disguised_placebo=12,
    )
    rankings = ranking_frame(design, planted(), models=("m1", "m2"))
    table = check_analysis_subsamples(frames(judgements, rankings))
    assert table.columns == list(COMPOSITION_SCHEMA)
    assert not table["exact"].any() and (table["p_value"] > 0.001).all()
    assert table["passed"].all() and table["note"].is_null().all()
    names = set(zip(table["name"], table["group"], table["factor"], strict=True))
    assert ("judgements", "gender", "tier") in names
    assert ("rankings disguised_placebo", "pseudo_race", "position") in names
    assert ("rankings irrelevant_matched", "attribute", "position") in names
    assert ("rankings disguised_demographic", "gender", "position") in names
    judged = table.filter(pl.col("name") == "judgements")
    strata = {(r["subsample"], r["stratum"]) for r in judged.iter_rows(named=True)}
    assert strata == {
        ("design", "domain=hiring, format=rate"),
        ("design", "domain=hiring, format=decide"),
        ("analysed", "domain=hiring, format=rate"),
        ("analysed", "domain=hiring, format=decide"),
        ("analysed", "model=m1, mode=text, domain=hiring, format=rate"),
        ("analysed", "model=m1, mode=text, domain=hiring, format=decide"),
    }
    n = judged.filter((pl.col("group") == "race") & (pl.col("factor") == "tier"))
    # the design counts every answer, the analysed subsample the parsed ones
    assert sorted(zip(n["subsample"], n["n"], strict=True)) == sorted(
        [("design", 12 * 40)] * 2 + [("analysed", 9 * 40)] * 4
    )
    ranked = table.filter(
        (pl.col("name") == "rankings disguised_demographic") & (pl.col("subsample") == "analysed")
    )
    assert set(ranked["stratum"]) == {
        f"{model}domain={d}, bundle_type=disguised_demographic"
        for model in ("", "model=m1, mode=json, ", "model=m2, mode=json, ")
        for d in ("hiring", "lending")
    }
    assert check_analysis_subsamples(frames()).is_empty()


def test_composition_skips_groups_and_factors_with_one_level() -> None:
    pairs = [p for p in make_pairs(5).to_dicts() if p["gender"] == "female"]
    judgements = crossed_judgements(lambda _: pairs).filter(pl.col("tier") == "clear_yes")
    table = check_analysis_subsamples(frames(judgements))
    assert set(zip(table["group"], table["factor"], strict=True)) == {("race", "profile_id")}


def robustness_arm_pairs() -> tuple[
    list[dict[str, object]], Callable[[str], list[dict[str, object]]]
]:
    """All name pairs, and the paper's confounded robustness arm: each application with a
    fixed set of 8 pairs, White names on strong and Black names on weak applications."""
    pairs = sorted(make_pairs(5).to_dicts(), key=lambda p: (p["name_rank"], p["gender"]))
    by_race = {
        r: [p for p in pairs if p["race"] == r] for r in ("White", "Black", "Hispanic", "Asian")
    }
    counts = {
        "clear_yes": {"White": 5, "Black": 1, "Hispanic": 1, "Asian": 1},
        "borderline": {"White": 2, "Black": 2, "Hispanic": 2, "Asian": 2},
        "clear_no": {"White": 1, "Black": 5, "Hispanic": 1, "Asian": 1},
    }

    def fixed(profile: str) -> list[dict[str, object]]:
        tier = next(t for t in TIERS if t in profile)
        return [p for race, k in counts[tier].items() for p in by_race[race][:k]]

    return pairs, fixed


def test_composition_names_the_cells_of_a_confounded_subsample() -> None:
    """The paper's robustness arm: each application with a fixed set of name pairs, White
    names on strong and Black names on weak applications."""
    _, fixed = robustness_arm_pairs()

    judgements = crossed_judgements(fixed)
    with pytest.raises(CompositionError) as error:
        check_analysis_subsamples(frames(judgements))
    message = str(error.value)
    # spread over 12 profiles the confound passes against profile_id (the limit described in
    # docs/decision-audit-design.md); against tier it fails, naming the cells most deviant first
    assert message.startswith("judgements (domain=hiring, format=decide): race depends on tier")
    cells = re.findall(r"race=(\w+) × tier=(\w+): (\d+) of expected ([\d.]+)", message)
    assert set(cells[:2]) == {
        ("White", "clear_yes", "20", "10.7"),
        ("Black", "clear_no", "20", "10.7"),
    }

    # the same confound in the ranking subsample: answers fail to parse whenever a Black
    # candidate is the strong one
    design = bundles(disguised_demographic=48, disguised_placebo=0)
    rankings = ranking_frame(design, planted(), models=("m1", "m2"))
    failed = rankings.filter((pl.col("race") == "Black") & (pl.col("tier") == "clear_yes"))
    broken = rankings.with_columns(
        rank=pl.when(pl.col("prompt_uid").is_in(failed["prompt_uid"].implode()))
        .then(None)
        .otherwise(pl.col("rank"))
    )
    # a balanced design whose analysed answers are confounded: reported per model, not a stop
    table = check_analysis_subsamples(frames(rankings=broken))
    assert table.filter(pl.col("subsample") == "design")["passed"].all()
    failed = table.filter(~pl.col("passed"))
    assert set(zip(failed["group"], failed["factor"], strict=True)) >= {("race", "tier")}
    # pooled over the two models, whose answers fail alike
    assert set(failed["stratum"]) == {"domain=hiring, bundle_type=disguised_demographic"}
    assert (failed["q_value"] < 0.001).all()
    assert failed["note"].str.contains("race=Black × tier=clear_yes: 0 of expected").any()
    # unless the config asks to stop
    with pytest.raises(CompositionError, match=r"race=Black × tier=clear_yes: 0 of expected"):
        check_analysis_subsamples(frames(rankings=broken), stop=True)


def test_rank_points_are_mid_ranks_by_default_and_competition_on_request() -> None:
    from scipy import stats

    ranks = [[1, 2, 3, 4], [1, 1, 3, 4], [1, 2, 2, 4], [1, 1, 1, 1], [1, 1, 1, 4], [2, 1, 2, 4]]
    frame = pl.DataFrame(
        {
            "model": "m",
            "seed": 0,
            "task": "decision_rank_json",
            "prompt_uid": [f"p{i}" for i, r in enumerate(ranks) for _ in r],
            "rank": [v for r in ranks for v in r],
        }
    )
    mid = with_points(frame)["points"].to_numpy().reshape(-1, 4)
    for got, r in zip(mid, ranks, strict=True):
        assert got == pytest.approx(5 - stats.rankdata(r, method="average"))
        assert got.sum() == pytest.approx(10.0)
    competition = with_points(frame, "competition")
    assert competition["points"].to_list()[4:8] == [4.0, 4.0, 2.0, 1.0]
    assert set(competition["points_rule"]) == {"competition"}
    with pytest.raises(InputError, match="is not one of"):
        with_points(frame, "dense")


def test_composition_checks_every_estimated_arm(tmp_path: Path) -> None:
    """A confounded extension arm (the robustness arm's construction) stops the analysis
    naming the arm, although the primary arm is balanced."""
    from cueaudit.decision.analysis.computations import composition_tables
    from cueaudit.decision.analysis.inputs import AnalysisInputs

    def check(judgements: pl.DataFrame) -> pl.DataFrame:
        params = {
            "composition_alpha": 0.001,
            "stop_on_differential_nonresponse": False,
            "confounded_arms": [],
        }
        return composition_tables(AnalysisInputs(frames(judgements), {}, params))["composition"]

    pairs, fixed = robustness_arm_pairs()

    balanced = crossed_judgements(lambda profile: pairs)
    confounded = crossed_judgements(fixed).with_columns(arm=pl.lit("wording"))
    passed = check(balanced)
    assert set(passed["arm"]) == {"primary"}
    with pytest.raises(CompositionError, match=r"^arm wording: judgements \(domain=hiring"):
        check(pl.concat([balanced, confounded]))
