"""Cues beyond names in the decision audit (``decision.design.cues``): the default design
unchanged, each cue type's prompts, the config checks, and on the simulator the contrasts per
cue type and the convergent validity of the cue types, each shown failing where it should."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import yaml

from cueaudit.config import validate_config
from cueaudit.cues import REGISTRY
from cueaudit.cues.cue_type import DecisionCue
from cueaudit.cues.explicit import explicit_descriptors, race_gender_descriptor
from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.cues.names import load_name_list
from cueaudit.decision.aid import NAME_PLACEHOLDER, neutral_appeal, with_aid
from cueaudit.decision.analysis.cue_contrasts import (
    ALL_MODELS,
    CUE_CONTRASTS_SCHEMA,
    CUE_VALIDITY_SCHEMA,
    cue_contrasts,
    cue_validity,
    deviations,
)
from cueaudit.decision.analysis.design_matrix import default_contrasts
from cueaudit.decision.analysis.frames import SCHEMAS, AnalysisFrames
from cueaudit.decision.analysis.simulate import build_design, simulate
from cueaudit.decision.analysis.simulation_settings import Extension, SimulationSettings
from cueaudit.decision.cue_signals import (
    CueResources,
    check_decision_cues,
    cue_resources,
    translate_appeals,
)
from cueaudit.decision.design_settings import (
    DesignSettings,
    expected_counts,
    expected_counts_by_cue,
    listed_cues,
)
from cueaudit.decision.formats import (
    AID_DOMAIN,
    Candidate,
    load_prompt_resources,
    render_single,
)
from cueaudit.decision.profiles import load_attribute_list, load_profiles
from cueaudit.decision.prompts import build_decision_prompts
from cueaudit.decision.study import STUDY
from cueaudit.errors import InputError
from cueaudit.stats.correlation import fisher_z_mean
from cueaudit.studies import STUDIES
from tests.helpers.fairfund_stimuli import write_stimuli
from tests.helpers.prompt_digests import FIXTURE, digests, fairfund_stimuli
from tests.unit.test_decision_planner import HIRING as PLANNER_HIRING
from tests.unit.test_decision_prompts import SMALL

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = str(ROOT / "resources/decision/prompts.yaml")
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
ROSENMAN = ROOT / "resources/names/rosenman.csv"
ALL_CUES = ["name_pair", "first_name", "explicit"]
#: The default run's small hiring design with two names per cell.
HIRING = {**SMALL, "domains": ["hiring"], "names_per_cell": 2}
AID = {
    "prompts": PROMPTS,
    "domains": [AID_DOMAIN],
    "paraphrases": 1,
    "profiles_per_tier": 2,
    "names_per_cell": 1,
    "tasks": ["decision_rate_text"],
    "cues": ["name_pair", "first_name", "explicit", "dialect"],
}


def _resources() -> tuple[pl.DataFrame, pl.DataFrame, list[str], list[str]]:
    profiles = load_profiles(ROOT / "resources/decision/profiles.jsonl")
    pairs = load_name_pairs(ROOT / "resources/names/elder_hayes_pairs.csv")
    hobbies = load_attribute_list(ROOT / "resources/decision/hobbies.txt")
    neighbourhoods = load_attribute_list(ROOT / "resources/decision/neighbourhoods.txt")
    return profiles, pairs, hobbies, neighbourhoods


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z']+", text))


# --- (d) the default design is unchanged ---------------------------------------------------
def test_the_default_design_keeps_every_prompt_id_and_text() -> None:
    """The default run's and the paper's prompt tables, ids and texts, are those of the code
    before the cue factor (tests/fixtures/decision_prompt_digests.json)."""
    before = json.loads(FIXTURE.read_text(encoding="utf-8"))
    now = digests()
    assert set(now) <= set(before)
    assert now == {key: before[key] for key in now}
    # the default run's 8 tables and the paper's 16 (its 2 aid tables where FairFund's are)
    assert len(now) == len(before) - 2 * (fairfund_stimuli() is None)
    assert DesignSettings.of({}).cues == ("name_pair",)
    assert expected_counts_by_cue(HIRING) == {"name_pair": expected_counts(HIRING)}


def test_a_digest_notices_one_changed_prompt(tmp_path: Path) -> None:
    """The digest check itself fails on a changed prompt (a cue id in a name-pair uid)."""
    profiles, pairs, hobbies, neighbourhoods = _resources()
    design = {**HIRING, "tasks": ["decision_rate_text"]}
    table = build_decision_prompts(profiles, pairs, hobbies, neighbourhoods, design)[
        "decision_rate_text"
    ]
    before = json.loads(FIXTURE.read_text(encoding="utf-8"))
    moved = table.with_columns(pl.col("prompt_uid").str.replace(r"^.", "0"))
    assert table["cue"].unique().to_list() == ["name_pair"]
    assert _digest(table) != _digest(moved)
    assert "config/decision_rate_text" in before


def _digest(table: pl.DataFrame) -> str:
    import hashlib

    h = hashlib.sha256()
    for uid, text in table.select("prompt_uid", "text").iter_rows():
        h.update(f"{uid}\t{hashlib.sha256(text.encode()).hexdigest()}\n".encode())
    return h.hexdigest()


# --- (b) each cue type's prompts -----------------------------------------------------------
@pytest.fixture(scope="module")
def hiring() -> dict[str, pl.DataFrame]:
    profiles, pairs, hobbies, neighbourhoods = _resources()
    design = {**HIRING, "cues": ALL_CUES}
    resources = cue_resources(listed_cues([design]), profiles, first_names=ROSENMAN)
    tables = build_decision_prompts(
        profiles, pairs, hobbies, neighbourhoods, design, "cues", cue_resources=resources
    )
    expected = expected_counts_by_cue(design)
    for cue, counts in expected.items():
        for task, n in counts.items():
            assert tables[f"{task}__cues"].filter(pl.col("cue") == cue).height == n
    return {t.removesuffix("__cues"): table for t, table in tables.items()}


def test_counts_per_cue_type() -> None:
    counts = expected_counts_by_cue({**HIRING, "cues": ALL_CUES})
    # 3 profiles; name pairs 4 races x 2 genders x 2; first names 2 x 2 x 2; explicit 4 x 2
    assert counts["name_pair"]["decision_rate_text"] == 3 * 16
    assert counts["first_name"]["decision_rate_text"] == 3 * 8
    assert counts["explicit"]["decision_rate_text"] == 3 * 8
    assert counts["first_name"]["decision_rank_json"] == 0
    assert counts["explicit"]["decision_rank_json"] == counts["name_pair"]["decision_rank_json"]
    assert expected_counts({**HIRING, "cues": ALL_CUES})["decision_rate_text"] == 3 * 32


def test_first_name_rows_show_a_listed_first_name_of_two_races(
    hiring: dict[str, pl.DataFrame],
) -> None:
    pairs = load_name_pairs(ROOT / "resources/names/elder_hayes_pairs.csv")
    surnames = set(pairs["last"])
    listed = {(n, r, g) for n, r, g, _ in load_name_list(ROSENMAN).rows()}
    rows = hiring["decision_rate_text"].filter(pl.col("cue") == "first_name")
    assert set(rows["race"]) == {"Black", "White"} and set(rows["gender"]) == {"female", "male"}
    shown = set()
    for row in rows.iter_rows(named=True):
        name = re.search(r"\nApplicant: (\S+)\n", row["text"]).group(1)  # type: ignore[union-attr]
        assert (name, row["race"], row["gender"]) in listed
        assert row["pair_id"].endswith(f"/{name.lower()}")
        assert not _words(row["text"]) & surnames
        shown.add(name)
    assert len(shown) == 2 * 2 * 2  # names_per_cell names of each race x gender


def test_explicit_rows_state_race_and_gender_and_show_no_name(
    hiring: dict[str, pl.DataFrame],
) -> None:
    pairs = load_name_pairs(ROOT / "resources/names/elder_hayes_pairs.csv")
    names = set(pairs["first"]) | set(pairs["last"])
    rows = hiring["decision_decide_tool"].filter(pl.col("cue") == "explicit")
    assert rows.height == 3 * 8
    for row in rows.iter_rows(named=True):
        statement = f"The applicant is {race_gender_descriptor(row['race'], row['gender'])}."
        assert f"\nApplicant: name not shown\n{statement}\nPosition applied for:" in row["text"]
        assert not _words(row["text"]) & names
    texts = rows.filter((pl.col("race") == "Black") & (pl.col("gender") == "female"))["text"]
    assert all("The applicant is a Black female." in t for t in texts)
    # the probing study's own descriptor where it has one, its construction where not
    own = set(explicit_descriptors(["race_gender"])["descriptor"])
    assert race_gender_descriptor("White", "male") in own
    assert race_gender_descriptor("Asian", "male") == "an Asian male" not in own


def test_explicit_bundles_are_the_name_pair_bundles_restated(
    hiring: dict[str, pl.DataFrame],
) -> None:
    rank = hiring["decision_rank_json"]
    by_cue = {c: rank.filter(pl.col("cue") == c) for c in ("name_pair", "explicit")}
    assert set(rank["cue"]) == {"name_pair", "explicit"}
    key = ["bundle_id", "candidates_race", "candidates_gender", "candidates_profile_id"]
    assert (
        by_cue["name_pair"]
        .select(key)
        .sort("bundle_id")
        .equals(by_cue["explicit"].select(key).sort("bundle_id"))
    )
    assert not set(by_cue["name_pair"]["prompt_uid"]) & set(by_cue["explicit"]["prompt_uid"])
    for row in by_cue["explicit"].iter_rows(named=True):
        statements = re.findall(r"The applicant is (an? [A-Za-z]+ (?:female|male))\.", row["text"])
        expected = [
            race_gender_descriptor(r, g)
            for r, g in zip(row["candidates_race"], row["candidates_gender"], strict=True)
        ]
        assert statements == expected
        assert row["text"].count("Applicant: name not shown") == 4
    probes = hiring["decision_probe_choice"]
    assert probes.group_by("cue").len().sort("cue").rows() == [("explicit", 16), ("name_pair", 16)]


def test_template_check_of_the_cue_lines(tmp_path: Path) -> None:
    text = Path(PROMPTS).read_text(encoding="utf-8")
    broken = tmp_path / "prompts.yaml"
    for line, wrong, message in (
        ("The applicant is {descriptor}.", "The applicant.", r"must show \{descriptor\}"),
        ("Applicant: name not shown", "Applicant: {name}", r"unknown field \{name\}"),
    ):
        broken.write_text(text.replace(f'hiring: "{line}"', f'hiring: "{wrong}"'), "utf-8")
        with pytest.raises(InputError, match=message) as raised:
            load_prompt_resources(broken)
        key = "explicit_line" if "descriptor" in line else "unnamed_line"
        assert raised.value.field == f"cue_lines.{key}.hiring"
    # a file without cue_lines serves name pairs, and names the key when a cue needs it
    start = text.index("cue_lines:")
    broken.write_text(text[:start] + text[text.index("# Fields: {value}.") :], encoding="utf-8")
    resources = load_prompt_resources(broken)
    candidate = Candidate(None, "Nurse", "Ten years on a ward.", descriptor="a Black female")
    with pytest.raises(InputError, match="needs the file's cue_lines") as raised:
        render_single(
            resources, domain="hiring", fmt="rate", mode="text", paraphrase="p1",
            candidate=candidate,
        )  # fmt: skip
    assert raised.value.field == "cue_lines.unnamed_line"


def _aid_tables(stimuli: Path) -> tuple[dict[str, pl.DataFrame], pl.DataFrame]:
    profiles, pairs, _, _ = _resources()
    profiles, appeals = with_aid(profiles, pairs, stimuli, [AID_DOMAIN])
    resources = cue_resources(
        listed_cues([AID]), profiles, first_names=ROSENMAN, dialect_cache=":memory:"
    )
    tables = build_decision_prompts(
        profiles, pairs, [], [], AID, "cues", appeals=appeals, cue_resources=resources
    )
    return {t.removesuffix("__cues"): v for t, v in tables.items()}, profiles


def _check_aid_cues(stimuli: Path) -> None:
    tables, profiles = _aid_tables(stimuli)
    rate = tables["decision_rate_text"]
    names = pl.read_csv(stimuli).select("first", "last")
    first, last = set(names["first"]), set(names["last"])
    masked = dict(profiles.select("profile_id", "text").rows())
    dialect = rate.filter(pl.col("cue") == "dialect")
    assert dialect.height == 2 * 6 and dialect["gender"].null_count() == dialect.height
    changed = 0
    for profile, rows in dialect.partition_by("profile_id", as_dict=True).items():
        by_race = dict(rows.select("race", "text").rows())
        assert set(by_race) == {"Black", "White"}
        original = neutral_appeal(masked[profile[0]], profile[0])
        assert f"\n\n{original}\n\n" in by_race["White"]  # the appeal as written, unnamed
        changed += by_race["Black"] != by_race["White"]
        for text in by_race.values():
            assert not _words(text) & (first | last) and NAME_PLACEHOLDER not in text
    assert changed >= 3  # the rule-based translator rewrote most appeals into AAVE
    explicit = rate.filter(pl.col("cue") == "explicit")
    for row in explicit.iter_rows(named=True):
        descriptor = race_gender_descriptor(row["race"], row["gender"])
        assert f"The person asking for help is {descriptor}.\n" in row["text"]
        assert not _words(row["text"]) & (first | last)
    shown = rate.filter(pl.col("cue") == "first_name")
    for row in shown.iter_rows(named=True):
        assert row["pair_id"].split("/")[-1] in row["text"].lower()
        assert not _words(row["text"]) & last


def test_aid_cues_on_appeals_in_fairfund_format(tmp_path: Path) -> None:
    """Dialect (AAVE against the original), explicit and first-name cues on appeals written in
    FairFund's format; the names are taken out of every appeal whose cue is not a name."""
    _check_aid_cues(write_stimuli(tmp_path / "stimuli.csv"))


