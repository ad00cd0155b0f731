"""The decision audit's planned contrasts (CONTRASTS) and format interactions (INTERACTIONS)
against statsmodels MixedLM, an independent rank-ordered-logit fit, a Monte-Carlo check of the
positions conversion, statsmodels' BH and TOST by hand, on synthetic frames of the exact
schemas built below with numpy (Plackett-Luce rankings, crossed profile x name-pair
judgements)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.multitest import multipletests

from cueaudit.decision.analysis import fitters
from cueaudit.decision.analysis.contrasts import (
    CONTRASTS_SCHEMA,
    INTERACTIONS_SCHEMA,
    estimate_contrasts,
    estimate_interactions,
    fit_cell,
)
from cueaudit.decision.analysis.design_matrix import CellDesign, ContrastSpec
from cueaudit.decision.analysis.fitters import FAMILY_ESTIMATOR, rank_difference
from cueaudit.decision.analysis.frames import SCHEMAS, AnalysisFrames, empty, with_points
from cueaudit.decision.analysis.verdicts import verdict
from cueaudit.decision.preregistration import Status, load_preregistration
from cueaudit.decision.profiles import TIERS
from cueaudit.stats.mixed import fit_crossed_lmm
from cueaudit.stats.multiplicity import mde
from cueaudit.stats.robust import cluster_robust
from cueaudit.stats.rologit import expected_rank_gain, expected_rank_gain_se, fit_rologit

ROOT = Path(__file__).resolve().parents[2]
PREREG = load_preregistration(ROOT / "config" / "decision" / "preregistration.yaml")
CONTRAST_COLUMNS = {
    "black_vs_white": "race_Black",
    "hispanic_vs_white": "race_Hispanic",
    "asian_vs_white": "race_Asian",
    "female_vs_male": "female",
}

RACES = ("Black", "White", "Hispanic", "Asian")
GENDERS = ("female", "male")


def pair_ids(pairs_per_cell: int) -> list[tuple[str, str, str]]:
    return [(f"{r}-{g}-{k}", r, g) for r in RACES for g in GENDERS for k in range(pairs_per_cell)]


def judgement_frame(
    rng: np.random.Generator,
    *,
    fmt: str = "rate",
    domains: Sequence[str] = ("hiring",),
    models: Sequence[str] = ("m1",),
    modes: Sequence[str] = ("text",),
    paraphrases: Sequence[str] = ("p1",),
    n_profiles: int = 6,
    pairs_per_cell: int = 2,
    effects: Mapping[str, float] | None = None,
    level_effects: Mapping[str | tuple[str, str], float] | None = None,
    sd_profile: float = 0.5,
    sd_pair: float = 0.2,
    sd_noise: float = 1.0,
    base: float = 3.0,
    arm: str = "primary",
) -> pl.DataFrame:
    """Every profile under every name pair, for every model, mode and paraphrase: ``y`` is
    ``base + effects[race] + effects[gender] + effects[model] + profile + pair + noise``
    (continuous for rate; for decide a yes with that probability, clipped to [0, 1]).
    ``level_effects`` shift the rows of one profile or pair id, or of a (profile, race)."""
    effects = dict(effects or {})
    level_effects = dict(level_effects or {})
    rows = []
    for domain in domains:
        profiles = [f"{domain}-p{i}" for i in range(n_profiles)]
        u_profile = dict(zip(profiles, rng.normal(0, sd_profile, n_profiles), strict=True))
        pairs = pair_ids(pairs_per_cell)
        u_pair = {p: rng.normal(0, sd_pair) for p, _, _ in pairs}
        for i, profile in enumerate(profiles):
            for pair, race, gender in pairs:
                for model in models:
                    for mode in modes:
                        for para in paraphrases:
                            mean = (
                                base
                                + effects.get(race, 0.0)
                                + effects.get(gender, 0.0)
                                + effects.get(model, 0.0)
                                + effects.get(mode, 0.0)
                                + u_profile[profile]
                                + u_pair[pair]
                                + level_effects.get(profile, 0.0)
                                + level_effects.get(pair, 0.0)
                                + level_effects.get((profile, race), 0.0)
                            )
                            if fmt == "decide":
                                y = float(rng.random() < min(max(mean, 0.0), 1.0))
                            else:
                                y = mean + rng.normal(0, sd_noise)
                            rows.append(
                                {
                                    "model": model,
                                    "seed": 0,
                                    "task": f"decision_{fmt}_{mode}",
                                    "arm": arm,
                                    "domain": domain,
                                    "mode": mode,
                                    "paraphrase": para,
                                    "prompt_uid": f"{domain}/{profile}/{pair}/{mode}/{para}",
                                    "format": fmt,
                                    "profile_id": profile,
                                    "tier": TIERS[i % 3],
                                    "pair_id": pair,
                                    "race": race,
                                    "gender": gender,
                                    "y": y,
                                    "score": None,
                                }
                            )
    return pl.DataFrame(rows, schema=SCHEMAS["judgements"])


def ranking_frame(
    rng: np.random.Generator,
    *,
    domains: Sequence[str] = ("hiring",),
    models: Sequence[str] = ("m1",),
    modes: Sequence[str] = ("json",),
    paraphrases: Sequence[str] = ("p1",),
    bundles: Mapping[str, int] | None = None,
    n_profiles: int = 12,
    pairs_per_cell: int = 5,
    worth: Mapping[str, float] | None = None,
    position_worth: Sequence[float] = (0.0, 0.0, 0.0, 0.0),
    tier_worth: Mapping[str, float] | None = None,
    matched_tie_rate: float = 0.0,
    genders: Sequence[str] = GENDERS,
    arm: str = "primary",
) -> pl.DataFrame:
    """Rankings drawn from Plackett-Luce (Gumbel utilities) with log-worth
    ``worth[race] + worth[gender] + worth[profile or pair id] + position_worth + tier_worth``.
    Matched bundles: one profile under four races of one gender; disguised: four profiles
    and four races, two of each gender. A matched answer is all tied with probability
    ``matched_tie_rate``."""
    bundles = dict(bundles or {"demographic_matched": 8, "disguised_demographic": 12})
    worth = dict(worth or {})
    tier_worth = dict(tier_worth or {"clear_yes": 1.0, "borderline": 0.0, "clear_no": -1.0})
    rows = []
    for domain in domains:
        profiles = [f"{domain}-p{i}" for i in range(n_profiles)]
        tier_of = {p: TIERS[i % 3] for i, p in enumerate(profiles)}
        pairs = pair_ids(pairs_per_cell)
        by_cell = {
            (r, g): [p for p, rr, gg in pairs if (rr, gg) == (r, g)] for r in RACES for g in GENDERS
        }
        for kind, count in bundles.items():
            for b in range(count):
                races = list(rng.permutation(RACES))
                if kind == "demographic_matched":
                    gender = genders[b % len(genders)]
                    profile = profiles[b % n_profiles]
                    cands = [(profile, r, gender) for r in races]
                else:
                    chosen = rng.choice(n_profiles, 4, replace=False)
                    gs = list(rng.permutation(["female", "female", "male", "male"]))
                    if len(genders) == 1:
                        gs = [genders[0]] * 4
                    cands = [(profiles[c], r, g) for c, r, g in zip(chosen, races, gs, strict=True)]
                cands = [(p, r, g, str(rng.choice(by_cell[(r, g)]))) for p, r, g in cands]
                bundle_id = f"{domain}/{kind}/r0/{b}"
                for model in models:
                    for mode in modes:
                        for para in paraphrases:
                            eta = np.array(
                                [
                                    worth.get(r, 0.0)
                                    + worth.get(g, 0.0)
                                    + worth.get(p, 0.0)
                                    + worth.get(pair, 0.0)
                                    + position_worth[k]
                                    + tier_worth[tier_of[p]]
                                    for k, (p, r, g, pair) in enumerate(cands)
                                ]
                            )
                            util = eta + rng.gumbel(size=4)
                            rank = np.empty(4, dtype=np.int64)
                            rank[np.argsort(-util)] = np.arange(1, 5)
                            tie = kind == "demographic_matched" and rng.random() < matched_tie_rate
                            if tie:
                                rank[:] = 1
                            for k, (p, r, g, pair) in enumerate(cands):
                                rows.append(
                                    {
                                        "model": model,
                                        "seed": 0,
                                        "task": f"decision_rank_{mode}",
                                        "arm": arm,
                                        "domain": domain,
                                        "mode": mode,
                                        "paraphrase": para,
                                        "prompt_uid": f"{bundle_id}/{mode}/{para}",
                                        "bundle_type": kind,
                                        "bundle_id": bundle_id,
                                        "position": k + 1,
                                        "profile_id": p,
                                        "tier": tier_of[p],
                                        "pair_id": pair,
                                        "race": r,
                                        "gender": g,
                                        "pseudo_race": None,
                                        "attribute": None,
                                        "rank": int(rank[k]),
                                        "tie": bool(tie),
                                    }
                                )
    frame = pl.DataFrame(rows, schema=SCHEMAS["rankings"])
    return with_points(frame).select(list(SCHEMAS["rankings"]))


def make_frames(
    judgements: Sequence[pl.DataFrame] = (), rankings: Sequence[pl.DataFrame] = ()
) -> AnalysisFrames:
    j = pl.concat(judgements) if judgements else empty(SCHEMAS["judgements"])
    r = pl.concat(rankings) if rankings else empty(SCHEMAS["rankings"])
    return AnalysisFrames(j, r, empty(SCHEMAS["probes"]))


def _dummy_frame(rows: pl.DataFrame, outcome: str) -> pd.DataFrame:
    """The regressors the test writes out by hand for statsmodels."""
    frame = pd.DataFrame({"y": rows[outcome].to_numpy(), "one": 1, "intercept": 1.0})
    for col in ("model", "mode"):
        values = rows[col].to_numpy()
        for level in sorted(set(values))[1:]:
            frame[f"{col}_{level}"] = (values == level).astype(float)
    for race in ("Black", "Hispanic", "Asian"):
        frame[f"race_{race}"] = (rows["race"].to_numpy() == race).astype(float)
    frame["female"] = (rows["gender"].to_numpy() == "female").astype(float)
    frame["profile"] = rows["profile_id"].to_numpy()
    frame["pair"] = rows["pair_id"].to_numpy()
    return frame


def _mixedlm(
    frame: pd.DataFrame,
    names: list[str],
    factors: Sequence[str],
    methods: Sequence[str] = ("bfgs",),
) -> tuple:
    """statsmodels' REML fit; of several optimizers, the one that reaches the highest REML
    likelihood (BFGS can stop short when a variance component is on its boundary)."""
    model = sm.MixedLM.from_formula(
        "y ~ 0 + " + " + ".join(names),
        groups="one",  # one all-in group: the factors are crossed, not nested
        re_formula="0",
        vc_formula={k: f"0 + C({k})" for k in factors},
        data=frame,
    )
    fits = [model.fit(reml=True, method=[m], maxiter=5000) for m in methods]
    ref = max(fits, key=lambda f: f.llf)
    # the fixed-effect block of statsmodels' Hessian is sigma^2 (X'V^-1 X)^-1 (lme4's vcov)
    hess = model.hessian(ref.params_object)[0][: len(names), : len(names)]
    se = np.sqrt(np.diag(np.linalg.inv(-hess)))
    return ref.fe_params, pd.Series(se, index=names)


@pytest.mark.filterwarnings("ignore::statsmodels.tools.sm_exceptions.ConvergenceWarning")
def test_rate_lmm_matches_statsmodels_mixedlm() -> None:
    rng = np.random.default_rng(11)
    j = judgement_frame(
        rng,
        models=("a", "b"),
        modes=("text", "tool"),
        effects={"Black": 0.3, "female": -0.2, "b": 0.5},
    )
    j = j.with_columns(  # an unparsed answer is dropped
        pl.when(pl.int_range(pl.len()) == 5).then(None).otherwise(pl.col("y")).alias("y")
    )
    fit = fit_cell(make_frames([j]), "hiring", "rate")
    used = j.filter(pl.col("y").is_not_null())
    frame = _dummy_frame(used, "y")
    names = [c for c in frame.columns if c not in ("y", "one", "profile", "pair")]
    coef, se = _mixedlm(frame, names, ["profile", "pair"])
    assert fit.n_obs == used.height == j.height - 1
    assert set(fit.names) == {"intercept", "model[b]", "mode[tool]", *fit.names[3:]}
    for contrast, column in CONTRAST_COLUMNS.items():
        assert fit.estimates[contrast].estimate == pytest.approx(coef[column], abs=1e-6)
        assert fit.estimates[contrast].se == pytest.approx(se[column], rel=1e-4)


@pytest.mark.filterwarnings("ignore::statsmodels.tools.sm_exceptions.ConvergenceWarning")
def test_rank_lmm_is_the_disguised_bundles_fit_with_a_bundle_clustered_cr2_se() -> None:
    rng = np.random.default_rng(0)
    # profile and pair worths: every variance component but the bundle's is interior
    profiles = dict(zip([f"hiring-p{i}" for i in range(12)], rng.normal(0, 1.0, 12), strict=True))
    pairs = dict(zip([p for p, _, _ in pair_ids(2)], rng.normal(0, 0.6, 16), strict=True))
    r = ranking_frame(
        rng,
        models=("a", "b"),
        bundles={"demographic_matched": 8, "disguised_demographic": 24},
        n_profiles=12,
        pairs_per_cell=2,
        worth={"Black": 0.5, **profiles, **pairs},
        matched_tie_rate=0.5,
    )
    # an answer with an unranked candidate, a matched and an irrelevant bundle are left out
    last = r.filter(pl.col("bundle_type") == "disguised_demographic")["bundle_id"][-1]
    incomplete = (pl.col("bundle_id") == last) & (pl.col("model") == "b")
    other = r.filter(pl.col("bundle_id") == last).with_columns(
        bundle_type=pl.lit("irrelevant_matched"), bundle_id=pl.lit("hiring/irrelevant/0")
    )
    damaged = r.with_columns(
        pl.when(incomplete & (pl.col("position") == 2))
        .then(None)
        .otherwise(pl.col("rank"))
        .alias("rank")
    )
    frames = make_frames(rankings=[pl.concat([damaged, other])])
    fit = fit_cell(frames, "hiring", "rank")
    used = r.filter(~incomplete & (pl.col("bundle_type") == "disguised_demographic"))
    frame = _dummy_frame(used, "points")
    for k in (2, 3, 4):
        frame[f"position_{k}"] = (used["position"].to_numpy() == k).astype(float)
    for tier in ("borderline", "clear_no"):
        frame[f"tier_{tier}"] = (used["tier"].to_numpy() == tier).astype(float)
    frame["bundle"] = used["bundle_id"].to_numpy()
    names = [c for c in frame.columns if c not in ("y", "one", "profile", "pair", "bundle")]
    coef, _ = _mixedlm(frame, names, ["profile", "pair"], ("bfgs", "lbfgs", "powell"))
    assert fit.n_obs == used.height == 4 * (2 * 24 - 1)
    assert fit.unit == "positions (mid-rank points)"
    assert fit.inference == "t, CR2 by bundle, Satterthwaite"
    # the paper's third intercept, the design bundle: its variance is zero, because every
    # complete answer's mid-rank points sum to 10
    assert fit.n_levels["bundle_id"] == 24 and fit.theta["bundle_id"] == pytest.approx(0, abs=1e-3)
    x = frame[names].to_numpy()
    groups = {"profile_id": frame["profile"].to_numpy(), "pair_id": frame["pair"].to_numpy()}
    for contrast, column in CONTRAST_COLUMNS.items():
        assert fit.estimates[contrast].estimate == pytest.approx(coef[column], abs=1e-5)
    # the SE is the CR2 sandwich by design bundle around the REML fit
    reml = fit_crossed_lmm(frame["y"].to_numpy(), x, groups, names)
    robust = cluster_robust(
        x, frame["y"].to_numpy(), frame["bundle"].to_numpy(), coef=reml.coef, groups=groups,
        theta=reml.theta,
    )  # fmt: skip
    black = robust.test(np.eye(len(names))[names.index("race_Black")])
    assert fit.estimates["black_vs_white"].se == pytest.approx(black.se, rel=1e-3)
    assert fit.estimates["black_vs_white"].df == pytest.approx(black.df, rel=1e-3)
    # matched bundles never enter: a frame of them alone has no rank cell
    matched = make_frames(rankings=[r.filter(pl.col("bundle_type") == "demographic_matched")])
    alone = fit_cell(matched, "hiring", "rank").estimates["black_vs_white"]
    assert np.isnan(alone.estimate) and alone.reason == "no rows"


def test_rank_difference_is_the_focal_minus_reference_expected_rank() -> None:
    """Monte Carlo under Plackett-Luce: one candidate of log-worth delta among three of 0."""
    rng = np.random.default_rng(0)
    for delta in (-0.8, 0.3, 1.2):
        util = rng.gumbel(size=(400_000, 4)) + np.array([delta, 0.0, 0.0, 0.0])
        rank = np.argsort(np.argsort(-util, axis=1), axis=1) + 1
        simulated = rank[:, 1:].mean() - rank[:, 0].mean()
        assert rank_difference(delta, 0.1)[0] == pytest.approx(simulated, abs=0.01)
    delta, se = 0.4, 0.05
    assert rank_difference(delta, se)[1] == pytest.approx(
        4 / 3 * expected_rank_gain_se(delta, se, 4), rel=1e-12
    )


def test_rologit_rows_are_in_positions_with_the_sign_of_the_preference() -> None:
    rng = np.random.default_rng(2)
    r = ranking_frame(
        rng,
        models=("a", "b"),
        bundles={"demographic_matched": 8, "disguised_demographic": 240},
        worth={"Black": 0.6, "Asian": -0.4},
        matched_tie_rate=1.0,
    )
    f = make_frames(rankings=[r])
    r = r.filter(pl.col("bundle_type") == "disguised_demographic")
    fit = fit_cell(f, "hiring", "rank", estimator="rologit")
    lmm = fit_cell(f, "hiring", "rank")
    assert fit.unit == "positions (mid-rank points)"
    assert fit.n_levels == {"rankings": 480, "informative": 480, "clusters": 240}
    assert fit.inference == "t, CR1 by bundle, clusters - 1"
    # the same model by hand: x built here, one ranking per model x bundle, clusters = bundles
    x = np.column_stack(
        [(r["position"] == k).to_numpy() for k in (2, 3, 4)]
        + [(r["tier"] == t).to_numpy() for t in ("borderline", "clear_no")]
        + [(r["race"] == g).to_numpy() for g in ("Black", "Hispanic", "Asian")]
        + [(r["gender"] == "female").to_numpy()]
    ).astype(float)
    ref = fit_rologit(
        x,
        (r["model"] + r["bundle_id"]).to_numpy(),
        r["rank"].to_numpy(),
        ties="exact",
        cluster=r["bundle_id"].to_numpy(),
    )
    for j, contrast in enumerate(CONTRAST_COLUMNS, start=5):
        delta, se = ref.coef[j], ref.se_cluster[j]
        assert fit.estimates[contrast].estimate == pytest.approx(
            4 / 3 * expected_rank_gain(delta, 4), rel=1e-8
        )
        assert fit.estimates[contrast].se == pytest.approx(
            4 / 3 * expected_rank_gain_se(delta, se, 4), rel=1e-6
        )
        assert fit.estimates[contrast].df == 239
    assert fit.estimates["black_vs_white"].estimate > 0.3  # ranked better: a positive contrast
    assert fit.estimates["asian_vs_white"].estimate < -0.2
    # the same unit as the lmm's points: the two estimators agree within their noise
    for contrast in ("black_vs_white", "asian_vs_white"):
        a, b = fit.estimates[contrast], lmm.estimates[contrast]
        assert abs(a.estimate - b.estimate) < 2 * max(a.se, b.se)


def test_planted_race_effect_is_recovered_within_its_interval() -> None:
    rng = np.random.default_rng(21)
    planted = 0.25
    j = judgement_frame(
        rng, models=("a", "b", "c"), n_profiles=12, pairs_per_cell=3, effects={"Black": planted}
    )
    table = estimate_contrasts(make_frames([j]), PREREG, pre_registered=True)
    row = table.filter(pl.col("contrast_id") == "hiring.rate.black_vs_white").row(0, named=True)
    assert row["ci_low"] <= planted <= row["ci_high"]
    assert row["ci_low"] > 0
    sd = float(np.std(j["y"].to_numpy(), ddof=1))
    assert row["n_obs"] == j.height
    assert row["outcome_sd"] == pytest.approx(sd, rel=1e-12)
    assert row["estimate_sd"] == pytest.approx(row["estimate"] / sd, rel=1e-12)
    assert row["ci_high_sd"] == pytest.approx(row["ci_high"] / sd, rel=1e-12)
    # t with Satterthwaite's df: the name pairs (24 here) carry the race contrast
    assert 10 < row["df"] < 40 and row["inference"] == "t, Satterthwaite (lmm)"
    t = stats.t.ppf(0.975, row["df"])
    assert row["ci_low"] == pytest.approx(row["estimate"] - t * row["se"], rel=1e-12)
    assert row["p_value"] == pytest.approx(2 * stats.t.sf(row["estimate"] / row["se"], row["df"]))
    assert row["mde"] == pytest.approx(
        (stats.t.ppf(0.975, row["df"]) + stats.t.ppf(0.8, row["df"])) * row["se"], rel=1e-12
    )
    assert row["mde_sd"] == pytest.approx(row["mde"] / sd, rel=1e-12)
    assert row["equivalence_floor_sd"] == pytest.approx(row["equivalence_floor"] / sd)
    # the observed TOST bound: the largest |end| of the 90% interval
    half = stats.t.ppf(0.95, row["df"]) * row["se"]
    assert row["tost_bound"] == pytest.approx(abs(row["estimate"]) + half, rel=1e-12)


def _family_frames(seed: int = 3) -> AnalysisFrames:
    rng = np.random.default_rng(seed)
    domains = ("hiring", "lending", "triage")
    judgements = [
        judgement_frame(
            rng,
            fmt=fmt,
            domains=domains,
            effects={"Black": 0.2},
            base=3.0 if fmt == "rate" else 0.5,
            sd_profile=0.5 if fmt == "rate" else 0.1,
            sd_pair=0.2 if fmt == "rate" else 0.05,
        )
        for fmt in ("rate", "decide")
    ]
    rankings = ranking_frame(rng, domains=domains, worth={"Black": 0.3})
    # lending ratings without Asian candidates: that contrast cannot be estimated
    j = pl.concat(judgements).filter(
        ~(
            (pl.col("domain") == "lending")
            & (pl.col("format") == "rate")
            & (pl.col("race") == "Asian")
        )
    )
    return make_frames([j], [rankings])


@pytest.fixture(scope="module")
def family() -> pl.DataFrame:
    return estimate_contrasts(
        _family_frames(), PREREG, pre_registered=Status(True, "locked at 2026-01-01")
    )


def test_contrasts_table_has_the_schema_rows_and_order(family: pl.DataFrame) -> None:
    assert family.schema == pl.Schema(CONTRASTS_SCHEMA)
    assert family.height == 36 + 12
    assert family["in_family"].sum() == 36
    assert set(family.filter(pl.col("in_family"))["contrast_id"]) == {
        c.id for c in PREREG.contrasts
    }
    rologit = family.filter(pl.col("estimator") == "rologit")
    assert rologit.height == 12 and set(rologit["format"]) == {"rank"}
    assert rologit["in_family"].sum() == 0 and rologit["q_value"].null_count() == 12
    assert family.equals(family.sort(["domain", "format", "contrast", "estimator"]))
    units = dict(family.select("format", "unit").unique().iter_rows())
    assert units == {
        "rate": "points",
        "decide": "probability",
        "rank": "positions (mid-rank points)",
    }
    assert set(family["label"]) == {"pre-registered"} and family["pre_registered"].all()


def test_an_estimator_is_one_row_of_the_registry(
    family: pl.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fitter added to FITTERS fits every cell of its formats and gets its own rows, outside
    the family: the family's rows, q-values and verdicts stay as they were."""

    def shifted(
        design: CellDesign,
        contrasts: Sequence[ContrastSpec],
        start: fitters.CellFit | None,
        inference: bool,
    ) -> fitters.CellFit:
        fit = fitters.FITTERS[FAMILY_ESTIMATOR].fit(design, contrasts, start, inference)
        estimates = {k: replace(e, estimate=e.estimate + 1.0) for k, e in fit.estimates.items()}
        return replace(fit, estimator="shifted", estimates=estimates, inference="t, shifted")

    extra = fitters.Fitter(shifted, {"decide": "t, shifted"})
    monkeypatch.setitem(fitters.FITTERS, "shifted", extra)
    table = estimate_contrasts(
        _family_frames(), PREREG, pre_registered=Status(True, "locked at 2026-01-01")
    )
    added = table.filter(pl.col("estimator") == "shifted")
    assert added.height == 12 and set(added["format"]) == {"decide"}
    assert not added["in_family"].any() and set(added["inference"]) == {"t, shifted"}
    lmm = table.filter((pl.col("estimator") == FAMILY_ESTIMATOR) & (pl.col("format") == "decide"))
    np.testing.assert_allclose(added["estimate"], lmm["estimate"] + 1.0, rtol=1e-12)
    assert table.filter(pl.col("estimator") != "shifted").equals(family)


