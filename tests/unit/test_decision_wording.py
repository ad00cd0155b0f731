"""The wording arm and its confounded construction, and the paired reasoning rerun (issue 23):
on the simulator, a construction that ties race to the application shows the paper's spurious
reversal between paraphrases and the composition check flags its cells, while the decoupled
arm shows neither; a reasoning-only effect is recovered by the paired comparison and none
reads as none. The interaction fits are checked against R lmerTest."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from cueaudit.config import validate_config
from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.decision.analysis.composition import check_with_flags
from cueaudit.decision.analysis.reasoning import PROMPT, paired_contrasts, shared_rows
from cueaudit.decision.analysis.simulate import build_design, simulate
from cueaudit.decision.analysis.simulation_settings import Extension, SimulationSettings
from cueaudit.decision.analysis.wording import (
    BY_PARAPHRASE,
    INTERACTION,
    reversals,
    wording_contrasts,
)
from cueaudit.decision.composition_checks import CompositionError
from cueaudit.decision.design import RACES
from cueaudit.decision.design_settings import expected_counts
from cueaudit.decision.profiles import load_attribute_list, load_profiles
from cueaudit.decision.prompts import build_decision_prompts
from cueaudit.errors import InputError
from cueaudit.studies import STUDIES
from tests.helpers.decision_analyses import run_on_frames
from tests.r.rscript import run_reference

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
PROFILES = load_profiles(ROOT / "resources/decision/profiles.jsonl")
HIRING = PROFILES.filter(pl.col("domain") == "hiring").sort("tier", "profile_id")
#: Applications of unequal quality within each tier, by their place in it: what the fixed
#: name sets tie race to.
WITHIN_TIER = (0.75, -0.75, 0.0, -1.0)
QUALITY = {p: WITHIN_TIER[i % 4] for i, p in enumerate(HIRING["profile_id"])}
RATE_SCALE = 0.8
WORDING_BASE = {
    "domains": ["hiring"],
    "paraphrases": 1,
    "tasks": ["decision_rate_text"],
    "probe_bundles": 0,
}


def wording_arm(assignment: str) -> Extension:
    return Extension({"paraphrases": 2, "name_assignment": assignment})


def wording_settings() -> SimulationSettings:
    return SimulationSettings(
        design=WORDING_BASE,
        models=("m1",),
        root=str(ROOT),
        extensions={
            "confounded": wording_arm("fixed_per_profile"),
            "decoupled": wording_arm("crossed"),
        },
        profile_quality=QUALITY,
        rate_scale=RATE_SCALE,
        decide_scale=0.2,
        profile_sd=0.1,
        model_sd=0.0,
    )


@pytest.fixture(scope="module")
def wording_frames():
    return simulate(wording_settings(), 0)


def _prompts(design: dict) -> dict[str, pl.DataFrame]:
    pairs = load_name_pairs(ROOT / "resources/names/elder_hayes_pairs.csv")
    hobbies = load_attribute_list(ROOT / "resources/decision/hobbies.txt")
    places = load_attribute_list(ROOT / "resources/decision/neighbourhoods.txt")
    return build_decision_prompts(PROFILES, pairs, hobbies, places, design, "wording")


def test_fixed_name_sets_give_each_profile_one_race_rotated_per_paraphrase() -> None:
    design = {**WORDING_BASE, "paraphrases": 2, "name_assignment": "fixed_per_profile"}
    (table,) = _prompts(design).values()
    assert table.height == expected_counts(design)["decision_rate_text"] == 2 * 12 * 10
    races = table.group_by("paraphrase", "profile_id").agg(pl.col("race").unique())
    assert (races["race"].list.len() == 1).all()  # one race per profile and paraphrase
    shown = {(p, pid): r[0] for p, pid, r in races.iter_rows()}
    for i, pid in enumerate(HIRING["profile_id"]):
        assert shown[("p1", pid)] == RACES[i % 4]
        assert shown[("p2", pid)] == RACES[(i + 1) % 4]
    # every race once per tier: race is tied to the application, not to the tier
    per_tier = table.group_by("paraphrase", "race", "tier").len()
    assert set(per_tier["len"]) == {10}
    assert per_tier.height == 2 * 4 * 3
    crossed = {**design, "name_assignment": "crossed"}
    assert expected_counts(crossed)["decision_rate_text"] == 2 * 12 * 40


def test_the_confounded_construction_shows_a_spurious_reversal_and_is_flagged(
    wording_frames,
) -> None:
    frames = wording_frames
    checked = {
        arm: check_with_flags(frames, arm=arm, confounded=arm == "confounded")
        for arm in ("primary", "confounded", "decoupled")
    }
    table = wording_contrasts(
        frames,
        name_assignments={"confounded": "fixed_per_profile", "decoupled": "crossed"},
        flags=pl.concat([f for _, f in checked.values()]),
    )
    assert set(table["arm"]) == {"confounded", "decoupled"}  # the primary has one paraphrase
    black = table.filter(pl.col("contrast") == "black_vs_white")
    est = {(a, t, p): (e, s) for a, t, p, e, s in black.select(
        "arm", "term", "paraphrase", "estimate", "se").iter_rows()}  # fmt: skip

    # confounded: Black vs White is the quality gap of the applications each race was dealt,
    # 0.8 x (0.75 - -0.75) = +1.2 under p1 and 0.8 x (-1.0 - 0.75) = -1.4 under p2
    p1, p2 = est[("confounded", BY_PARAPHRASE, "p1")], est[("confounded", BY_PARAPHRASE, "p2")]
    assert p1[0] == pytest.approx(1.2, abs=0.25) and p2[0] == pytest.approx(-1.4, abs=0.3)
    assert p1[0] > 1.0 and p2[0] < -1.0  # a reversal, each |estimate| large
    interaction = est[("confounded", INTERACTION, "p2-p1")]
    assert interaction[0] == pytest.approx(-2.6, abs=0.4)
    found = reversals(table, min_size=0.5)
    assert ("confounded", "black_vs_white") in set(
        zip(found["arm"], found["contrast"], strict=True)
    )
    assert "decoupled" not in set(found["arm"])

    # decoupled, the same applications: no contrast, no reversal
    for term, paraphrase in ((BY_PARAPHRASE, "p1"), (BY_PARAPHRASE, "p2"), (INTERACTION, "p2-p1")):
        estimate, se = est[("decoupled", term, paraphrase)]
        assert abs(estimate) < 3 * se < 0.4, (term, paraphrase)
    decoupled = table.filter(pl.col("arm") == "decoupled")
    assert (decoupled["p_value"] > 0.01).all()

    # the composition check flags the confounded arm's profile x race cells, reported
    composition, flags = checked["confounded"]
    failed = composition.filter(~pl.col("passed"))
    design_failed = failed.filter(pl.col("subsample") == "design")
    assert set(zip(design_failed["group"], design_failed["factor"], strict=True)) == {
        ("race", "profile_id")
    }
    assert "confounded by construction" in design_failed["note"][0]
    assert composition.filter((pl.col("subsample") == "design") & (pl.col("factor") == "tier"))[
        "passed"
    ].all()
    cells = flags.filter(pl.col("subsample") == "design")
    assert cells.height == 12 * 4  # every profile x race cell is off its balanced count
    assert set(cells["factor_level"]) == set(HIRING["profile_id"])
    # each profile shows two races (one per paraphrase) with their 10 pairs, the others never
    assert sorted(set(cells["observed"])) == [0, 10] and set(cells["expected"]) == {5.0}
    first = cells.filter(pl.col("factor_level") == HIRING["profile_id"][0])
    assert set(first.filter(pl.col("observed") > 0)["group_level"]) == {"Black", "White"}
    assert table.filter(pl.col("arm") == "confounded")["composition_flagged"].all()
    assert not table.filter(pl.col("arm") == "decoupled")["composition_flagged"].any()
    for arm in ("primary", "decoupled"):
        composition, flags = checked[arm]
        assert composition["passed"].all() and flags.is_empty(), arm


def test_a_confounded_arm_is_reported_only_when_its_design_says_so(
    wording_frames, tmp_path: Path
) -> None:
    def check(confounded: list[str], stop: bool) -> tuple[pl.DataFrame, dict[str, str]]:
        params = {
            "composition_alpha": 0.001,
            "stop_on_differential_nonresponse": stop,
            "confounded_arms": confounded,
        }
        tables, out = run_on_frames("composition", wording_frames, tmp_path, params=params)
        return tables["composition"], out

    table, out = check(["confounded"], stop=True)
    assert not table.filter(pl.col("arm") == "confounded")["passed"].all()
    assert pl.read_csv(out["composition_flags"])["arm"].unique().to_list() == ["confounded"]
    # the same rows, not declared confounded: the design failure stops the job
    with pytest.raises(CompositionError, match=r"arm confounded: judgements .* profile_id"):
        check([], stop=False)


@pytest.mark.slow
def test_the_paraphrase_interaction_equals_lmertest(wording_frames, tmp_path: Path) -> None:
    """The joint fit's paraphrase x group terms against R building the interaction itself."""
    rows = wording_frames.arm("decoupled").judgements.filter(pl.col("y").is_not_null())
    table = wording_contrasts(wording_frames, arms=["decoupled"])
    ours = table.filter(pl.col("term") == INTERACTION)
    data = rows.select(
        "y", "race", "gender", "paraphrase", g_profile="profile_id", g_pair="pair_id"
    ).to_pandas()
    ref = run_reference("interaction_reference.R", "lmerTest", data, tmp_path, "paraphrase")
    names = {
        "black_vs_white": "paraphrasep2:raceBlack",
        "hispanic_vs_white": "paraphrasep2:raceHispanic",
        "asian_vs_white": "paraphrasep2:raceAsian",
        "female_vs_male": "paraphrasep2:genderfemale",
    }
    for contrast, estimate, se, df, p in ours.select(
        "contrast", "estimate", "se", "df", "p_value"
    ).iter_rows():
        name = names[contrast]
        assert estimate == pytest.approx(ref["estimate"][name], abs=1e-6)
        assert se == pytest.approx(ref["se"][name], rel=1e-4)
        assert df == pytest.approx(ref["df"][name], rel=1e-3)
        assert p == pytest.approx(ref["p"][name], rel=1e-3, abs=1e-9)


