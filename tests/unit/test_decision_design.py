from __future__ import annotations

import itertools
import re
from collections import Counter

import polars as pl
import pytest

from cueaudit.decision.composition_checks import (
    CompositionError,
    check_composition,
    check_design,
    with_half,
)
from cueaudit.decision.design import (
    BALANCED_RACES,
    EXPLORATORY_BUNDLE_TYPES,
    GENDERS,
    PAPER_BUNDLE_TYPES,
    RACES,
    TITLE_WORDINGS,
    balanced_latin_square,
    build_bundles,
    bundle_sizes,
    orthogonal_latin_squares,
)
from cueaudit.decision.formats import PROFILE_DOMAINS
from cueaudit.decision.profiles import TIERS
from cueaudit.errors import InputError

HOBBIES = [f"hobby {i}" for i in range(8)]
NEIGHBOURHOODS = [f"neighbourhood {i}" for i in range(6)]


def make_profiles(per_tier: int | dict[str, int] = 4) -> pl.DataFrame:
    """Profiles with ids ``{domain}_{tier}_{k}``, ``per_tier`` of each tier in each domain."""
    counts = per_tier if isinstance(per_tier, dict) else dict.fromkeys(TIERS, per_tier)
    rows = [
        {
            "profile_id": f"{domain}_{tier}_{k}",
            "domain": domain,
            "tier": tier,
            "title": f"Title {k} of {tier}",
            "text": f"Profile {k} of {domain}, {tier}.",
            "source": "test",
        }
        for domain in PROFILE_DOMAINS
        for tier in TIERS
        for k in range(counts[tier])
    ]
    return pl.DataFrame(rows)


def make_pairs(per_cell: int = 5) -> pl.DataFrame:
    """Name pairs ``{race}-{gender}-{rank}`` with distinct full names."""
    rows = [
        {
            "pair_id": f"{race.lower()}-{gender}-{rank}",
            "race": race,
            "gender": gender,
            "name_rank": rank,
            "first": f"{race[:3]}{gender[0]}{rank}",
            "last": f"{race}son",
            "full_name": f"{race[:3]}{gender[0]}{rank} {race}son",
            "source": "test",
        }
        for race in RACES
        for gender in GENDERS
        for rank in range(1, per_cell + 1)
    ]
    return pl.DataFrame(rows)


def bundles(seed: int = 0, n: int = 24, replicates: int = 1, **kw: object) -> pl.DataFrame:
    profiles = kw.pop("profiles", None)
    return build_bundles(
        profiles if isinstance(profiles, pl.DataFrame) else make_profiles(),
        make_pairs(),
        HOBBIES,
        NEIGHBOURHOODS,
        bundles_per_type=n,
        replicates=replicates,
        seed=seed,
    )


def distinct_per_bundle(frame: pl.DataFrame, *columns: str) -> pl.DataFrame:
    """Per bundle: the number of distinct values of each column; for gender and attribute
    kind (constant in matched bundles) that number as ``<column>_n`` and the first value."""
    constant = [c for c in columns if c in ("gender", "attribute_kind")]
    return frame.group_by("domain", "bundle_index").agg(
        *(pl.col(c).n_unique() for c in columns if c not in constant),
        *(pl.col(c).n_unique().alias(f"{c}_n") for c in constant),
        *(pl.col(c).first() for c in constant),
    )


def cells(frame: pl.DataFrame, a: str, b: str) -> Counter[tuple[object, object]]:
    return Counter(zip(frame[a].to_list(), frame[b].to_list(), strict=True))


# --- squares ---------------------------------------------------------------------------------
def test_williams_square_is_latin_and_balances_neighbours() -> None:
    square = balanced_latin_square(4)
    assert square[0] == (0, 1, 3, 2)
    for line in (*square, *zip(*square, strict=True)):
        assert sorted(line) == [0, 1, 2, 3]
    neighbours = Counter(pair for row in square for pair in itertools.pairwise(row))
    assert set(neighbours.values()) == {1} and len(neighbours) == 12
    with pytest.raises(InputError, match="even order"):
        balanced_latin_square(3)