def test_bh_q_values_equal_statsmodels_on_the_estimable_contrasts(family: pl.DataFrame) -> None:
    planned = family.filter(pl.col("in_family"))
    p = planned["p_value"].to_numpy()
    missing = np.isnan(p)
    assert planned.filter(pl.Series(missing))["contrast_id"].to_list() == [
        "lending.rate.asian_vs_white"
    ]
    _, q, _, _ = multipletests(p[~missing], method="fdr_bh")
    assert np.allclose(planned["q_value"].to_numpy()[~missing], q, rtol=1e-12, atol=0)
    assert np.isnan(planned["q_value"].to_numpy()[missing]).all()
    row = planned.filter(pl.Series(missing)).row(0, named=True)
    assert row["verdict"] == "inconclusive: not estimable (race[Asian]: no row in the cell)"
    assert row["n_obs"] > 0 and np.isfinite(row["outcome_sd"])


def test_decide_has_no_margin_but_an_mde(family: pl.DataFrame) -> None:
    decide = family.filter(pl.col("format") == "decide")
    assert set(decide["verdict"]) == {"no margin"}
    assert decide["margin"].null_count() == decide["p_tost"].null_count() == decide.height
    expected = [mde(se, 0.05, 0.8, df) for se, df in zip(decide["se"], decide["df"], strict=True)]
    assert np.allclose(decide["mde"].to_numpy(), expected)