def test_aid_cues_on_fairfund_own_appeals() -> None:
    stimuli = fairfund_stimuli()
    if stimuli is None:
        pytest.skip("FairFund-Bench's stimuli.csv is not in /work/shared/data/fairfund")
    _check_aid_cues(stimuli)
    tables, _ = _aid_tables(stimuli)
    aave = tables["decision_rate_text"].filter(
        (pl.col("cue") == "dialect") & (pl.col("race") == "Black")
    )
    assert any("in' " in t for t in aave["text"])  # g-dropping, one of the rules


def test_an_appeal_that_names_its_writer_otherwise_is_refused() -> None:
    assert neutral_appeal("Hello! I'm [name] and I need rent.", "aid/x") == "Hello! I need rent."
    with pytest.raises(InputError, match="aid/x: cannot take the name out"):
        neutral_appeal("Dear donors, [name] here. I need rent.", "aid/x")
    with pytest.raises(InputError, match="more than once"):
        neutral_appeal("My name is [name] and I need rent. Thanks, [name]", "aid/x")
    profiles = pl.DataFrame(
        {"profile_id": ["aid/x"], "domain": [AID_DOMAIN], "text": ["Signed, [name]."]}
    )
    with pytest.raises(InputError, match="aid/x"):
        translate_appeals(profiles, {}, cache=":memory:")