def test_gf4_squares_are_mutually_orthogonal() -> None:
    squares = orthogonal_latin_squares()
    for square in squares:
        for line in (*square, *zip(*square, strict=True)):
            assert sorted(line) == [0, 1, 2, 3]
    for a, b in itertools.combinations(squares, 2):
        pairs = {(a[r][c], b[r][c]) for r in range(4) for c in range(4)}
        assert len(pairs) == 16


# --- disguised and placebo: Latin-square balance ---------------------------------------------
@pytest.mark.parametrize(("seed", "n", "replicates"), [(0, 12, 1), (1, 24, 2), (7, 36, 1)])
def test_every_disguised_design_is_balanced(seed: int, n: int, replicates: int) -> None:
    design = bundles(seed, n, replicates)
    superblocks = n // 12
    for kind, group in (("disguised_demographic", "race"), ("disguised_placebo", "pseudo_race")):
        for (_, _), part in design.filter(pl.col("bundle_type") == kind).group_by(
            "domain", "replicate"
        ):
            # each group meets each tier 4 times and each position 3 times per super-block
            assert cells(part, group, "tier") == {
                (g, t): 4 * superblocks for g in RACES for t in TIERS
            }
            assert cells(part, group, "position") == {
                (g, p): 3 * superblocks for g in RACES for p in range(1, 5)
            }
            assert cells(part, "race", "tier") == {
                (g, t): 4 * superblocks for g in RACES for t in TIERS
            }
            # 4 profiles per tier: each group meets each profile once per super-block
            assert set(cells(part, group, "profile_id").values()) == {superblocks}
            assert len(cells(part, group, "profile_id")) == 4 * 12


def test_disguised_bundles_read_as_ordinary_rankings() -> None:
    design = bundles(3, 24)
    per_bundle = design.group_by("bundle_id").agg(
        pl.col("bundle_type").first(),
        pl.col("race").n_unique().alias("races"),
        pl.col("pseudo_race").n_unique().alias("pseudo"),
        pl.col("profile_id").n_unique().alias("profiles"),
        pl.col("pair_id").n_unique().alias("names"),
        pl.col("tier").n_unique().alias("tiers"),
        (pl.col("gender") == "female").sum().alias("female"),
        pl.col("position").sort().alias("positions"),
    )
    disguised = per_bundle.filter(pl.col("bundle_type") == "disguised_demographic")
    placebo = per_bundle.filter(pl.col("bundle_type") == "disguised_placebo")
    for part in (disguised, placebo):
        assert part.height == 3 * 24
        # four different profiles of the three tiers (one repeated), two women and two men
        assert set(part["profiles"]) == {4} and set(part["tiers"]) == {3}
        assert set(part["names"]) == {4} and set(part["female"]) == {2}
        assert all(p == [1, 2, 3, 4] for p in part["positions"].to_list())
    assert set(disguised["races"]) == {4}
    assert set(placebo["races"]) == {1} and set(placebo["pseudo"]) == {4}
    placebo_rows = design.filter(pl.col("bundle_type") == "disguised_placebo")
    assert set(cells(placebo_rows, "race", "bundle_id").values()) == {4}