def test_verdicts_equivalent_different_and_underpowered() -> None:
    rng = np.random.default_rng(8)
    models = tuple("abcde")
    precise = judgement_frame(  # no effect, many answers: equivalence within 0.09 points
        rng, models=models, n_profiles=12, pairs_per_cell=5, sd_noise=0.3, sd_pair=0.02
    )
    shifted = judgement_frame(
        rng,
        domains=("lending",),
        models=models,
        n_profiles=12,
        pairs_per_cell=5,
        sd_noise=0.3,
        sd_pair=0.02,
        effects={"Black": 0.5},
    )
    small = ranking_frame(rng, domains=("triage",), bundles={"disguised_demographic": 12})
    table = estimate_contrasts(
        make_frames([precise, shifted], [small]), PREREG, pre_registered=True
    ).filter(pl.col("n_obs") > 0)
    verdicts = dict(
        zip(table["contrast_id"] + "/" + table["estimator"], table["verdict"], strict=True)
    )
    for contrast in CONTRAST_COLUMNS:
        assert verdicts[f"hiring.rate.{contrast}/lmm"] == "equivalent"
    assert verdicts["lending.rate.black_vs_white/lmm"] == "different"
    row = table.filter(
        (pl.col("contrast_id") == "triage.rank.black_vs_white") & (pl.col("estimator") == "lmm")
    ).row(0, named=True)
    assert row["verdict"] == f"inconclusive: MDE {row['mde']:.3f} exceeds margin 0.067"
    assert row["p_tost"] == pytest.approx(
        max(
            stats.t.sf((row["estimate"] + 0.067) / row["se"], row["df"]),
            stats.t.cdf((row["estimate"] - 0.067) / row["se"], row["df"]),
        )
    )
    # precise but neither test rejects: p_TOST 0.055 against (-0.09, 0.09), q 0.2
    assert verdict(0.05, 0.025, 0.09, 0.2) == "inconclusive"
    assert verdict(0.05, 0.025, 0.09, 0.04) == "different"
    assert verdict(0.02, 0.025, 0.09, 0.4) == "equivalent"
    assert verdict(0.02, 0.025, None, 0.4) == "no margin"