# --- (c) the config checks -------------------------------------------------------------------
def _config() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "config/config.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"cues": ["name_pair", "accent"]},
            r"decision\.extensions\.cues\.design\.cues: unknown cue type 'accent' \(the cue "
            r"registry's decision cues: name_pair, first_name, dialect, explicit\)",
        ),
        (
            {"cues": ["name_pair", "dialect"]},
            r"decision\.extensions\.cues\.design\.cues: the dialect cue shows a candidate's own "
            r"words: only domains with first-person text \(aid\) have them, not hiring",
        ),
        (
            {"cues": ["first_name"], "tasks": ["decision_rank_json"]},
            r"decision\.extensions\.cues\.design\.cues: decision_rank_json shows four-race "
            r"bundles, and cues \['first_name'\] signal fewer races",
        ),
        (
            {"cues": ["name_pair", "explicit"], "name_assignment": "fixed_per_profile"},
            r"decision\.extensions\.cues\.design\.cues: name_assignment fixed_per_profile deals "
            r"out name pairs",
        ),
    ],
)
def test_a_cue_an_arm_cannot_show_is_refused_naming_the_key(
    change: dict[str, Any], message: str
) -> None:
    config = _config()
    validate_config(copy.deepcopy(config), SCHEMA, STUDIES)  # the default run's arm is fine
    config["decision"]["extensions"]["cues"]["design"].update(change)
    with pytest.raises(InputError, match=message):
        validate_config(config, SCHEMA, STUDIES)


