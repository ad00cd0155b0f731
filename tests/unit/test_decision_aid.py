"""The aid domain on FairFund-Bench's stimuli: the loader, the design's counts, the prompts'
construction (the name inside the appeal) and the replication table's direction logic on a
simulated study with a planted sign."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.decision.aid import CATEGORY_TIERS, aid_stimuli, with_aid
from cueaudit.decision.analysis.replication import (
    PUBLISHED_VALUES,
    PublishedContrast,
    aid_replication,
    direction_agrees,
    load_published,
    published_in_interval,
)
from cueaudit.decision.analysis.simulate import simulate
from cueaudit.decision.analysis.simulation_settings import SimulationSettings
from cueaudit.decision.build import write_decision_prompts
from cueaudit.decision.design_settings import expected_counts
from cueaudit.decision.fairfund import FAIRFUND_VALUES, load_fairfund_stimuli
from cueaudit.decision.formats import AID_DOMAIN
from cueaudit.decision.profiles import PROFILE_SCHEMA, load_profiles
from cueaudit.decision.prompts import build_decision_prompts
from cueaudit.errors import InputError
from tests.conftest import ROOT
from tests.helpers.fairfund_stimuli import NAME_PAIRS, write_stimuli

#: FairFund's own stimuli, where the workspace keeps them (``../shared/data/fairfund``).
FAIRFUND = ROOT.parent / "shared/data/fairfund/stimuli.csv"
PROMPTS = str(ROOT / "resources/decision/prompts.yaml")
NO_PROFILES = pl.DataFrame(schema=PROFILE_SCHEMA)
AID_DESIGN = {
    "prompts": PROMPTS,
    "domains": [AID_DOMAIN],
    "paraphrases": 1,
    "profiles_per_tier": 10,  # every scenario x framing of the two scenarios per category
    "names_per_cell": 1,
    "bundles_per_type": {"demographic_matched": 8, "disguised_demographic": 24},
    "probe_bundles": 0,
    "tasks": ["decision_rate_text", "decision_rank_text", "decision_rank_json"],
}


@pytest.fixture(scope="module")
def stimuli_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_stimuli(tmp_path_factory.mktemp("fairfund") / "stimuli.csv")


@pytest.fixture(scope="module")
def tables(stimuli_path: Path) -> dict[str, pl.DataFrame]:
    pairs = load_name_pairs(NAME_PAIRS)
    profiles = load_profiles(ROOT / "resources/decision/profiles.jsonl")
    profiles, appeals = with_aid(profiles, pairs, stimuli_path, [AID_DOMAIN])
    return build_decision_prompts(profiles, pairs, [], [], AID_DESIGN, "aid_test", appeals=appeals)


def test_a_stimuli_file_without_a_column_is_refused_naming_file_and_column(
    tmp_path: Path, stimuli_path: Path
) -> None:
    header, *rows = stimuli_path.read_text(encoding="utf-8").splitlines()
    broken = tmp_path / "stimuli.csv"
    # scenario_label holds no comma, so dropping the fourth field of each line drops it
    cut = [",".join(line.split(",")[:3] + line.split(",")[4:]) for line in [header, *rows[:3]]]
    broken.write_text("\n".join(cut) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as raised:
        load_fairfund_stimuli(broken)
    assert raised.value.source == str(broken)
    assert raised.value.field == "scenario_label"
    assert "required column missing" in str(raised.value)
    # the aid domain without a stimuli file says which config key to set
    pairs = load_name_pairs(NAME_PAIRS)
    with pytest.raises(InputError, match=r"set decision\.fairfund_stimuli"):
        with_aid(NO_PROFILES, pairs, None, ["hiring", AID_DOMAIN])


def test_aid_profiles_are_scenario_by_framing_and_appeals_cover_every_name(
    stimuli_path: Path,
) -> None:
    pairs = load_name_pairs(NAME_PAIRS)
    stimuli = aid_stimuli(stimuli_path, pairs)
    assert stimuli.height == 3 * 2 * 5 * 40 and stimuli["pair_id"].null_count() == 0
    profiles, appeals = with_aid(NO_PROFILES, pairs, stimuli_path, [AID_DOMAIN])
    assert profiles.height == 30 and appeals is not None and appeals.height == 1200
    assert profiles["profile_id"][0] == "aid/med_01/no_cause"
    assert dict(profiles.group_by("tier").len().iter_rows()) == dict.fromkeys(
        CATEGORY_TIERS.values(), 10
    )
    assert not any("Hi, my name is [name]" not in t for t in profiles["text"])
    # without the aid domain nothing is read
    assert with_aid(profiles, pairs, None, ["hiring"]) == (profiles, None)


def test_counts_equal_the_rows_built(tables: dict[str, pl.DataFrame]) -> None:
    expected = expected_counts(AID_DESIGN)
    assert expected == {
        "decision_rate_text": 3 * 10 * 8,
        "decision_rank_text": 32,
        "decision_rank_json": 32,
    }
    assert {t.removesuffix("__aid_test"): v.height for t, v in tables.items()} == expected


def test_rate_prompts_show_each_grid_cell_with_the_name_inside_its_appeal(
    tables: dict[str, pl.DataFrame], stimuli_path: Path
) -> None:
    rate = tables["decision_rate_text__aid_test"]
    stimuli = aid_stimuli(stimuli_path, load_name_pairs(NAME_PAIRS))
    appeal_of = {(p, k): t for p, k, t in stimuli.select("profile_id", "pair_id", "text").rows()}
    names = dict(stimuli.select("pair_id", "full_name").unique().rows())
    cells = set()
    for row in rate.iter_rows(named=True):
        appeal = appeal_of[(row["profile_id"], row["pair_id"])]
        name = names[row["pair_id"]]
        # instruction, the appeal as FairFund wrote it (its name inside), the answer line
        assert f"\n\n{appeal}\n\n" in row["text"]
        assert f"Hi, my name is {name} and" in row["text"]
        assert "Applicant:" not in row["text"] and "[name]" not in row["text"]
        assert row["text"].startswith("You are helping a charity")
        _, scenario, framing = row["profile_id"].split("/")
        cells.add((scenario, framing, row["race"], row["gender"]))
    grid = {
        (f"{p}_{k:02d}", f, r, g)
        for p in ("med", "rent", "edu")
        for k in (1, 2)
        for f in FAIRFUND_VALUES["framing"]
        for r in FAIRFUND_VALUES["race"]
        for g in ("female", "male")
    }
    assert cells == grid and rate.height == len(grid)


def test_rank_prompts_show_four_appeals_in_their_order(
    tables: dict[str, pl.DataFrame], stimuli_path: Path
) -> None:
    rank = tables["decision_rank_text__aid_test"]
    names = dict(
        aid_stimuli(stimuli_path, load_name_pairs(NAME_PAIRS))
        .select("pair_id", "full_name")
        .unique()
        .rows()
    )
    for row in rank.iter_rows(named=True):
        text = row["text"]
        starts = [text.index(f"Candidate {label}\nHi, my name is") for label in "ABCD"]
        assert starts == sorted(starts)
        shown = [names[k] for k in row["candidates_pair_id"]]
        found = [text.index(f"my name is {n} and") for n in shown]
        assert found == sorted(found)  # the names in the order of the candidates
        if row["bundle_type"] == "demographic_matched":  # FairFund's race_transparent
            assert len(set(row["candidates_profile_id"])) == 1
            assert sorted(row["candidates_race"]) == sorted(FAIRFUND_VALUES["race"])
        else:  # race_disguised: four appeals, four races
            assert len(set(row["candidates_profile_id"])) == 4
            assert len(set(row["candidates_race"])) == 4


def test_the_workflow_builder_checks_the_aid_counts(tmp_path: Path, stimuli_path: Path) -> None:
    resources = ROOT / "resources/decision"
    args = {
        "profiles_path": resources / "profiles.jsonl",
        "profiles_format": "cueaudit",
        "strip_suffixes": [],
        "audit_cues": [],
        "name_pairs_path": NAME_PAIRS,
        "hobbies_path": resources / "hobbies.txt",
        "neighbourhoods_path": resources / "neighbourhoods.txt",
        "terms_path": resources / "demographic_terms.txt",
        "designs": {"aid": AID_DESIGN},
    }
    out = {f"{t}__aid": tmp_path / f"{t}.parquet" for t in AID_DESIGN["tasks"]}
    counts = write_decision_prompts(**args, out_paths=out, fairfund_stimuli_path=stimuli_path)
    assert counts == {f"{t}__aid": n for t, n in expected_counts(AID_DESIGN).items()}
    # a design asking for more appeals per category than there are is refused before writing
    more = {**AID_DESIGN, "profiles_per_tier": 11}
    for path in out.values():
        path.unlink()
    message = r"stimuli.csv \(the aid domain\): field 'tier': domain 'aid' has 10 clear_yes"
    with pytest.raises(InputError, match=message):
        write_decision_prompts(
            **(args | {"designs": {"aid": more}}), out_paths=out, fairfund_stimuli_path=stimuli_path
        )
    assert not any(path.exists() for path in out.values())


@pytest.mark.skipif(not FAIRFUND.is_file(), reason=f"FairFund stimuli not present at {FAIRFUND}")
def test_fairfunds_own_stimuli_give_600_rate_prompts_with_the_paper_extension_design() -> None:
    pairs = load_name_pairs(NAME_PAIRS)
    profiles, appeals = with_aid(NO_PROFILES, pairs, FAIRFUND, [AID_DOMAIN])
    assert profiles.height == 75 and appeals is not None and appeals.height == 3000
    design = {
        **AID_DESIGN,
        "profiles_per_tier": 25,
        "bundles_per_type": {"demographic_matched": 120, "disguised_demographic": 120},
        "tasks": ["decision_rate_text", "decision_rank_text"],
    }
    built = build_decision_prompts(profiles, pairs, [], [], design, "fairfund_aid", appeals=appeals)
    assert {t: v.height for t, v in built.items()} == {
        "decision_rate_text__fairfund_aid": 600,
        "decision_rank_text__fairfund_aid": 240,
    }
    rate = built["decision_rate_text__fairfund_aid"]
    assert rate.select("profile_id", "race", "gender").unique().height == 600
    names = dict(pairs.select("pair_id", "full_name").rows())
    assert all(names[k] in t for k, t in rate.select("pair_id", "text").rows())
    assert not any("Applicant:" in t for t in rate["text"])


# --- the replication table -------------------------------------------------------------------


def test_the_published_values_file_names_its_sources() -> None:
    published = {(p.format, p.contrast): p for p in load_published(ROOT / PUBLISHED_VALUES)}
    rank, rate = published[("rank", "black_vs_white")], published[("rate", "black_vs_white")]
    assert (rank.published, rank.replicated_by_paper) == (-0.067, -0.064)
    assert (rate.published, rate.replicated_by_paper) == (0.090, 0.193)
    assert all("arXiv 2607.28934" in p.source for p in published.values())


def test_a_published_values_file_without_a_source_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "published.yaml"
    path.write_text(
        "contrasts:\n  - {format: rate, contrast: black_vs_white, published: 0.09}\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="every published value names its source") as raised:
        load_published(path)
    assert raised.value.source == str(path) and raised.value.field == "contrasts[0].source"


def test_direction_and_interval_logic() -> None:
    assert direction_agrees(0.05, 0.09) is True and direction_agrees(-0.2, -0.067) is True
    assert direction_agrees(-0.05, 0.09) is False and direction_agrees(0.01, -0.067) is False
    assert direction_agrees(0.0, 0.09) is None and direction_agrees(np.nan, 0.09) is None
    assert published_in_interval(-0.1, 0.2, 0.09) is True
    assert published_in_interval(0.1, 0.2, 0.09) is False
    assert published_in_interval(np.nan, 0.2, 0.09) is None


PUBLISHED = (
    PublishedContrast("rank", "black_vs_white", -0.067, -0.064, "test"),
    PublishedContrast("rate", "black_vs_white", 0.090, 0.193, "test"),
)


def simulated_study(stimuli_path: Path, rate: float, rank: float) -> SimulationSettings:
    design = {**AID_DESIGN, "tasks": ["decision_rate_text", "decision_rank_text"]}
    design["bundles_per_type"] = {"disguised_demographic": 48}
    design["names_per_cell"] = 2
    return SimulationSettings(
        design=design,
        models=("sim-a", "sim-b"),
        root=str(ROOT),
        fairfund_stimuli=str(stimuli_path),
        planted={
            (AID_DOMAIN, "rate", "black_vs_white"): rate,
            (AID_DOMAIN, "rank", "black_vs_white"): rank,
        },
        tie_rates={"disguised_demographic": 0.0},
        rank_lapse=1.0,  # room for a planted 0.4 positions (see the simulator)
        rate_scale=0.5,  # room for a planted 0.6 points
        pair_sd=0.0,
    )


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_replication_table_agrees_only_with_the_planted_direction(
    stimuli_path: Path, sign: float
) -> None:
    """Planted with FairFund's signs (rate +, rank -) the direction agrees; planted the
    opposite way it does not. The rate estimate is the difference of the two groups' mean
    ratings (the design crosses every profile with every name pair: OLS = GLS)."""
    frames = simulate(simulated_study(stimuli_path, 0.6 * sign, -0.4 * sign), seed=3)
    table = aid_replication(frames, PUBLISHED)
    assert table["arm"].to_list() == ["primary", "primary"]
    rows = {r["format"]: r for r in table.iter_rows(named=True)}
    assert set(rows) == {"rate", "rank"}
    for fmt, published in (("rate", 0.090), ("rank", -0.067)):
        row = rows[fmt]
        assert row["ci_low"] < row["estimate"] < row["ci_high"] and row["n_obs"] > 0
        assert np.sign(row["estimate"]) == np.sign(published) * sign
        assert row["direction_agrees"] is (sign > 0)
        assert row["published"] == published
    rate = frames.judgements.filter(pl.col("y").is_not_null())
    means = dict(rate.group_by("race").agg(pl.col("y").mean()).iter_rows())
    assert rows["rate"]["estimate"] == pytest.approx(means["Black"] - means["White"], abs=1e-9)
    # 0.6 points planted: FairFund's +0.090 lies outside the interval either way
    assert rows["rate"]["published_in_ci"] is False


def test_no_aid_rows_give_an_empty_table(stimuli_path: Path) -> None:
    settings = simulated_study(stimuli_path, 0.0, 0.0)
    frames = simulate(settings, seed=0)
    other = frames.arm("none")
    assert aid_replication(other, PUBLISHED).height == 0
