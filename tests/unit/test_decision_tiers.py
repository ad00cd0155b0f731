"""Unequal quality tiers (``decision.design.tier_rule``): the counts printed before a run equal
the rows built under every rule, on AgentFairBench's public split and on a synthetic file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.decision import build as decision_build
from cueaudit.decision.build import write_decision_prompts
from cueaudit.decision.design_settings import DesignSettings, expected_counts
from cueaudit.decision.profiles import (
    AFB_SUFFIX,
    TIERS,
    load_attribute_list,
    load_profiles,
    tier_counts,
)
from cueaudit.decision.prompts import build_decision_prompts, explode_candidates
from cueaudit.decision.tiers import (
    bundled_per_tier,
    crossed_per_tier,
    describe_tiers,
    profile_tier_counts,
    select_profiles,
)
from cueaudit.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
DECISION = ROOT / "resources/decision"
PAIRS = ROOT / "resources/names/elder_hayes_pairs.csv"
AFB = ROOT.parent / "shared/data/agentfairbench/public_dev.jsonl"
needs_afb = pytest.mark.skipif(
    not AFB.is_file(), reason=f"AgentFairBench public split not present at {AFB}"
)
AFB_TIERS = {
    "hiring": {"clear_yes": 4, "borderline": 5, "clear_no": 3},
    "lending": {"clear_yes": 5, "borderline": 5, "clear_no": 2},
    "triage": {"clear_yes": 4, "borderline": 5, "clear_no": 3},
}
TASKS = ["decision_rate_text", "decision_decide_tool", "decision_rank_json"]
DESIGN = {
    "prompts": str(DECISION / "prompts.yaml"),
    "paraphrases": 1,
    "names_per_cell": 1,
    "bundles_per_type": {
        "demographic_matched": 4,
        "irrelevant_matched": 4,
        "disguised_demographic": 12,
        "disguised_placebo": 12,
    },
    "probe_bundles": 0,
    "tasks": TASKS,
}


def afb_profiles() -> pl.DataFrame:
    return load_profiles(AFB, "agentfairbench", [AFB_SUFFIX])


def build(profiles: pl.DataFrame, **design: Any) -> dict[str, pl.DataFrame]:
    pairs = load_name_pairs(PAIRS)
    hobbies = load_attribute_list(DECISION / "hobbies.txt")
    neighbourhoods = load_attribute_list(DECISION / "neighbourhoods.txt")
    return build_decision_prompts(profiles, pairs, hobbies, neighbourhoods, {**DESIGN, **design})


def used_per_tier(table: pl.DataFrame) -> dict[str, dict[str, int]]:
    """Distinct profiles per domain and tier a table shows (either layout)."""
    if "candidates_profile_id" in table.columns:
        table = explode_candidates(table)
    counts = table.group_by("domain", "tier").agg(pl.col("profile_id").n_unique())
    out: dict[str, dict[str, int]] = {}
    for domain, tier, n in counts.iter_rows():
        out.setdefault(domain, dict.fromkeys(TIERS, 0))[tier] = n
    return out


def check_rule(profiles: pl.DataFrame, **design: Any) -> dict[str, pl.DataFrame]:
    """Build the design and check every table against the one count function, and the
    profiles each table shows against the rule's profiles per tier."""
    tables = build(profiles, **design)
    settings = {**DESIGN, **design}
    counts = tier_counts(profiles)
    assert {t: table.height for t, table in tables.items()} == expected_counts(settings, counts)
    cfg = DesignSettings.of(settings)
    crossed = crossed_per_tier(
        counts, domains=cfg.domains, rule=cfg.tier_rule, profiles_per_tier=cfg.profiles_per_tier
    )
    assert used_per_tier(tables["decision_rate_text"]) == crossed
    selection = select_profiles(
        profiles,
        domains=cfg.domains,
        rule=cfg.tier_rule,
        profiles_per_tier=cfg.profiles_per_tier,
        seed=cfg.seed,
    )
    assert set(tables["decision_rate_text"]["profile_id"]) == set(selection.crossed["profile_id"])
    bundled = bundled_per_tier(counts, domains=cfg.domains, rule=cfg.tier_rule)
    assert used_per_tier(selection.bundled) == bundled
    # bundles draw on the rule's pool only (a tier of 5 may leave one out of a single
    # super-block: each race meets each profile at most once in it)
    shown = set(explode_candidates(tables["decision_rank_json"])["profile_id"])
    assert shown <= set(selection.bundled["profile_id"])
    return tables


@needs_afb
def test_public_split_has_unequal_tiers() -> None:
    assert tier_counts(afb_profiles()) == AFB_TIERS
    assert profile_tier_counts(AFB, "agentfairbench", [AFB_SUFFIX]) == AFB_TIERS