def test_the_pre_registered_design_stays_on_name_pairs() -> None:
    config = _config()
    config["decision"]["design"]["cues"] = ["name_pair", "explicit"]
    with pytest.raises(
        InputError,
        match=r"config key decision\.design\.cues: \['explicit'\] in the pre-registered design; "
        r"its planned family is on name pairs",
    ):
        validate_config(config, SCHEMA, STUDIES)
    config["decision"]["design"]["cues"] = ["name_pair"]
    validate_config(config, SCHEMA, STUDIES)


def test_first_names_are_an_input_file_only_when_a_cue_uses_them() -> None:
    config = _config()
    validate_config(config, SCHEMA, STUDIES)
    assert ("decision.first_names", "resources/names/rosenman.csv") in list(
        STUDY.resource_paths(config)
    )
    config["decision"]["extensions"] = {}
    assert "decision.first_names" not in dict(STUDY.resource_paths(config))


# --- (a) the simulator: contrasts per cue type and their convergent validity ----------------
RATE = ("hiring", "rate", "black_vs_white")
RANK = ("hiring", "rank", "black_vs_white")
#: The planner's hiring design (12 profiles, 5 name pairs per cell, 48 disguised bundles) with
#: Rate and Rank each in two modes.
SIMULATED = {
    **PLANNER_HIRING,
    "tasks": [
        *("decision_rate_text", "decision_rate_tool"),
        *("decision_rank_json", "decision_rank_tool"),
    ],
}