# --- the paired reasoning rerun --------------------------------------------------------------
REASONING_BASE = {
    "domains": ["hiring"],
    "paraphrases": 1,
    "tasks": ["decision_rate_text", "decision_rank_tool"],
    "bundles_per_type": {"disguised_demographic": 48},
    "probe_bundles": 0,
}
PLANTED = {("hiring", "rate", "black_vs_white"): 0.3, ("hiring", "rank", "female_vs_male"): 0.3}
STUDIES_PER_CASE = 20


def reasoning_settings(planted: dict) -> SimulationSettings:
    return SimulationSettings(
        design=REASONING_BASE,
        models=("m1", "m2"),
        root=str(ROOT),
        extensions={"reasoning_rerun": Extension({}, ("m1-reasoning",))},
        model_planted={"m1-reasoning": planted} if planted else {},
        rate_scale=0.9,
        rank_lapse=0.6,
    )


def _studies(planted: dict) -> pl.DataFrame:
    settings = reasoning_settings(planted)
    design = build_design(settings)
    tables = []
    for seed in range(STUDIES_PER_CASE):
        frames = simulate(settings, seed, design=design)
        tables.append(paired_contrasts(frames, {"reasoning_rerun": "m1"}).with_columns(
            pl.lit(seed).alias("study")))  # fmt: skip
    return pl.concat(tables)