def test_a_dummy_without_variation_gives_a_nan_row() -> None:
    rng = np.random.default_rng(4)
    men = ranking_frame(rng, genders=("male",), worth={"Black": 0.3})
    table = estimate_contrasts(make_frames(rankings=[men]), PREREG, pre_registered=True)
    rank = table.filter(pl.col("contrast_id").str.starts_with("hiring.rank."))
    female = rank.filter(pl.col("contrast") == "female_vs_male")
    assert female["estimate"].is_nan().all()
    assert set(female["verdict"]) == {
        "inconclusive: not estimable (no ranking answer shows more than one gender)",
        "inconclusive: not estimable (gender[female]: no row in the cell)",
    }
    assert rank.filter(pl.col("dimension") == "race")["estimate"].is_finite().all()
    # no White candidate: race contrasts are not estimable, the gender one is
    no_white = judgement_frame(rng).filter(pl.col("race") != "White")
    fit = fit_cell(make_frames([no_white]), "hiring", "rate")
    assert np.isnan(fit.estimates["black_vs_white"].estimate)
    assert "no White row" in (fit.estimates["black_vs_white"].reason or "")
    assert np.isfinite(fit.estimates["female_vs_male"].estimate)


def test_matched_bundles_do_not_dilute_the_rank_contrast() -> None:
    """Tied matched bundles (one profile under four names, every candidate the same points)
    beside disguised ones: the pooled fit of the old estimand shrinks a planted preference
    towards zero; the estimand's fit is the disguised bundles' alone."""
    rng = np.random.default_rng(6)
    r = ranking_frame(
        rng,
        bundles={"demographic_matched": 240, "disguised_demographic": 240},
        worth={"Black": 0.6},
        matched_tie_rate=1.0,
    )
    disguised = r.filter(pl.col("bundle_type") == "disguised_demographic")
    fit = fit_cell(make_frames(rankings=[r]), "hiring", "rank").estimates["black_vs_white"]
    alone = fit_cell(make_frames(rankings=[disguised]), "hiring", "rank").estimates
    assert fit.estimate == pytest.approx(alone["black_vs_white"].estimate, abs=1e-12)
    pooled = fit_cell(
        make_frames(rankings=[r]),
        "hiring",
        "rank",
        bundle_types=("demographic_matched", "disguised_demographic"),
    ).estimates["black_vs_white"]
    assert pooled.estimate < 0.75 * fit.estimate