def _settings(**generative: Any) -> SimulationSettings:
    """Hiring Rate and disguised Rank (12 profiles, 5 name pairs per cell, 48 bundles; text and
    tool / JSON and tool; two models, two seeds) under every cue type that shows both."""
    extension = Extension({"cues": ALL_CUES})
    defaults = {"rate_scale": 0.5, "rank_lapse": 0.9}
    return SimulationSettings(
        design=SIMULATED,
        models=("m1", "m2"),
        seeds=tuple(range(generative.pop("n_seeds", 2))),
        extensions={"cues": extension},
        **(defaults | generative),
    )


def _estimates(table: pl.DataFrame, fmt: str, contrast: str = "black_vs_white") -> dict[str, float]:
    rows = table.filter(
        (pl.col("format") == fmt)
        & (pl.col("contrast") == contrast)
        & (pl.col("estimator") == "lmm")
    )
    return dict(rows.select("cue", "estimate").rows())


def test_a_cue_type_effect_is_recovered_on_its_own_rows_and_never_pooled() -> None:
    """The same effect planted under first names and explicit descriptors (and none under the
    name pairs): each cue type's contrast recovers its own plant."""
    settings = _settings(
        cue_planted={
            "first_name": {RATE: 0.3},
            "explicit": {RATE: 0.3, RANK: 0.3},
        }
    )
    design = build_design(settings)
    rate: dict[str, list[float]] = {}
    rank: dict[str, list[float]] = {}
    for seed in range(8):
        table = cue_contrasts(simulate(settings, seed, design=design))
        for cue, value in _estimates(table, "rate").items():
            rate.setdefault(cue, []).append(value)
        for cue, value in _estimates(table, "rank").items():
            rank.setdefault(cue, []).append(value)
    # within three SEs of the mean over 8 studies (per-study SDs over 20 studies: first names
    # 0.03, explicit 0.073 (a descriptor per cell, so 8 signals), name pairs 0.027; rank 0.10)
    means = {cue: float(np.mean(v)) for cue, v in rate.items()}
    assert means["first_name"] == pytest.approx(0.3, abs=0.04)
    assert means["explicit"] == pytest.approx(0.3, abs=0.08)
    assert means["name_pair"] == pytest.approx(0.0, abs=0.04)
    assert float(np.mean(rank["explicit"])) == pytest.approx(0.3, abs=0.11)
    assert float(np.mean(rank["name_pair"])) == pytest.approx(0.0, abs=0.11)
    # first names signal Black and White only: no Hispanic or Asian contrast, no rank cell
    table = cue_contrasts(simulate(settings, 0, design=design))
    assert table.columns == list(CUE_CONTRASTS_SCHEMA)
    first = table.filter(pl.col("cue") == "first_name")
    assert set(first["contrast"]) == {"black_vs_white", "female_vs_male"}
    assert set(first["format"]) == {"rate"}
    assert table["composition_passed"].all()
    assert set(table["label"]) == {"exploratory: arm 'cues' is not the pre-registered design"}