@pytest.mark.slow
@pytest.mark.parametrize("planted", [PLANTED, {}], ids=["reasoning-effect", "none"])
def test_a_reasoning_only_effect_is_recovered_and_none_reads_as_none(planted: dict) -> None:
    results = _studies(planted)
    assert set(results["n_shared"].to_list()) == {480, 48}  # every prompt paired
    assert results["note"].is_null().all()
    truth = pl.Series(
        [
            planted.get(("hiring", f, c), 0.0)
            for f, c in results.select("format", "contrast").iter_rows()
        ]
    )
    results = results.with_columns(truth=truth)
    summary = results.group_by("format", "contrast").agg(
        pl.col("estimate").mean(), pl.col("se").mean(), pl.col("truth").first(),
        pl.col("estimate_on").mean(), pl.col("estimate_off").mean(),
    )  # fmt: skip
    for fmt, contrast, mean, se, true, on, off in summary.iter_rows():
        # the mean of 20 studies' differences within 3.5 of its standard errors of the truth
        assert abs(mean - true) < 3.5 * se / np.sqrt(STUDIES_PER_CASE), (fmt, contrast, mean)
        assert on - off == pytest.approx(mean, abs=1e-9)  # the difference is on minus off
        # reasoning off carries nothing in either case: only the arm's rows were planted
        assert abs(off) < 3.5 * se / np.sqrt(STUDIES_PER_CASE), (fmt, contrast, off)
    covered = (results["ci_low"] <= results["truth"]) & (results["truth"] <= results["ci_high"])
    assert covered.mean() >= 0.88  # 160 nominal-95% intervals
    if planted:
        rate = results.filter(
            (pl.col("format") == "rate") & (pl.col("contrast") == "black_vs_white")
        )
        assert (rate["p_value"] < 0.05).mean() >= 0.6  # 0.3 points against an SE near 0.1