@needs_afb
def test_equal_refuses_the_public_split_naming_the_file_the_counts_and_the_rules() -> None:
    settings = {**DESIGN, "profiles_per_tier": 4}
    with pytest.raises(InputError) as err:
        expected_counts(settings, AFB_TIERS, profiles_file=str(AFB))
    assert str(err.value) == (
        f"{AFB}: field 'tier': domain 'hiring' has 4 clear_yes / 5 borderline / 3 clear_no "
        "profiles, and tier_rule equal needs profiles_per_tier 4 in each (clear_no has 3): set "
        "decision.design.tier_rule to smallest (3 per tier, drawn by seed) or available (every "
        "profile up to profiles_per_tier), or lower profiles_per_tier"
    )
    with pytest.raises(InputError, match="domain 'hiring' has 4 clear_yes"):
        build(afb_profiles(), profiles_per_tier=4)
    # equal still runs where every tier has profiles_per_tier: 2 of each tier everywhere
    tables = check_rule(afb_profiles(), profiles_per_tier=2)
    assert tables["decision_rate_text"].height == 3 * 3 * 2 * 8


@needs_afb
@pytest.mark.parametrize(
    ("rule", "per_tier", "crossed", "bundled"),
    [
        # smallest: each domain down to its smallest tier (3, 2, 3), bundles on those too
        ("smallest", 4, (3 * 3, 3 * 2, 3 * 3), (3 * 3, 3 * 2, 3 * 3)),
        # available: min(profiles_per_tier, n) of each tier, bundles on every profile
        ("available", 4, (4 + 4 + 3, 4 + 4 + 2, 4 + 4 + 3), (12, 12, 12)),
        ("available", 5, (12, 12, 12), (12, 12, 12)),
    ],
)
def test_each_rule_builds_the_counts_it_prints_on_the_public_split(
    rule: str, per_tier: int, crossed: tuple[int, ...], bundled: tuple[int, ...]
) -> None:
    tables = check_rule(afb_profiles(), tier_rule=rule, profiles_per_tier=per_tier)
    rate = tables["decision_rate_text"]
    shown = rate.group_by("domain").agg(pl.col("profile_id").n_unique()).sort("domain")
    assert tuple(shown["profile_id"]) == crossed
    assert rate.height == sum(crossed) * 8
    ranked = explode_candidates(tables["decision_rank_json"])
    pools = ranked.group_by("domain").agg(pl.col("profile_id").n_unique()).sort("domain")
    assert all(n <= limit for n, limit in zip(pools["profile_id"], bundled, strict=True))
    assert tables["decision_rank_json"].height == 3 * 32


@needs_afb
def test_the_paper_design_on_the_public_split_counts_every_row() -> None:
    """config/decision/agentfairbench.yaml over paper.yaml: every profile under all 40 name
    pairs (1,440 Rate prompts, as on the shipped profiles) and the paper's bundles."""
    paper = yaml.safe_load((ROOT / "config/decision/paper.yaml").read_text())["decision"]
    overlay = yaml.safe_load((ROOT / "config/decision/agentfairbench.yaml").read_text())
    design = {**paper["design"], **overlay["decision"]["design"]}
    design |= {
        "prompts": str(DECISION / "prompts.yaml"),
        "tasks": ["decision_rate_text", "decision_rank_tool"],
    }
    tables = build(afb_profiles(), **design)
    expected = expected_counts(design, AFB_TIERS)
    assert {t: table.height for t, table in tables.items()} == expected
    assert expected == {"decision_rate_text": 1440, "decision_rank_tool": 3 * 144}
    # over four super-blocks of disguised bundles every profile is shown
    shown = explode_candidates(tables["decision_rank_tool"])["profile_id"].n_unique()
    assert shown == 36


def synthetic(tmp_path: Path) -> Path:
    """The shipped 4 / 4 / 4 profiles thinned to unequal tiers: hiring 4 / 3 / 2, lending
    2 / 4 / 3 (triage dropped)."""
    keep = {
        "hiring": {"clear_yes": 4, "borderline": 3, "clear_no": 2},
        "lending": {"clear_yes": 2, "borderline": 4, "clear_no": 3},
    }
    lines = []
    taken: dict[tuple[str, str], int] = {}
    for line in (DECISION / "profiles.jsonl").read_text().splitlines():
        record = json.loads(line)
        key = (record["domain"], record["tier"])
        if taken.get(key, 0) < keep.get(record["domain"], {}).get(record["tier"], 0):
            taken[key] = taken.get(key, 0) + 1
            lines.append(line)
    path = tmp_path / "profiles.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert tier_counts(load_profiles(path)) == keep
    return path


@pytest.mark.parametrize(
    ("rule", "per_tier", "rate_profiles"),
    [
        ("equal", 2, 2 * 3 * 2),
        ("smallest", 4, 2 * 3 + 2 * 3),
        ("available", 3, (3 + 3 + 2) + (2 + 3 + 3)),
    ],
)
def test_each_rule_builds_the_counts_it_prints_on_a_synthetic_file(
    tmp_path: Path, rule: str, per_tier: int, rate_profiles: int
) -> None:
    profiles = load_profiles(synthetic(tmp_path))
    domains = ["hiring", "lending"]
    tables = check_rule(profiles, tier_rule=rule, profiles_per_tier=per_tier, domains=domains)
    assert tables["decision_rate_text"].height == rate_profiles * 8