def _validity(frames: AnalysisFrames, fmt: str = "rate") -> dict[tuple[str, str], float]:
    table = cue_validity(frames)
    rows = table.filter(
        (pl.col("format") == fmt)
        & (pl.col("contrast") == "black_vs_white")
        & (pl.col("model") == ALL_MODELS)
    )
    return {(a, b): r for a, b, r in rows.select("cue_a", "cue_b", "r").rows()}


def test_convergent_validity_follows_the_planted_agreement_of_the_cue_types() -> None:
    """A per-profile disparity planted alike under every cue type correlates clearly
    positively across cue types, planted with the opposite sign under explicit descriptors
    negatively for the pairs with them, and none planted gives correlations near zero, where
    the check of convergence (r > 0.5) fails."""
    disparity = {RATE: 0.5, RANK: 0.3}
    more = {"n_seeds": 4, "rank_lapse": 1.0}  # the rank plant needs every answer to lapse
    cases = {
        "same": _settings(profile_disparity_sd=disparity, **more),
        "opposite": _settings(
            profile_disparity_sd=disparity, cue_disparity={"explicit": -1.0}, **more
        ),
        "none": _settings(**more),
    }
    found: dict[str, dict[tuple[str, ...], list[float]]] = {}
    for case, settings in cases.items():
        design = build_design(settings)
        for seed in range(4):
            frames = simulate(settings, seed, design=design)
            for pair, r in _validity(frames).items():
                found.setdefault(case, {}).setdefault(pair, []).append(r)
            for pair, r in _validity(frames, "rank").items():
                found[case].setdefault(("rank", *pair), []).append(r)
    mean = {c: {p: float(np.mean(v)) for p, v in pairs.items()} for c, pairs in found.items()}
    same, opposite, none = mean["same"], mean["opposite"], mean["none"]
    assert same[("name_pair", "first_name")] > 0.5
    assert same[("name_pair", "explicit")] > 0.5
    assert same[("first_name", "explicit")] > 0.5
    assert same[("rank", "name_pair", "explicit")] > 0.2
    assert opposite[("name_pair", "first_name")] > 0.5
    assert opposite[("name_pair", "explicit")] < -0.5
    assert opposite[("first_name", "explicit")] < -0.5
    assert opposite[("rank", "name_pair", "explicit")] < -0.2
    assert all(abs(r) < 0.3 for r in none.values())
    assert not any(r > 0.5 for r in none.values())  # the convergence check fails here