def test_labels_follow_the_lock_and_the_arm() -> None:
    rng = np.random.default_rng(9)
    primary = judgement_frame(rng)
    extension = judgement_frame(rng, n_profiles=3, arm="precision_topup")
    f = make_frames([primary, extension])
    table = estimate_contrasts(f, PREREG, pre_registered=False)
    assert set(table["label"]) == {"exploratory: the pre-registration is not locked"}
    assert not table["pre_registered"].any()
    changed = Status(False, "preregistration.yaml changed after it was locked")
    table = estimate_contrasts(f, PREREG, pre_registered=changed)
    assert set(table["label"]) == {f"exploratory: {changed.reason}"}
    table = estimate_contrasts(f, PREREG, pre_registered=True, arm="precision_topup")
    assert set(table["label"]) == {
        "exploratory: arm 'precision_topup' is not the pre-registered design"
    }
    assert not table["pre_registered"].any()
    n = table.filter(pl.col("contrast_id") == "hiring.rate.black_vs_white")["n_obs"][0]
    assert n == extension.height


@pytest.fixture(scope="module")
def interactions() -> pl.DataFrame:
    return estimate_interactions(_family_frames(), PREREG)


def test_interactions_difference_sd_estimates(
    family: pl.DataFrame, interactions: pl.DataFrame
) -> None:
    table = interactions
    assert table.schema == pl.Schema(INTERACTIONS_SCHEMA)
    assert table.height == 12 * 3
    assert set(table["formats"]) == {"rate-decide", "rate-rank", "decide-rank"}
    primary = table.filter(pl.col("primary"))
    assert primary.select("domain", "contrast", "formats").rows() == [
        ("hiring", "black_vs_white", "rate-rank")
    ]
    lmm = family.filter(pl.col("estimator") == "lmm")

    def cell(domain: str, fmt: str, contrast: str) -> dict:
        return lmm.filter(
            (pl.col("domain") == domain)
            & (pl.col("format") == fmt)
            & (pl.col("contrast") == contrast)
        ).row(0, named=True)

    rate, rank = cell("hiring", "rate", "black_vs_white"), cell("hiring", "rank", "black_vs_white")
    row = primary.row(0, named=True)
    assert row["estimate_sd"] == pytest.approx(rate["estimate_sd"] - rank["estimate_sd"])
    independent = np.sqrt(rate["se_sd"] ** 2 + rank["se_sd"] ** 2)
    assert row["se_sd_independent"] == pytest.approx(independent)
    va, vb = rate["se_sd"] ** 2, rank["se_sd"] ** 2
    assert row["se_sd"] ** 2 == pytest.approx(
        va + vb - 2 * row["correlation"] * np.sqrt(va * vb), rel=1e-9
    )
    t = stats.t.ppf(0.975, row["df"])
    assert row["ci_low_sd"] == pytest.approx(row["estimate_sd"] - t * row["se_sd"])
    assert row["p_value"] == pytest.approx(
        2 * stats.t.sf(abs(row["estimate_sd"]) / row["se_sd"], row["df"])
    )
    rate_rank = table.filter(pl.col("formats") == "rate-rank")
    p = rate_rank["p_value"].to_numpy()
    ok = ~np.isnan(p)  # lending's Asian rate contrast is missing
    assert ok.sum() == 11
    _, q, _, _ = multipletests(p[ok], method="fdr_bh")
    assert np.allclose(rate_rank["q_value"].to_numpy()[ok], q, rtol=1e-12, atol=0)
    assert table.filter(pl.col("formats") != "rate-rank")["q_value"].null_count() == 24