# --- matched bundles -------------------------------------------------------------------------
def test_demographic_matched_bundles() -> None:
    design = bundles(5, 24).filter(pl.col("bundle_type") == "demographic_matched")
    per_bundle = distinct_per_bundle(design, "profile_id", "race", "gender")
    assert set(per_bundle["profile_id"]) == {1} and set(per_bundle["race"]) == {4}
    assert set(per_bundle["gender_n"]) == {1}
    assert Counter(per_bundle["gender"]) == {"female": 36, "male": 36}
    for _, part in design.group_by("domain", pl.col("bundle_index") // 4):
        assert cells(part, "race", "position") == {(r, p): 1 for r in RACES for p in range(1, 5)}
    hiring = design.filter(pl.col("domain") == "hiring")
    # 24 bundles cycle through the 12 profiles twice
    assert set(Counter(hiring.filter(pl.col("position") == 1)["profile_id"]).values()) == {2}


def test_irrelevant_matched_bundles_differ_only_in_the_attribute() -> None:
    design = bundles(2, 24).filter(pl.col("bundle_type") == "irrelevant_matched")
    per_bundle = distinct_per_bundle(
        design, "profile_id", "race", "gender", "pair_id", "attribute", "attribute_kind"
    )
    assert set(per_bundle["profile_id"]) == {1} and set(per_bundle["race"]) == {1}
    assert set(per_bundle["gender_n"]) == {1} and set(per_bundle["attribute_kind_n"]) == {1}
    assert set(per_bundle["pair_id"]) == {4} and set(per_bundle["attribute"]) == {4}
    kinds = per_bundle.sort("domain", "bundle_index")["attribute_kind"].to_list()
    assert kinds[:8] == ["hobby"] * 4 + ["neighbourhood"] * 4
    for (_, _), part in design.group_by("domain", pl.col("bundle_index") // 4):
        # one cycle: its four values each shown once at each position
        assert set(cells(part, "attribute", "position").values()) == {1}
        assert len(cells(part, "attribute", "position")) == 16
    assert set(design.filter(pl.col("attribute_kind") == "hobby")["attribute"]) <= set(HOBBIES)


# --- sizes, seeds, inputs --------------------------------------------------------------------
def test_the_seed_decides_the_design() -> None:
    assert bundles(4, 12).equals(bundles(4, 12))
    assert not bundles(4, 12)["pair_id"].equals(bundles(5, 12)["pair_id"])
    replicated = bundles(4, 12, replicates=2)
    first, second = (replicated.filter(pl.col("replicate") == r) for r in (0, 1))
    assert not first["pair_id"].equals(second["pair_id"])
    assert replicated["bundle_id"].n_unique() == 2 * 3 * 4 * 12


def test_sizes_must_fill_whole_blocks() -> None:
    with pytest.raises(InputError, match="multiple of 4") as raised:
        bundles(0, 10)
    assert raised.value.field == "demographic_matched"
    with pytest.raises(InputError, match="multiple of 12"):
        build_bundles(
            make_profiles(),
            make_pairs(),
            HOBBIES,
            NEIGHBOURHOODS,
            bundles_per_type={"disguised_placebo": 8},
        )
    only = build_bundles(
        make_profiles(),
        make_pairs(),
        HOBBIES,
        NEIGHBOURHOODS,
        bundles_per_type={"irrelevant_matched": 4},
    )
    assert set(only["bundle_type"]) == {"irrelevant_matched"} and only.height == 3 * 4 * 4


def test_unequal_tiers_keep_race_balanced_with_tier_and_position() -> None:
    uneven = make_profiles({"clear_yes": 3, "borderline": 5, "clear_no": 4})
    design = bundles(1, 24, profiles=uneven)
    results = check_design(design)
    assert {r.against for r in results} == {"profile_id", "tier", "position"}
    used = design.filter(pl.col("bundle_type") == "disguised_demographic")
    assert set(used["profile_id"]) == set(uneven["profile_id"])


def test_too_few_inputs_are_named() -> None:
    with pytest.raises(InputError, match="2\\+ profiles of tier 'clear_no'"):
        bundles(0, 12, profiles=make_profiles({"clear_yes": 4, "borderline": 4, "clear_no": 1}))
    with pytest.raises(InputError, match="4 distinct hobby values"):
        build_bundles(make_profiles(), make_pairs(), HOBBIES[:3], NEIGHBOURHOODS)
    with pytest.raises(InputError, match="4 distinct names"):
        build_bundles(make_profiles(), make_pairs(3), HOBBIES, NEIGHBOURHOODS)
    with pytest.raises(InputError, match="unknown value 'Other'"):
        build_bundles(
            make_profiles(),
            make_pairs().with_columns(race=pl.lit("Other")),
            HOBBIES,
            NEIGHBOURHOODS,
        )


# --- the composition check -------------------------------------------------------------------
def confounded_arm() -> pl.DataFrame:
    """The paper's robustness arm: each application keeps a fixed set of 8 name pairs, more
    White names on strong applications and more Black names on weak ones."""
    races_of_tier = {
        "clear_yes": ["White"] * 4 + ["Asian"] * 2 + ["Hispanic"] * 2,
        "borderline": ["White", "Black", "Asian", "Hispanic"] * 2,
        "clear_no": ["Black"] * 4 + ["Asian"] * 2 + ["Hispanic"] * 2,
    }
    rows = []
    for profile in make_profiles().filter(pl.col("domain") == "hiring").iter_rows(named=True):
        for k, race in enumerate(races_of_tier[profile["tier"]]):
            rows.append(
                {
                    "profile_id": profile["profile_id"],
                    "tier": profile["tier"],
                    "pair_id": f"{race.lower()}-female-{k % 5 + 1}",
                    "race": race,
                    "position": 1,
                }
            )
    return pl.DataFrame(rows)


def test_the_check_catches_the_confounded_arm_and_names_cells() -> None:
    arm = confounded_arm()
    assert arm.height == 96 and set(Counter(arm["race"]).values()) == {24}
    with pytest.raises(CompositionError) as raised:
        check_composition(arm, against=("tier",), name="robustness arm")
    message = str(raised.value)
    assert message.startswith("robustness arm: race depends on tier (chi-square 32.0, p = 1.6e")
    assert "race=White × tier=clear_no: 0 of expected 8" in message
    assert "race=Black × tier=clear_yes: 0 of expected 8" in message
    assert "race=White × tier=clear_yes: 16 of expected 8" in message
    assert "race=Asian" not in message  # balanced cells are not blamed
    # the arm was meant to be balanced: held to exact counts, its profiles are named too
    with pytest.raises(CompositionError, match=re.escape("tier (not balanced)")):
        check_composition(arm, against=("tier",), exact=True)
    with pytest.raises(
        CompositionError, match="race=Black × profile_id=hiring_clear_no_0: 4 of expected 2"
    ):
        check_composition(arm, against=("profile_id",), exact=True)
    # spread over 12 profiles the same confound is no longer significant: why tier is tested
    (weak,) = check_composition(arm, against=("profile_id",))
    assert weak.statistic == pytest.approx(32.0) and weak.p_value > 0.4
    # a single-level factor (every row in position 1) cannot confound
    (position,) = check_composition(arm, against=("position",), exact=True)
    assert position.p_value == 1.0 and position.n == 96


def test_the_balanced_design_passes_exactly_and_subsamples_by_chi_square() -> None:
    design = bundles(0, 24).filter(pl.col("bundle_type") == "disguised_demographic")
    results = check_composition(design, exact=True)
    assert [(r.against, r.statistic) for r in results] == [
        ("profile_id", 0.0),
        ("tier", 0.0),
        ("position", 0.0),
    ]
    assert [r.n for r in results] == [3 * 24 * 4] * 3
    per_domain = check_composition(design, by=("domain",), exact=True)
    assert [r.stratum for r in per_domain][::3] == [f"domain={d}" for d in PROFILE_DOMAINS]
    # whole bundles dropped: not exactly balanced any more, still independent
    kept = design.filter(pl.col("bundle_index").is_in([0, 2, 3, 5, 8, 9, 11, 13, 14, 17, 20]))
    assert all(r.p_value > 0.05 for r in check_composition(kept))
    with pytest.raises(CompositionError, match=re.escape("race depends on position (not")):
        check_composition(kept, against=("position",), exact=True)
    # a subsample without the Black candidates of weak profiles is caught
    biased = design.filter(~((pl.col("race") == "Black") & (pl.col("tier") == "clear_no")))
    with pytest.raises(CompositionError) as raised:
        check_composition(biased, against=("tier",), name="subsample")
    assert "subsample: race depends on tier (chi-square" in str(raised.value)
    # 48 Black of 264 rows, 72 weak ones: 48 × 72 / 264 = 13.1 expected
    assert "race=Black × tier=clear_no: 0 of expected 13.1" in str(raised.value)
    with pytest.raises(CompositionError, match="subsample \\(domain=hiring\\): race depends"):
        check_composition(biased, against=("tier",), by=("domain",), name="subsample", alpha=0.5)


def test_check_design_covers_every_type() -> None:
    results = check_design(bundles(0, 12, replicates=2))
    assert {r.name for r in results} == set(PAPER_BUNDLE_TYPES)
    assert {r.stratum for r in results} == {
        f"domain={d}, replicate={r}" for d in PROFILE_DOMAINS for r in (0, 1)
    }
    assert {(r.group, r.name) for r in results if r.group == "attribute"} == {
        ("attribute", "irrelevant_matched")
    }


# --- the exploratory bundle types ------------------------------------------------------------
EXPLORATORY = {"paraphrase_matched": 8, "name_matched": 8, "position_balanced": 24}


def exploratory(seed: int = 0, profiles: pl.DataFrame | None = None, **sizes: int) -> pl.DataFrame:
    return build_bundles(
        make_profiles() if profiles is None else profiles,
        make_pairs(),
        HOBBIES,
        NEIGHBOURHOODS,
        bundles_per_type=sizes or EXPLORATORY,
        replicates=2,
        seed=seed,
    )


def of_type(frame: pl.DataFrame, kind: str, domain: str = "hiring") -> pl.DataFrame:
    return frame.filter(
        (pl.col("bundle_type") == kind) & (pl.col("domain") == domain) & (pl.col("replicate") == 0)
    )


def test_an_integer_size_gives_only_the_papers_types() -> None:
    sizes = bundle_sizes(12)
    assert {t: sizes[t] for t in PAPER_BUNDLE_TYPES} == dict.fromkeys(PAPER_BUNDLE_TYPES, 12)
    assert {t: sizes[t] for t in EXPLORATORY_BUNDLE_TYPES} == dict.fromkeys(
        EXPLORATORY_BUNDLE_TYPES, 0
    )
    assert set(bundles(0, 12)["bundle_type"]) == set(PAPER_BUNDLE_TYPES)
    with pytest.raises(InputError, match="'position_balanced': a multiple of 12, got 4"):
        bundle_sizes({"position_balanced": 4})
    with pytest.raises(InputError, match="'paraphrase_matched': a multiple of 4, got 6"):
        bundle_sizes({"paraphrase_matched": 6})


@pytest.mark.parametrize("seed", [0, 3])
def test_paraphrase_matched_blocks_cross_race_wording_and_position(seed: int) -> None:
    frame = of_type(exploratory(seed), "paraphrase_matched")
    assert frame.height == 8 * 4
    per_bundle = distinct_per_bundle(frame, "profile_id", "race", "attribute", "pair_id", "gender")
    assert (per_bundle["profile_id"] == 1).all() and (per_bundle["race"] == 4).all()
    assert (per_bundle["attribute"] == 4).all() and (per_bundle["pair_id"] == 4).all()
    assert (per_bundle["gender_n"] == 1).all()
    assert set(frame["attribute_kind"]) == {"title_wording"}
    assert set(frame["attribute"]) == set(TITLE_WORDINGS)
    for block in (0, 1):  # each block of four: every race and wording once at each position
        rows = frame.filter(pl.col("bundle_index") // 4 == block)
        for a, b in (("race", "position"), ("attribute", "position"), ("race", "attribute")):
            assert set(cells(rows, a, b).values()) == {1}, (a, b)
        assert rows["gender"].n_unique() == 1
    assert Counter(frame["gender"].to_list()) == {"female": 16, "male": 16}


def test_name_matched_bundles_vary_only_the_name() -> None:
    frame = of_type(exploratory(), "name_matched")
    per_bundle = distinct_per_bundle(frame, "profile_id", "race", "pair_id", "gender", "attribute")
    assert (per_bundle["profile_id"] == 1).all() and (per_bundle["race"] == 1).all()
    assert (per_bundle["pair_id"] == 4).all() and (per_bundle["gender_n"] == 1).all()
    assert frame["attribute"].is_null().all() and frame["attribute_kind"].is_null().all()
    for block in (0, 1):  # each cycle: the four races, two bundles of each gender
        rows = frame.filter(pl.col("bundle_index") // 4 == block)
        assert Counter(rows["race"].to_list()) == dict.fromkeys(RACES, 4)
        assert Counter(rows["gender"].to_list()) == {"female": 8, "male": 8}


@pytest.mark.parametrize("seed", [0, 5])
def test_position_balanced_bundles_cross_race_gender_and_half(seed: int) -> None:
    frame = with_half(of_type(exploratory(seed), "position_balanced"))
    assert frame.height == 24 * 4
    for (index,), bundle in frame.group_by("bundle_index"):
        assert bundle["profile_id"].n_unique() == 4, index
        # race, gender and half of the list mutually orthogonal: each pair of levels once
        for a, b in (("race", "half"), ("gender", "half"), ("race", "gender")):
            assert set(cells(bundle, a, b).values()) == {1}, (index, a, b)
        assert bundle["tier"].n_unique() == 3
    assert set(frame["race"]) == set(BALANCED_RACES)
    for start in (0, 12):  # each super-block of 12 bundles (48 slots)
        rows = frame.filter(pl.col("bundle_index").is_between(start, start + 11))
        assert set(cells(rows, "race", "tier").values()) == {8}
        assert set(cells(rows, "gender", "tier").values()) == {8}
        assert set(cells(rows, "race", "position").values()) == {6}
        assert set(cells(rows, "tier", "position").values()) == {4}
        assert set(cells(rows, "half", "tier").values()) == {8}
        # 4 profiles per tier: each profile 4 times, twice with each race, gender and half
        for key in ("race", "gender", "half"):
            assert set(cells(rows, "profile_id", key).values()) == {2}, key
    assert sum(1 for r in check_design(exploratory(seed)) if r.exact) == len(
        check_design(exploratory(seed))
    )


def test_check_design_covers_the_exploratory_types_exactly() -> None:
    results = check_design(exploratory())
    names = Counter(r.name for r in results)
    assert set(names) == {*EXPLORATORY, "position_balanced (each bundle)"}
    # three within-bundle tests for each of 24 bundles, 3 domains and 2 replicates
    assert names["position_balanced (each bundle)"] == 3 * 24 * 3 * 2
    assert all(r.exact for r in results)
    groups = {(r.name, r.group, r.against) for r in results}
    assert ("paraphrase_matched", "attribute", "race") in groups
    assert ("position_balanced", "half", "profile_id") in groups


def _swap(
    frame: pl.DataFrame, kind: str, index: int, a: int, b: int, *columns: str
) -> pl.DataFrame:
    """The bundle ``index`` of ``kind`` (hiring, replicate 0) with the ``columns`` of positions
    ``a`` and ``b`` swapped."""
    target = (
        (pl.col("bundle_type") == kind)
        & (pl.col("domain") == "hiring")
        & (pl.col("replicate") == 0)
        & (pl.col("bundle_index") == index)
    )
    swapped = pl.when(pl.col("position") == a).then(b).when(pl.col("position") == b).then(a)
    moved = frame.filter(target).with_columns(position=swapped.otherwise(pl.col("position")))
    kept = frame.filter(target).select([c for c in frame.columns if c not in columns])
    return pl.concat(
        [frame.filter(~target), moved.select("position", *columns).join(kept, on="position")],
        how="diagonal",
    ).select(frame.columns)


def test_check_design_fails_on_an_unbalanced_exploratory_bundle() -> None:
    frame = exploratory()
    check_design(frame)
    # two Black names in the first half of one position-balanced bundle
    bundle = of_type(frame, "position_balanced").filter(pl.col("bundle_index") == 0)
    black = sorted(bundle.filter(pl.col("race") == "Black")["position"].to_list())
    white = sorted(bundle.filter(pl.col("race") == "White")["position"].to_list())
    first_black, second_white = black[0], next(p for p in white if p > 2)
    wrong = _swap(frame, "position_balanced", 0, first_black, second_white, "race", "pair_id")
    with pytest.raises(CompositionError) as raised:
        check_design(wrong)
    message = str(raised.value)
    assert "position_balanced" in message and "not balanced" in message
    # the wording of one paraphrase-matched bundle moved with its race: wording x position
    # stays balanced within the bundle, wording x race does not
    wrong = _swap(frame, "paraphrase_matched", 0, 1, 2, "attribute")
    with pytest.raises(CompositionError, match=r"paraphrase_matched \(domain=hiring, "
                       r"replicate=0\): attribute depends on (position|race)"):  # fmt: skip
        check_design(wrong)