def test_per_bundle_deviations_would_correlate_the_cue_types_without_any_disparity() -> None:
    """Why the rank unit is the profile: per disguised bundle, the focal and reference
    candidates show different profiles, whose quality difference every cue type shares, so
    their deviations correlate with no disparity planted at all."""
    settings = _settings(rank_lapse=0.25, rank_noise_sd=0.5)
    design = build_design(settings)
    spec = next(c for c in default_contrasts() if c.contrast == "black_vs_white")
    by_bundle, by_profile = [], []
    for seed in range(3):
        frames = simulate(settings, seed, design=design)
        units = {}
        for unit in ("bundle", "profile"):
            a, b = (
                deviations(frames.arm("cues", cue), "hiring", "rank", spec, unit)
                .group_by("unit_id")
                .agg(pl.col("deviation").mean())
                .sort("unit_id")
                for cue in ("name_pair", "explicit")
            )
            units[unit] = float(np.corrcoef(a["deviation"], b["deviation"])[0, 1])
        by_bundle.append(units["bundle"])
        by_profile.append(units["profile"])
    assert float(np.mean(by_bundle)) > 0.5
    assert abs(float(np.mean(by_profile))) < 0.3


def test_the_validity_table_averages_models_on_the_fisher_z_scale() -> None:
    settings = _settings(profile_disparity_sd={RATE: 0.5})
    table = cue_validity(simulate(settings, 0))
    assert table.columns == list(CUE_VALIDITY_SCHEMA)
    rows = table.filter(
        (pl.col("format") == "rate")
        & (pl.col("contrast") == "black_vs_white")
        & (pl.col("cue_a") == "name_pair")
        & (pl.col("cue_b") == "explicit")
    )
    per_model = rows.filter(pl.col("model") != ALL_MODELS)
    assert sorted(per_model["model"]) == ["m1", "m2"] and set(per_model["n"]) == {12}
    averaged = rows.filter(pl.col("model") == ALL_MODELS).row(0, named=True)
    assert averaged["r"] == pytest.approx(
        float(np.tanh(np.mean(np.arctanh(per_model["r"].to_numpy()))))
    )
    assert averaged["r"] == pytest.approx(fisher_z_mean(per_model["r"].to_numpy()))
    assert averaged["ci_low"] < averaged["r"] < averaged["ci_high"]
    # dialect-free, two-race first names have no Hispanic pair; gender pairs need genders
    assert "hispanic_vs_white" not in set(table.filter(pl.col("cue_a") == "first_name")["contrast"])
    # only arms that show a cue type beyond name pairs
    assert set(table["arm"]) == {"cues"}


def test_a_cue_subsample_that_lost_its_balance_fails_its_composition_check() -> None:
    """Composition per cue type: first-name answers about Black applicants of two profiles
    dropped (as a refusal pattern would) fail that cue type's check, naming the cells; the
    other cue types' checks pass."""
    settings = _settings()
    frames = simulate(settings, 0)
    profiles = sorted(set(frames.judgements["profile_id"]))[:2]
    lost = (
        (pl.col("cue") == "first_name")
        & (pl.col("race") == "Black")
        & pl.col("profile_id").is_in(profiles)
    )
    broken = AnalysisFrames(
        frames.judgements.with_columns(y=pl.when(lost).then(None).otherwise(pl.col("y"))),
        frames.rankings,
        frames.probes,
    )
    table = cue_contrasts(broken).filter(pl.col("format") == "rate")
    status = dict(table.select("cue", "composition_passed").unique().rows())
    assert status == {"name_pair": True, "first_name": False, "explicit": True}
    note = table.filter(pl.col("cue") == "first_name")["composition_note"][0]
    assert "cue first_name" in note and "race depends on profile_id" in note