@pytest.mark.slow
def test_the_paired_difference_equals_lmertest(tmp_path: Path) -> None:
    """The joint fit of both arms' shared Rate rows, with a random intercept per prompt."""
    frames = simulate(reasoning_settings(PLANTED), 3)
    rows = shared_rows(frames, "reasoning_rerun", "m1", "hiring", "rate")
    assert rows.group_by(PROMPT).len()["len"].to_list() == [2] * 480
    data = rows.select(
        "y", "race", "gender", "reasoning",
        g_profile="profile_id", g_pair="pair_id", g_prompt=PROMPT,
    ).to_pandas()  # fmt: skip
    ref = run_reference("interaction_reference.R", "lmerTest", data, tmp_path, "reasoning")
    ours = paired_contrasts(frames, {"reasoning_rerun": "m1"}).filter(pl.col("format") == "rate")
    row = ours.filter(pl.col("contrast") == "black_vs_white").row(0, named=True)
    name = "reasoningon:raceBlack"
    assert row["estimate"] == pytest.approx(ref["estimate"][name], abs=1e-6)
    assert row["se"] == pytest.approx(ref["se"][name], rel=1e-4)
    assert row["df"] == pytest.approx(ref["df"][name], rel=1e-3)


# --- the config keys -------------------------------------------------------------------------
def _config() -> dict:
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["models"]["smollm2-reasoning"] = copy.deepcopy(config["models"]["smollm2-135m"])
    config["decision"]["models"] = ["smollm2-135m"]
    return config


def test_the_confounded_construction_is_an_extension_only() -> None:
    config = _config()
    config["decision"]["extensions"] = {
        "wording": {
            "extension": True,
            "design": {"paraphrases": 2, "name_assignment": "fixed_per_profile"},
        }
    }
    validate_config(copy.deepcopy(config), SCHEMA, STUDIES)
    config["decision"]["design"]["name_assignment"] = "fixed_per_profile"
    with pytest.raises(InputError, match=r"decision.design.name_assignment: fixed_per_profile "
                       r"ties race to the application; only an extension arm"):  # fmt: skip
        validate_config(config, SCHEMA, STUDIES)
    config["decision"]["design"]["name_assignment"] = "shuffled"
    with pytest.raises(InputError, match="name_assignment"):
        validate_config(config, SCHEMA, STUDIES)


def test_a_confounded_arm_is_never_pooled_with_the_primary_rows() -> None:
    config = _config()
    confounded = {"paraphrases": 2, "name_assignment": "fixed_per_profile"}
    config["decision"]["extensions"] = {
        "wording": {"extension": True, "pool_with_primary": True, "design": confounded}
    }
    with pytest.raises(InputError, match=r"decision.extensions.wording.pool_with_primary: "
                       r"the arm's name_assignment fixed_per_profile ties race"):  # fmt: skip
        validate_config(copy.deepcopy(config), SCHEMA, STUDIES)
    config["decision"]["extensions"]["wording"]["pool_with_primary"] = False
    validate_config(config, SCHEMA, STUDIES)


def test_paired_with_names_a_primary_model_and_one_other() -> None:
    config = _config()
    rerun = {"extension": True, "models": ["smollm2-reasoning"], "paired_with": "smollm2-135m"}
    config["decision"]["extensions"] = {"reasoning_rerun": rerun}
    validate_config(copy.deepcopy(config), SCHEMA, STUDIES)
    wrong = copy.deepcopy(config)
    wrong["decision"]["extensions"]["reasoning_rerun"]["paired_with"] = "smollm2-reasoning"
    with pytest.raises(InputError) as error:
        validate_config(wrong, SCHEMA, STUDIES)
    assert (
        "config key decision.extensions.reasoning_rerun.paired_with: 'smollm2-reasoning' is not "
        "a model of the pre-registered arm (['smollm2-135m'])"
    ) in str(error.value)
    assert "a paired arm runs one model other than 'smollm2-reasoning'" in str(error.value)
    pooled = copy.deepcopy(config)
    pooled["decision"]["extensions"]["reasoning_rerun"]["pool_with_primary"] = True
    with pytest.raises(InputError, match="compared with the primary rows, not pooled"):
        validate_config(pooled, SCHEMA, STUDIES)


def test_the_paper_config_pairs_the_rerun_and_crosses_the_wording_arm() -> None:
    paper = yaml.safe_load((ROOT / "config/decision/paper.yaml").read_text())
    extensions = paper["decision"]["extensions"]
    assert extensions["reasoning_rerun"]["paired_with"] == "proprietary-a"
    assert extensions["wording"]["design"]["paraphrases"] == 2
    assert extensions["wording"]["design"]["name_assignment"] == "crossed"
    wording = {**paper["decision"]["design"], **extensions["wording"]["design"]}
    assert expected_counts(wording) == {"decision_rate_text": 2 * 12 * 40}