def test_interactions_carry_the_covariance_of_shared_name_pairs() -> None:
    """Rate and Decide on the same names, whose pair effects are shared and large: the two
    cells' Black contrasts covary positively, so their difference is more precise than the
    independent-samples SE says; with pair effects drawn apart for each format they do not."""

    def frames(shared: bool) -> AnalysisFrames:
        rng = np.random.default_rng(12)
        pairs = [p for p, _, _ in pair_ids(5)]
        level = dict(zip(pairs, rng.normal(0, 0.5, len(pairs)), strict=True))
        parts = []
        for fmt in ("rate", "decide"):
            own = level if shared else dict(zip(pairs, rng.normal(0, 0.5, len(pairs)), strict=True))
            parts.append(
                judgement_frame(
                    rng, n_profiles=12, pairs_per_cell=5, sd_pair=0.0, sd_noise=0.5,
                    level_effects=own,
                ).with_columns(format=pl.lit(fmt))  # a continuous outcome in both cells
            )  # fmt: skip
        return make_frames(parts)

    prereg = PREREG
    shared = estimate_interactions(frames(True), prereg).filter(
        (pl.col("domain") == "hiring") & (pl.col("contrast") == "black_vs_white")
        & (pl.col("formats") == "rate-decide")
    ).row(0, named=True)  # fmt: skip
    apart = estimate_interactions(frames(False), prereg).filter(
        (pl.col("domain") == "hiring") & (pl.col("contrast") == "black_vs_white")
        & (pl.col("formats") == "rate-decide")
    ).row(0, named=True)  # fmt: skip
    assert shared["correlation"] > 0.5
    assert shared["se_sd"] < 0.8 * shared["se_sd_independent"]
    assert abs(apart["correlation"]) < 0.35