def test_cue_resources_come_only_for_the_cue_types_listed() -> None:
    profiles, *_ = _resources()
    assert cue_resources(listed_cues([HIRING]), profiles) == CueResources(None, None)
    with pytest.raises(InputError, match="the first_name cue needs its names"):
        build_decision_prompts(*_resources(), {**HIRING, "cues": ["name_pair", "first_name"]})


def test_a_cell_fitted_exactly_is_refused_with_its_reason() -> None:
    """Four parsed first-name ratings that three coefficients fit exactly (the default run's
    SmolLM2 gave such a cell) leave no residual variance: every contrast is NaN with the
    reason, where the Satterthwaite test used to fail inside its deviance Hessian. A fit with
    a residual but none to spare is refused as "fitted exactly" (fitters.py)."""
    shown = [
        ("p5", "black/male/a", "Black", "male", 3.0),
        ("p1", "black/female/b", "Black", "female", 1.0),
        ("p1", "black/male/a", "Black", "male", 3.0),
        ("p1", "white/female/c", "White", "female", 5.0),
    ]
    common = {
        "model": "m1", "seed": 0, "task": "decision_rate_text__cues", "arm": "cues",
        "cue": "first_name", "domain": "hiring", "mode": "text", "paraphrase": "p1",
        "format": "rate", "tier": "clear_yes",
    }  # fmt: skip
    rows = [
        common
        | {"prompt_uid": str(i), "profile_id": p, "pair_id": k, "race": r, "gender": g}
        | {"y": y}
        for i, (p, k, r, g, y) in enumerate(shown)
    ]
    frames = AnalysisFrames(
        pl.DataFrame(rows, schema=SCHEMAS["judgements"]),
        pl.DataFrame(schema=SCHEMAS["rankings"]),
        pl.DataFrame(schema=SCHEMAS["probes"]),
    )
    table = cue_contrasts(frames)
    assert table.height == 2 and table["estimate"].is_nan().all()
    # four answers for three coefficients leave one residual degree of freedom: refused
    # before the fit (whether the fit then met a singular criterion depended on the BLAS)
    assert set(table["note"]) == {
        "mixed model: not identifiable from 4 observations for 3 fixed effects and 5 random "
        "levels (fewer than two residual degrees of freedom)"
    }
    # one more answer off the fit: a residual, and estimates again
    extra = common | {"prompt_uid": "4", "profile_id": "p5", "pair_id": "white/female/c"}
    more = pl.DataFrame(
        [*rows, extra | {"race": "White", "gender": "female", "y": 2.0}],
        schema=SCHEMAS["judgements"],
    )
    table = cue_contrasts(AnalysisFrames(more, frames.rankings, frames.probes))
    assert table["estimate"].is_finite().all()


def test_a_cue_that_would_borrow_another_cues_resource_is_refused() -> None:
    cues = REGISTRY.decision_cues()
    assert check_decision_cues(cues) == cues
    accent = DecisionCue("accent", shows="own_words", races=("Black", "White"), genders=())
    with pytest.raises(ValueError, match="'accent' shows 'own_words', which only 'dialect' can"):
        check_decision_cues({**cues, "accent": accent})
    stated = DecisionCue("accent", shows="statement", races=("Black",), descriptor=lambda r, g: "x")
    assert "accent" in check_decision_cues({**cues, "accent": stated})