def test_smallest_draws_by_seed(tmp_path: Path) -> None:
    profiles = load_profiles(synthetic(tmp_path))
    design = {"tier_rule": "smallest", "profiles_per_tier": 1, "domains": ["hiring"]}

    def drawn(seed: int) -> tuple[str, ...]:
        rate = build(profiles, **design, seed=seed, tasks=["decision_rate_text"])
        return tuple(sorted(set(rate["decision_rate_text"]["profile_id"])))

    assert drawn(0) == drawn(0)
    assert len({drawn(seed) for seed in range(4)}) > 1
    assert len(drawn(0)) == 3


def test_describe_tiers_lists_both_uses() -> None:
    line = describe_tiers(AFB_TIERS, domains=["lending"], rule="smallest", profiles_per_tier=4)
    assert line == (
        "profiles per tier (clear_yes/borderline/clear_no, tier_rule smallest): "
        "Rate / Decide lending 2/2/2; bundles lending 2/2/2"
    )


def test_an_unknown_rule_is_refused() -> None:
    with pytest.raises(InputError, match="field 'tier_rule': unknown 'largest'"):
        DesignSettings.of({"tier_rule": "largest"})


def test_a_domain_without_a_tier_is_refused_under_every_rule() -> None:
    counts = {"hiring": {"clear_yes": 3, "borderline": 2, "clear_no": 0}}
    for rule in ("equal", "smallest", "available"):
        with pytest.raises(InputError, match="domain 'hiring' has 3 clear_yes / 2 borderline"):
            crossed_per_tier(counts, domains=["hiring"], rule=rule, profiles_per_tier=1)


def _write(tmp_path: Path, profiles: Path, design: dict[str, Any]) -> tuple[Path, dict[str, int]]:
    out = tmp_path / "results"
    counts = write_decision_prompts(
        profiles_path=profiles,
        profiles_format="agentfairbench",
        strip_suffixes=[AFB_SUFFIX],
        audit_cues=[AFB_SUFFIX],
        name_pairs_path=PAIRS,
        hobbies_path=DECISION / "hobbies.txt",
        neighbourhoods_path=DECISION / "neighbourhoods.txt",
        terms_path=DECISION / "demographic_terms.txt",
        designs={"primary": design},
        out_paths={t: out / f"{t}.parquet" for t in design["tasks"]},
    )
    return out, counts


@needs_afb
def test_the_build_refuses_a_count_that_ignores_the_tiers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's failure: the public split's unequal tiers under a count of 4 per tier
    (1,440 expected) build 1,280 rows; the build stops and writes nothing."""
    design = {
        **DESIGN,
        "tier_rule": "available",
        "profiles_per_tier": 4,
        "names_per_cell": 5,
        "tasks": ["decision_rate_text"],
    }
    out, counts = _write(tmp_path / "right", AFB, design)
    assert counts == {"decision_rate_text": 1280}
    assert pl.read_parquet(out / "decision_rate_text.parquet").height == 1280

    def nominal(settings: Any, tiers: Any = None, **_: Any) -> dict[str, dict[str, int]]:
        # the count before the tier rule: 4 in every tier (the name-pair cue alone)
        return {"name_pair": expected_counts(settings)}

    monkeypatch.setattr(decision_build, "expected_counts_by_cue", nominal)
    with pytest.raises(InputError) as err:
        _write(tmp_path / "wrong", AFB, design)
    assert "row counts (built, expected) differ: {'decision_rate_text': (1280, 1440)}" in str(
        err.value
    )
    assert not (tmp_path / "wrong").exists()


@needs_afb
def test_the_build_names_the_file_when_equal_cannot_run(tmp_path: Path) -> None:
    design = {**DESIGN, "profiles_per_tier": 3, "tasks": ["decision_rate_text"]}
    with pytest.raises(InputError) as err:
        _write(tmp_path, AFB, design)
    assert str(err.value).startswith(
        f"{AFB}: field 'tier': domain 'lending' has 5 clear_yes / 5 borderline / 2 clear_no"
    )
    assert not (tmp_path / "results").exists()


@needs_afb
def test_a_design_without_rate_or_decide_needs_no_profiles_per_tier() -> None:
    """Only Rate and Decide cross profiles_per_tier profiles: a ranking-only design (the
    precision top-up) runs on the split under equal whatever profiles_per_tier says."""
    design = {"profiles_per_tier": 4, "tasks": ["decision_rank_json"], "domains": ["lending"]}
    assert expected_counts({**DESIGN, **design}, AFB_TIERS) == {"decision_rank_json": 32}
    assert build(afb_profiles(), **design)["decision_rank_json"].height == 32
    assert describe_tiers(
        AFB_TIERS, domains=["lending"], rule="equal", profiles_per_tier=4, crossing=False
    ) == (
        "profiles per tier (clear_yes/borderline/clear_no, tier_rule equal): bundles lending 5/5/2"
    )
