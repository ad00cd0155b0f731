"""The decision-audit simulator and planted disparities (issue 12's acceptance): the frames
have the analysis schemas and the real design's balance, a planted effect is the analysis'
estimand, and the estimators' intervals cover the paper's planted sizes."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.decision.analysis.contrasts import (
    estimate_contrasts,
    fit_cell,
    fit_family,
)
from cueaudit.decision.analysis.frames import PRIMARY, SCHEMAS, check_frame, with_points
from cueaudit.decision.analysis.inputs import pooled_with_primary
from cueaudit.decision.analysis.instrument import position_effects, tie_rates
from cueaudit.decision.analysis.planted import (
    PLANTED_SCHEMA,
    answer_kinds,
    outcome_sd,
    plant_answers,
    planted_disparities,
    step,
)
from cueaudit.decision.analysis.simulate import build_design, simulate, simulate_like
from cueaudit.decision.analysis.simulation_settings import (
    SimulationSettings,
    paper_settings,
    request_counts,
)
from cueaudit.decision.preregistration import load_preregistration
from cueaudit.decision.profiles import load_attribute_list, load_profiles
from cueaudit.decision.prompts import build_decision_prompts
from cueaudit.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
PREREG = load_preregistration(ROOT / "config/decision/preregistration.yaml")
SMALL = {
    "domains": ["hiring", "lending"],
    "paraphrases": 1,
    "profiles_per_tier": 2,
    "names_per_cell": 2,
    "bundles_per_type": {
        "demographic_matched": 4,
        "irrelevant_matched": 4,
        "disguised_demographic": 12,
        "disguised_placebo": 12,
    },
    "probe_bundles": 4,
}
#: The coverage study: hiring at the paper's granularity (12 profiles x 40 name pairs, five
#: models), Rate and Rank only; the paper's planted sizes.
HIRING = {
    "domains": ["hiring"],
    "paraphrases": 1,
    "tasks": ["decision_rate_text", "decision_rate_tool", "decision_rank_json"],
    "bundles_per_type": {
        "demographic_matched": 8,
        "disguised_demographic": 48,
        "disguised_placebo": 48,
    },
    "probe_bundles": 0,
}
STUDIES = 40
RATE = 0.047
GAIN = 0.11


def settings(design: dict | None = None, **kw: object) -> SimulationSettings:
    options: dict[str, object] = {"models": ("m1", "m2"), "root": str(ROOT)} | kw
    return SimulationSettings(design=SMALL if design is None else design, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def small() -> SimulationSettings:
    return settings(seeds=(0, 1))


@pytest.fixture(scope="module")
def frames(small: SimulationSettings):
    return simulate(small, 0)


def test_frames_have_the_schemas_and_the_real_design(small, frames) -> None:
    for name, schema in SCHEMAS.items():
        check_frame(getattr(frames, name), schema, name)
    tables = build_decision_prompts(
        load_profiles(ROOT / "resources/decision/profiles.jsonl"),
        load_name_pairs(ROOT / "resources/names/elder_hayes_pairs.csv"),
        load_attribute_list(ROOT / "resources/decision/hobbies.txt"),
        load_attribute_list(ROOT / "resources/decision/neighbourhoods.txt"),
        {**SMALL, "prompts": str(ROOT / "resources/decision/prompts.yaml")},
    )
    answers = {
        "judgements": frames.judgements,
        "rankings": frames.rankings.unique(["model", "seed", "prompt_uid"]),
        "probes": frames.probes,
    }
    for task, table in tables.items():
        kind = "probes" if "probe" in table.columns else (
            "rankings" if table["format"][0] == "rank" else "judgements"
        )  # fmt: skip
        got = answers[kind].filter(pl.col("task") == task)
        # every prompt of the real design, once per model x seed, and nothing else
        counts = got.group_by("prompt_uid").len()
        assert set(counts["prompt_uid"]) == set(table["prompt_uid"])
        assert set(counts["len"]) == {2 * 2}
    # by hand: Rate/Decide 2 domains x 3 tiers x 2 profiles x 8 race-gender cells x 2 names,
    # Rank 2 domains x 32 bundles, probes 2 domains x 4 types x 4 bundles; 2 models x 2 seeds
    per_run = 4 * (2 * 3 * 2 * 8 * 2) + 3 * (2 * 32) + 2 * (2 * 4 * 4)
    assert sum(request_counts(small).values()) == 4 * per_run == 4096
    counted = frames.judgements.height + frames.rankings.height // 4 + frames.probes.height
    assert counted == sum(request_counts(small).values())
    assert set(frames.judgements["arm"]) == {PRIMARY}


def test_disguised_bundles_keep_the_design_balance_and_ties_are_as_configured(frames) -> None:
    ranked = frames.rankings
    disguised = ranked.filter(pl.col("bundle_type") == "disguised_demographic")
    for factor in ("tier", "position"):
        cells = disguised.group_by("domain", "race", factor).len()
        assert cells.height == 2 * 4 * (3 if factor == "tier" else 4)
        assert cells["len"].n_unique() == 1
    per_answer = ranked.group_by("model", "seed", "prompt_uid").agg(
        pl.col("bundle_type").first(), pl.col("rank").sort(), pl.col("tie").first()
    )
    for kind in ("demographic_matched", "irrelevant_matched"):
        part = per_answer.filter(pl.col("bundle_type") == kind)
        assert part["tie"].all() and part["rank"].to_list() == [[1, 1, 1, 1]] * part.height
    for kind in ("disguised_demographic", "disguised_placebo"):
        part = per_answer.filter(pl.col("bundle_type") == kind)
        assert not part["tie"].any()
        assert part["rank"].to_list() == [[1, 2, 3, 4]] * part.height
    # mid-rank points: an untied answer scores 4, 3, 2, 1, a fully tied one 2.5 each
    assert ranked["points_rule"].unique().to_list() == ["mid-rank"]
    tied = ranked.filter(pl.col("tie"))
    assert tied["points"].unique().to_list() == [2.5]
    untied = ranked.filter(~pl.col("tie"))
    assert ((5 - untied["rank"]).cast(pl.Float64) == untied["points"]).all()
    competition = with_points(ranked, "competition")
    assert competition.filter(pl.col("tie"))["points"].unique().to_list() == [4.0]
    assert set(frames.judgements.filter(pl.col("format") == "rate")["y"]) <= {1.0, 2, 3, 4, 5}
    assert set(frames.judgements.filter(pl.col("format") == "decide")["y"]) == {0.0, 1.0}
    recognised = frames.probes.filter(pl.col("bundle_type") == "demographic_matched")
    assert recognised.filter(pl.col("probe") == "choice")["label"].to_list() == ["Fairness"] * (
        recognised.height // 2
    )
    assert (
        frames.probes["recognised"] == frames.probes["label"].is_in(["Fairness", "fairness_bias"])
    ).all()


def test_paper_settings_have_the_paper_size() -> None:
    paper = paper_settings(ROOT)
    if not paper.path(paper.fairfund_stimuli or "").is_file():
        pytest.skip(f"the paper's aid arm needs FairFund-Bench's stimuli: {paper.fairfund_stimuli}")
    counts = request_counts(paper)
    # primary: 5 models x 3 domains x (4 judgement tasks x 12 x 40 + 3 rank tasks x 144 bundles
    # + 2 probes x 48); top-up: 5 x 600 hiring bundles; rerun: 1 model x (480 + 480 + 48);
    # aid replication: 5 x (75 appeals x 8 cells + 120 + 120 bundles)
    assert counts == {
        PRIMARY: 5 * 3 * (4 * 480 + 3 * 144 + 2 * 48),
        "precision_topup": 5 * 600,
        "reasoning_rerun": 480 + 480 + 48,
        "fairfund_aid": 5 * (75 * 8 + 240),
        "wording": 2 * 480,  # one model, hiring Rate under two paraphrases
    }
    total = sum(counts.values())
    config = yaml.safe_load((ROOT / "config/decision/paper.yaml").read_text())
    assert total == config["decision"]["expected_requests"] == 45_888
    # every unit of the paper's own design is a multiple of 4 requests
    assert abs(total - counts["fairfund_aid"] - counts["wording"] - 40_726) == 2
    assert paper.planted == {("hiring", "rate", "black_vs_white"): RATE}
    assert paper.position_gain["disguised_demographic"] == GAIN
    assert paper.tie_rates["demographic_matched"] == paper.tie_rates["irrelevant_matched"] == 1


def test_a_planted_rating_is_the_difference_of_expected_ratings() -> None:
    """Identity link: the expected rating (``score``, here without each answer's own
    deviation) moves by exactly the planted points."""
    study = settings(pair_sd=0.0, score_sd={}, planted={("hiring", "rate", "black_vs_white"): RATE})
    out = simulate(study, 3).judgements.filter(pl.col("mode") == "text")
    means = out.group_by("domain", "format", "race").agg(pl.col("score").mean())
    means = {(d, f, r): v for d, f, r, v in means.iter_rows()}
    for domain in ("hiring", "lending"):
        for fmt in ("rate", "decide"):
            planted = RATE if (domain, fmt) == ("hiring", "rate") else 0.0
            assert means[(domain, fmt, "Black")] - means[(domain, fmt, "White")] == pytest.approx(
                planted, abs=1e-12
            )
            assert means[(domain, fmt, "Asian")] == pytest.approx(means[(domain, fmt, "White")])
    # and the answers' mean follows their expectation (Monte Carlo over 40 studies)
    design = build_design(study)
    gaps = []
    for seed in range(40):
        rate = simulate(study, seed, design=design).judgements.filter(
            (pl.col("domain") == "hiring") & (pl.col("format") == "rate")
        )
        by = dict(rate.group_by("race").agg(pl.col("y").mean()).iter_rows())
        gaps.append(by["Black"] - by["White"])
    assert abs(np.mean(gaps) - RATE) < 3 * np.std(gaps, ddof=1) / np.sqrt(len(gaps))


def test_lapses_carry_the_planted_rank_effects_in_expectation() -> None:
    planted = {("hiring", "rank", "black_vs_white"): 0.08}
    design = {**SMALL, "domains": ["hiring"], "tasks": ["decision_rank_json"], "probe_bundles": 0}
    study = settings(design, models=tuple(f"m{i}" for i in range(10)), planted=planted)
    built = build_design(study)
    first, black = [], []
    for seed in range(20):
        ranked = simulate(study, seed, design=built).rankings.filter(
            pl.col("bundle_type") == "disguised_demographic"
        )
        pos = dict(
            ranked.group_by(pl.col("position") == 1).agg(pl.col("points").mean()).iter_rows()
        )
        race = dict(ranked.group_by("race").agg(pl.col("points").mean()).iter_rows())
        first.append(pos[True] - pos[False])
        black.append(race["Black"] - race["White"])
    for values, truth in ((first, GAIN), (black, 0.08)):
        assert abs(np.mean(values) - truth) < 3 * np.std(values, ddof=1) / np.sqrt(len(values))


def test_draws_are_deterministic_and_parts_keep_their_streams(small, frames) -> None:
    again = simulate(small, 0)
    for name in SCHEMAS:
        assert getattr(again, name).equals(getattr(frames, name))
    other = simulate(small, 1)
    assert not other.judgements["y"].equals(frames.judgements["y"])
    planted = simulate(
        dataclasses.replace(small, planted={("hiring", "decide", "female_vs_male"): 0.04}), 0
    )
    assert planted.rankings.equals(frames.rankings) and planted.probes.equals(frames.probes)
    moved = planted.judgements["y"] != frames.judgements["y"]
    assert not (moved & (frames.judgements["format"] == "rate")).any()


def test_parse_failures_null_whole_answers(small) -> None:
    failing = simulate(dataclasses.replace(small, parse_failure=0.25), 0)
    rate = failing.judgements["y"].is_null().mean()
    assert abs(rate - 0.25) < 4 * np.sqrt(0.25 * 0.75 / failing.judgements.height)
    per_answer = failing.rankings.group_by("model", "seed", "prompt_uid").agg(
        pl.col("rank").null_count(), pl.col("points").null_count(), pl.col("tie").null_count()
    )
    assert set(per_answer["rank"]) == {0, 4}
    assert (per_answer["rank"] == per_answer["points"]).all()
    assert (per_answer["rank"] == per_answer["tie"]).all()
    assert (failing.probes["label"].is_null() == failing.probes["recognised"].is_null()).all()
    assert failing.judgements.filter(pl.col("y").is_null())["score"].null_count() == (
        failing.judgements["y"].null_count()
    )


def test_settings_that_break_the_design_are_refused() -> None:
    with pytest.raises(InputError, match=r"can leave \[1, 5\] \(rate_scale 1, at most 0.843"):
        settings(planted={("hiring", "rate", "black_vs_white"): 0.5})
    # with_planted makes room instead: the largest scale that keeps every answer in range
    roomy = settings().with_planted({("hiring", "rate", "black_vs_white"): 0.5})
    assert roomy.rate_scale == pytest.approx(0.843, abs=1e-3)
    with pytest.raises(InputError, match="unknown contrast"):
        settings(planted={("hiring", "rate", "purple_vs_white"): 0.1})
    for contrast in ("black_vs_asian", "white_vs_white"):
        with pytest.raises(InputError, match="against White"):
            settings(planted={("hiring", "rate", contrast): 0.1})
    with pytest.raises(InputError, match="rank_lapse"):
        simulate(settings(planted={("hiring", "rank", "black_vs_white"): 1.0}), 0)
    with pytest.raises(InputError):
        settings(tie_rates={"disguised_demographic": 1.5})


def test_simulate_like_answers_the_same_prompts(small, frames) -> None:
    fresh = simulate_like(frames, small, 5)
    keys = ["model", "seed", "task", "prompt_uid"]
    for name in SCHEMAS:
        old, new = getattr(frames, name), getattr(fresh, name)
        assert new.height == old.height
        assert new.select(keys).sort(keys).equals(old.select(keys).sort(keys))
    assert not fresh.judgements.sort(keys)["y"].equals(frames.judgements.sort(keys)["y"])


# --- planted disparities ---------------------------------------------------------------------
KINDS = answer_kinds(str(ROOT / "resources/decision/prompts.yaml"))


def _spec(domain: str, fmt: str, contrast: str):  # type: ignore[no-untyped-def]
    return next(
        c for c in PREREG.contrasts if (c.domain, c.format, c.contrast) == (domain, fmt, contrast)
    )


@pytest.mark.parametrize(
    ("ranks", "candidate", "up", "after"),
    [
        ([1, 2, 3, 4], 1, True, [2, 1, 3, 4]),  # strict: change places with the one above
        ([1, 2, 3, 4], 0, True, [1, 2, 3, 4]),  # at the top: unchanged
        ([1, 2, 3, 4], 0, False, [2, 1, 3, 4]),
        ([1, 1, 3, 4], 1, True, [2, 1, 3, 4]),  # out of a tie, to just above its partner
        ([1, 2, 2, 4], 3, True, [1, 2, 2, 2]),  # alone, into the tie above
        ([1, 2, 2, 4], 1, False, [1, 3, 2, 4]),  # out of the tie, to just below it
        ([1, 1, 1, 1], 2, True, [2, 2, 1, 2]),
    ],
)
def test_a_rank_step_breaks_or_forms_ties_and_keeps_strict_answers_strict(
    ranks: list[int], candidate: int, up: bool, after: list[int]
) -> None:
    assert step(ranks, candidate, up) == after


def test_planted_answers_are_rendered_and_parsed_and_move_only_focal_rows(frames) -> None:
    """Black hiring ratings, women's lending decisions and Black hiring rankings: the plant
    changes only focal answers of its cell, by what the parsers read back from the rendered
    text, JSON and tool calls."""
    for domain, fmt, contrast, value in (
        ("hiring", "rate", "black_vs_white", 0.6),
        ("lending", "decide", "female_vs_male", 0.2),
        ("hiring", "rank", "black_vs_white", 0.4),
    ):
        plant = plant_answers(frames, _spec(domain, fmt, contrast), value, KINDS)
        assert plant.n_changed > 0 and plant.n_unparsed == 0
        assert plant.realised == pytest.approx(value, abs=0.25 * value)
        column = "race" if contrast == "black_vs_white" else "gender"
        focal = "Black" if column == "race" else "female"
        if fmt != "rank":
            old, new = frames.judgements, plant.frames.judgements
            moved = (old["y"] != new["y"]).to_numpy()
            cell = ((old["domain"] == domain) & (old["format"] == fmt)).to_numpy()
            assert moved.sum() == plant.n_changed
            assert np.all((old[column] == focal).to_numpy()[moved] & cell[moved])
            answers = set(new.filter(pl.col("format") == fmt)["y"].drop_nulls())
            assert answers <= ({1.0, 2, 3, 4, 5} if fmt == "rate" else {0, 1})
        else:
            old, new = frames.rankings, plant.frames.rankings
            changed = old.with_columns(moved=old["rank"] != new["rank"]).filter("moved")
            assert changed.select("model", "seed", "prompt_uid").n_unique() == plant.n_changed
            assert set(changed["bundle_type"]) == {"disguised_demographic"}
            gain = (
                new.filter(pl.col("race") == focal)["points"].sum()
                - old.filter(pl.col("race") == focal)["points"].sum()
            )
            assert gain > 0
            assert new["points"].sum() == pytest.approx(old["points"].sum())  # still sum to 10


def _planted_study(matched: int = 48) -> tuple[SimulationSettings, object]:
    design = {
        **HIRING,
        "tasks": ["decision_rate_text", "decision_rank_json", "decision_rank_tool"],
        "bundles_per_type": {**HIRING["bundles_per_type"], "demographic_matched": matched},
    }
    study = SimulationSettings(design=design, root=str(ROOT))
    return study, simulate(study, 2)


def test_planted_disparities_are_measured_not_constructed() -> None:
    study, real = _planted_study()
    table = planted_disparities(real, PREREG, KINDS, sizes=(0.1, 0.5), simulated=study)
    assert table.schema == pl.Schema(PLANTED_SCHEMA)
    hiring = table.filter(pl.col("domain") == "hiring")
    # rate and decide by the lmm, rank by both estimators; two sources and two sizes; the
    # design has no Decide task, whose rows say so
    assert hiring.height == 2 * 2 * 4
    assert set(hiring.filter(pl.col("format") == "decide")["verdict"]) == {"not estimable"}
    hiring = hiring.filter(pl.col("format") != "decide")
    assert set(hiring.filter(pl.col("format") == "rank")["estimator"]) == {"lmm", "rologit"}
    # recovery is measured: no row equals its planted size
    assert (hiring["recovered_sd"] - hiring["planted_sd"]).abs().min() > 1e-6
    large = hiring.filter(pl.col("planted_sd") == 0.5)
    assert set(large["verdict"]) <= {"recovered", "not recovered"}
    lmm = large.filter(pl.col("estimator") == "lmm")
    assert (lmm["verdict"] == "recovered").all(), lmm
    assert (large["n_unparsed"] == 0).all()
    t = np.array([stats_t(df) for df in large["df"]])
    assert np.allclose(large["ci_high_sd"] - large["ci_low_sd"], 2 * t * large["se_sd"])


def test_a_plant_too_large_for_the_simulated_rankings_names_the_key_the_user_set() -> None:
    """Planting 20 SD into the simulated rankings used to stop on 'rank_lapse', a simulator
    setting the user never wrote: the message names decision.analysis.planted_sizes and the
    largest size the rankings can carry."""
    study, real = _planted_study()
    with pytest.raises(InputError) as error:
        planted_disparities(real, PREREG, KINDS, sizes=(0.1, 20.0), simulated=study)
    assert error.value.field == "decision.analysis.planted_sizes"
    assert "a planted size of 20 SD" in error.value.message
    assert "decision.analysis.simulate: false" in error.value.message


def stats_t(df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, df))


def test_a_diluted_rank_estimator_fails_the_planted_check() -> None:
    """The old estimand pooled the tied matched bundles in: it reads a planted 0.5 SD as
    about half of it, and the check says so."""
    _, real = _planted_study()

    def pooled(frames, prereg):  # type: ignore[no-untyped-def]
        types = ("demographic_matched", "disguised_demographic")
        fits = fit_family(frames, prereg, bundle_types=types)
        return estimate_contrasts(frames, prereg, pre_registered=False, fits=fits)

    rows = {}
    for name, estimator in (("estimand", None), ("pooled", pooled)):
        table = planted_disparities(real, PREREG, KINDS, sizes=(0.5,), estimate=estimator)
        rows[name] = table.filter(
            (pl.col("domain") == "hiring") & (pl.col("format") == "rank")
            & (pl.col("estimator") == "lmm")
        ).row(0, named=True)  # fmt: skip
    assert rows["estimand"]["verdict"] == "recovered"
    assert rows["pooled"]["verdict"] == "not recovered"
    assert rows["pooled"]["recovered_sd"] < 0.7 * rows["estimand"]["recovered_sd"]


def test_a_plant_the_parser_cannot_read_is_not_recovered(monkeypatch) -> None:
    from cueaudit.parsing.kinds import RatingKind

    _, real = _planted_study()
    monkeypatch.setattr(RatingKind, "text_of", lambda self, value: "a solid four-ish")
    table = planted_disparities(real, PREREG, KINDS, sizes=(0.5,))
    rate = table.filter((pl.col("domain") == "hiring") & (pl.col("format") == "rate"))
    row = rate.row(0, named=True)
    assert row["n_unparsed"] == row["n_changed"] > 0
    assert row["verdict"] == "not recovered" and abs(row["recovered_sd"]) < 0.2


def test_a_planted_half_sd_in_the_data_is_recovered_within_its_interval() -> None:
    """Planted by the generative model: 0.50 SD of the unplanted rating."""
    design = {**HIRING, "tasks": ["decision_rate_text", "decision_rate_tool"]}
    base = SimulationSettings(design=design, root=str(ROOT), rate_scale=0.6)
    sd = outcome_sd(simulate(base, 7), "hiring", "rate")
    effect = 0.5 * sd
    study = dataclasses.replace(base, planted={("hiring", "rate", "black_vs_white"): effect})
    row = (
        estimate_contrasts(simulate(study, 7), PREREG, pre_registered=False)
        .filter(pl.col("contrast_id") == "hiring.rate.black_vs_white")
        .row(0, named=True)
    )
    assert row["ci_low"] <= effect <= row["ci_high"] and row["ci_low"] > 0


def _recovers(values: list[float], truth: float) -> bool:
    """The mean of the studies' estimates within 3 of its SEs (their SD / sqrt(studies)) of
    ``truth``."""
    return bool(abs(np.mean(values) - truth) < 3 * np.std(values, ddof=1) / np.sqrt(len(values)))


@pytest.mark.slow
def test_a_rank_effect_planted_where_race_varies_is_recovered_in_every_arm() -> None:
    """The paper's design and arms, 0.20 positions planted in hiring: the in-family
    estimate's mean is within 3 SEs of it in the primary arm and the precision top-up
    (analysed with the primary rows) over 8 studies (an SD of 0.06 and 0.03 per study), and
    in the reasoning rerun (one model, 48 bundles: an SD of 0.23 per study) over 120 studies of
    its design alone. The check fails where it should: the primary arm's estimate diluted by
    the tied matched bundles (2/3 of the plant) is not recovered, and every arm's mean is more
    than 3 SEs from half the plant."""
    paper = paper_settings(ROOT, planted={("hiring", "rank", "black_vs_white"): 0.20})
    arms = ("precision_topup", "reasoning_rerun")  # the aid arm needs FairFund's stimuli
    paper = dataclasses.replace(
        paper, extensions={arm: ext for arm, ext in paper.extensions.items() if arm in arms}
    )
    design = build_design(paper)
    estimates: dict[str, list[float]] = {PRIMARY: [], "precision_topup": []}
    diluted = []
    for seed in range(8):
        frames = simulate(paper, seed, design=design)
        for arm in estimates:
            data = pooled_with_primary(frames, arm) if arm == "precision_topup" else frames
            fit = fit_cell(data.arm(arm), "hiring", "rank")
            estimates[arm].append(fit.estimates["black_vs_white"].estimate)
        types = ("demographic_matched", "disguised_demographic")
        fit = fit_cell(frames.arm(PRIMARY), "hiring", "rank", bundle_types=types)
        diluted.append(fit.estimates["black_vs_white"].estimate)
    rerun = paper.extensions["reasoning_rerun"]
    alone = dataclasses.replace(
        paper, design={**paper.design, **rerun.design}, models=rerun.models, extensions={}
    )
    built = build_design(alone)
    estimates["reasoning_rerun"] = [
        fit_cell(simulate(alone, seed, design=built), "hiring", "rank")
        .estimates["black_vs_white"]
        .estimate
        for seed in range(120)
    ]
    for arm, values in estimates.items():
        print(f"{arm}: mean {np.mean(values):.4f}, SD {np.std(values, ddof=1):.4f}")
        assert _recovers(values, 0.20), arm
        assert not _recovers(values, 0.10), arm
    print(f"diluted: mean {np.mean(diluted):.4f}")
    assert not _recovers(diluted, 0.20)


# --- acceptance: coverage of the paper's planted sizes ----------------------------------------
@pytest.fixture(scope="module")
def coverage() -> dict[str, list[dict[str, object]]]:
    """40 studies of hiring at the paper's granularity with the paper's planted sizes: the
    CONTRASTS row of the planted rating contrast and the POSITION row, per study."""
    paper = paper_settings(ROOT)
    study = dataclasses.replace(paper, design=HIRING, extensions={})
    assert study.planted == {("hiring", "rate", "black_vs_white"): RATE}
    assert study.tie_rates["demographic_matched"] == 1.0
    design = build_design(study)
    start = time.perf_counter()
    rows: dict[str, list[dict[str, object]]] = {"rate": [], "gain": [], "ties": []}
    for seed in range(STUDIES):
        frames = simulate(study, seed, design=design)
        contrasts = estimate_contrasts(frames, PREREG, pre_registered=False)
        rate = contrasts.filter(
            (pl.col("contrast_id") == "hiring.rate.black_vs_white") & (pl.col("estimator") == "lmm")
        )
        rows["rate"].append(rate.row(0, named=True))
        gain = position_effects(frames, contrasts).filter(pl.col("domain") == "hiring")
        rows["gain"].append(gain.row(0, named=True))
        ties = tie_rates(frames).filter(pl.col("domain") == "hiring")
        rows["ties"].append(dict(zip(ties["bundle_type"], ties["tie_rate"], strict=True)))
    print(f"\n{STUDIES} simulated studies in {time.perf_counter() - start:.1f} s")
    return rows


def _covered(rows: list[dict[str, object]], truth: float) -> int:
    return sum(float(r["ci_low"]) <= truth <= float(r["ci_high"]) for r in rows)  # type: ignore[arg-type]


def test_rating_intervals_cover_the_planted_rating_contrast(coverage) -> None:
    hits = _covered(coverage["rate"], RATE)
    estimates = [float(r["estimate"]) for r in coverage["rate"]]  # type: ignore[arg-type]
    print(f"rate +{RATE}: {hits}/{STUDIES} covered, mean estimate {np.mean(estimates):.4f}")
    assert hits >= 0.9 * STUDIES
    assert abs(np.mean(estimates) - RATE) < 3 * np.std(estimates, ddof=1) / np.sqrt(STUDIES)


def test_position_intervals_cover_the_planted_first_listed_gain(coverage) -> None:
    hits = _covered(coverage["gain"], GAIN)
    estimates = [float(r["estimate_positions"]) for r in coverage["gain"]]  # type: ignore[arg-type]
    se = np.mean([float(r["se"]) for r in coverage["gain"]])  # type: ignore[arg-type]
    sd = np.std(estimates, ddof=1)
    print(f"first-listed gain {GAIN}: {hits}/{STUDIES} covered, mean estimate "
          f"{np.mean(estimates):.4f}, SD {sd:.4f}, mean SE {se:.4f}")  # fmt: skip
    assert abs(np.mean(estimates) - GAIN) < 3 * sd / np.sqrt(STUDIES)
    assert hits >= 0.9 * STUDIES


def test_matched_bundles_tie_always_and_disguised_never(coverage) -> None:
    for rates in coverage["ties"]:
        assert rates["demographic_matched"] == 1.0
        assert rates["disguised_demographic"] == rates["disguised_placebo"] == 0.0
