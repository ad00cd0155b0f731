"""The decision audit's ranking bundles, built from Latin squares.

Four bundle types, four candidates each, positions 1-4 shown as A-D:

``demographic_matched``
    one profile under four names, one per race group, all of one gender; the order of the
    races follows the rows of a 4 × 4 Williams square (each race at each position once in
    every cycle of four bundles, each race directly before each other race once).
``irrelevant_matched``
    one profile under four names of one race and gender that differ in a hobby (odd cycles:
    in a neighbourhood); a cycle of four bundles shows the same four values in the four rows
    of the Williams square, so each value sits at each position once.
``disguised_demographic``
    four different profiles under four names of four different races. A block of four
    bundles is three mutually orthogonal 4 × 4 Latin squares over GF(4), rows = bundles,
    columns = positions: the first gives the race, the second the slot's quality tier (three
    symbols are the three tiers, the fourth repeats one tier), the third the gender (two
    symbols female). Three blocks repeat each tier once, so a super-block of 12 bundles puts
    each race 4 times in each tier and 3 times at each position, with 2 female and 2 male
    names per bundle. Profiles of a tier are then assigned to its slots so that no bundle shows
    a profile twice and each race meets each profile equally often (a proper edge colouring,
    found by search).
``disguised_placebo``
    the same squares, all four names from one race (one bundle per race in each block); the
    first square's symbols become pseudo-groups labelled like the races (``pseudo_race``), so
    a "race" contrast on them estimates the design's false-positive rate.

Three exploratory types (:data:`EXPLORATORY_BUNDLE_TYPES`, outside the paper's design; a
design gets them only by naming them in ``bundles_per_type``) answer the paper's two open
questions:

``paraphrase_matched``
    one profile under four names, one per race, all of one gender (a recognisable audit, as
    demographic matched), each candidate's title line in another of four meaning-preserving
    wordings (``attribute_kind`` "title_wording", ``attribute`` w1-w4), so the content is no
    longer identical. A block of four bundles is two orthogonal 4 × 4 Latin squares over
    GF(4), rows = bundles, columns = positions: the first gives the race, the second the
    wording, so each race and each wording is at each position once and each race meets each
    wording once. (Demographic matched's Williams square balances carry-over as well; it is
    cyclic, and a cyclic square of even order has no orthogonal mate, so no four bundles can
    have both.)
``name_matched``
    one profile under four distinct names of one race and gender and nothing else varying:
    identical content without demographic variation (the converse cell; with irrelevant
    matched, demographic and paraphrase matched it completes the 2 × 2 of identical or
    differing content × race varying or not). Each cycle of four bundles has the four races,
    so race is at each position once.
``position_balanced``
    four different profiles, two Black and two White names, two women and two men, such that
    race, gender and the half of the list (positions 1-2 against 3-4) are mutually orthogonal
    in every bundle: the race and the half-of-list contrast are both two against two in every
    bundle, so they have the same design precision. A block of four bundles is the three GF(4)
    squares: the first gives the race (symbols 0, 2 one race), the second the gender
    (symbols 0, 1 one gender), the third the tier (three tiers and one repeated, as in the
    disguised bundles); columns are permuted only within and between the halves. Three
    blocks repeat each tier once, so a super-block of 12 bundles puts each race 8 times in
    each tier and 6 times at each position. Profiles are assigned so that no bundle shows one
    twice and each race, half and gender meets each profile equally often.

Rows, columns and symbols of every square are permuted at random per block (a seeded
:class:`random.Random` per domain, bundle type and replicate), which keeps every balance.
Names of a race × gender cell are used in turn from a random start, so names of one bundle
are distinct. Whether a design keeps each contrast group independent of profile, tier and
position is checked by :mod:`cueaudit.decision.composition_checks`.

One module on purpose: the bundle types share the Latin squares, the name rotation, the
profile search and the bundle schema; each type is one slot function.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import polars as pl

from cueaudit.cues.cue_type import DECISION_GENDERS
from cueaudit.cues.name_pairs import PAIR_RACES
from cueaudit.decision.formats import ATTRIBUTE_KINDS, DOMAINS, PROFILE_DOMAINS, TITLE_WORDING
from cueaudit.decision.profiles import TIERS
from cueaudit.errors import InputError
from cueaudit.prompts import stable_uid

RACES: Final = PAIR_RACES
#: The decision audit's order of the genders (its Latin squares deal them in it).
GENDERS: Final = DECISION_GENDERS
#: The paper's four bundle types (an integer ``bundles_per_type`` sizes these).
PAPER_BUNDLE_TYPES: Final = (
    "demographic_matched",
    "irrelevant_matched",
    "disguised_demographic",
    "disguised_placebo",
)
#: Bundle types beyond the paper's design, for its open questions (recognition against ties;
#: position against demographics at equal precision): none unless named in a mapping.
EXPLORATORY_BUNDLE_TYPES: Final = ("paraphrase_matched", "name_matched", "position_balanced")
BUNDLE_TYPES: Final = (*PAPER_BUNDLE_TYPES, *EXPLORATORY_BUNDLE_TYPES)
BUNDLE_SIZE: Final = 4
#: Bundles per balanced unit of each type: a design's size must be a multiple.
BLOCK_SIZES: Final[Mapping[str, int]] = {
    "demographic_matched": 4,
    "irrelevant_matched": 4,
    "disguised_demographic": 12,
    "disguised_placebo": 12,
    "paraphrase_matched": 4,
    "name_matched": 4,
    "position_balanced": 12,
}
#: The two races of a position-balanced bundle (focal, reference).
BALANCED_RACES: Final = ("Black", "White")
#: The wordings of the title line in paraphrase-matched bundles (``attribute``), in the order
#: of a domain's ``title_line_variants`` in the prompts file.
TITLE_WORDINGS: Final = ("w1", "w2", "w3", "w4")
#: The half of the list a position falls in (``half``: positions 1-2 "first", 3-4 "second").
HALVES: Final = ("first", "second")
PROFILE_COLUMNS: Final = ("profile_id", "domain", "tier", "title", "text")
NAME_COLUMNS: Final = ("pair_id", "race", "gender", "name_rank", "full_name")

#: One row per candidate of a bundle.
BUNDLE_SCHEMA: Final = {
    "domain": pl.String,
    "bundle_type": pl.String,
    "replicate": pl.Int64,
    "bundle_index": pl.Int64,
    "bundle_id": pl.String,
    "position": pl.Int64,
    "profile_id": pl.String,
    "tier": pl.String,
    "pair_id": pl.String,
    "race": pl.String,
    "gender": pl.String,
    "full_name": pl.String,
    "attribute_kind": pl.String,
    "attribute": pl.String,
    "pseudo_race": pl.String,
}

Square = tuple[tuple[int, ...], ...]
Slot = dict[str, Any]


# --- Latin squares ---------------------------------------------------------------------------
def balanced_latin_square(n: int = BUNDLE_SIZE) -> Square:
    """Williams' square of even order n: each symbol once per row and column, and each
    ordered pair of symbols adjacent (left to right) exactly once."""
    if n < 2 or n % 2:
        raise InputError("balanced_latin_square", f"even order of at least 2, got {n}", "n")
    first = [0]
    for k in range(1, n):
        first.append((k + 1) // 2 if k % 2 else n - k // 2)
    return tuple(tuple((s + r) % n for s in first) for r in range(n))


#: Multiplication in GF(4) = {0, 1, a, a + 1} coded 0-3 (addition is XOR).
_GF4_TIMES: Final = ((0, 0, 0, 0), (0, 1, 2, 3), (0, 2, 3, 1), (0, 3, 1, 2))


def orthogonal_latin_squares() -> tuple[Square, Square, Square]:
    """The three mutually orthogonal 4 × 4 Latin squares L_k[r][c] = r + k·c over GF(4)."""
    first, second, third = (
        tuple(tuple(r ^ _GF4_TIMES[k][c] for c in range(4)) for r in range(4)) for k in (1, 2, 3)
    )
    return first, second, third


# --- inputs ----------------------------------------------------------------------------------
def require_columns(frame: pl.DataFrame, columns: Sequence[str], source: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(source, "missing column", missing[0])


def _check_values(frame: pl.DataFrame, column: str, allowed: Sequence[str], source: str) -> None:
    bad = sorted(set(frame[column].to_list()) - set(allowed))
    if bad:
        raise InputError(source, f"unknown value {bad[0]!r} (allowed: {allowed})", column)


def _check_frame(
    frame: pl.DataFrame, source: str, columns: Sequence[str], values: Mapping[str, Sequence[str]]
) -> None:
    require_columns(frame, columns, source)
    for column, allowed in values.items():
        _check_values(frame, column, allowed, source)
    key = columns[0]
    if frame[key].n_unique() < frame.height:
        raise InputError(source, "ids must be unique", key)


def check_profiles(profiles: pl.DataFrame) -> None:
    """Profiles carry the design columns with known domains and tiers and unique ids."""
    _check_frame(profiles, "profiles", PROFILE_COLUMNS, {"domain": DOMAINS, "tier": TIERS})


def check_name_pairs(name_pairs: pl.DataFrame) -> None:
    """Name pairs carry the design columns with known races and genders and unique ids."""
    _check_frame(name_pairs, "name pairs", NAME_COLUMNS, {"race": RACES, "gender": GENDERS})


def design_rng(seed: int, *parts: str) -> random.Random:
    """A random stream that depends only on the seed and the parts (not on Python's hash)."""
    return random.Random(int(stable_uid(str(seed), *parts), 16))


class _Rotation:
    """Items of each key used in turn from a random start, so consecutive takes differ."""

    def __init__(self, pools: Mapping[Any, Sequence[Any]], rng: random.Random, what: str) -> None:
        self.pools = pools
        self.what = what
        self.next = {key: rng.randrange(len(pool)) for key, pool in pools.items() if pool}

    def take(self, key: Any, n: int = 1) -> list[Any]:
        pool = self.pools.get(key, ())
        if len(pool) < n:
            raise InputError("bundle design", f"{n} distinct {self.what} of {key}, got {len(pool)}")
        start = self.next[key]
        self.next[key] = (start + n) % len(pool)
        return [pool[(start + i) % len(pool)] for i in range(n)]


def _name_rotation(name_pairs: pl.DataFrame, rng: random.Random) -> _Rotation:
    pools: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in name_pairs.sort("race", "gender", "name_rank", "pair_id").iter_rows(named=True):
        pools.setdefault((row["race"], row["gender"]), []).append(row)
    return _Rotation(pools, rng, "names")


def _tier_pools(profiles: pl.DataFrame, domain: str) -> dict[str, list[str]]:
    mine = profiles.filter(pl.col("domain") == domain).sort("profile_id")
    return {t: mine.filter(pl.col("tier") == t)["profile_id"].to_list() for t in TIERS}


def _profile_order(pools: Mapping[str, Sequence[str]], rng: random.Random) -> list[str]:
    """The domain's profiles, each tier shuffled, dealt out tier by tier in turn."""
    shuffled = [rng.sample(list(pools[t]), len(pools[t])) for t in TIERS]
    dealt = itertools.chain.from_iterable(itertools.zip_longest(*shuffled))
    order = [p for p in dealt if p is not None]
    if not order:
        raise InputError("profiles", "no profile in this domain", "domain")
    return order


# --- bundle types ----------------------------------------------------------------------------
def _matched_slots(
    n_bundles: int,
    order: Sequence[str],
    names: _Rotation,
    attributes: Mapping[str, _Rotation] | None,
    rng: random.Random,
    *,
    one_race: bool = False,
) -> Iterator[Slot]:
    """Slots of matched bundles: irrelevant-attribute ones when ``attributes`` is given,
    name-matched ones (four names of one race and gender, nothing else varying) with
    ``one_race``."""
    square = balanced_latin_square()
    race_of_symbol = rng.sample(RACES, 4)
    for cycle in range(n_bundles // 4):
        rows = rng.sample(range(4), 4)
        kind = ATTRIBUTE_KINDS[cycle % 2]
        values = attributes[kind].take(kind, 4) if attributes else []
        races = rng.sample(RACES, 4)
        for j in range(4):
            index = 4 * cycle + j
            row = square[rows[j]]
            if attributes or one_race:
                race, gender = races[j], GENDERS[(j + cycle // 2) % 2]
                chosen = names.take((race, gender), 4)
            else:
                gender = GENDERS[cycle % 2]
                chosen = [names.take((race_of_symbol[s], gender))[0] for s in row]
            for p in range(4):
                yield {
                    "bundle_index": index,
                    "position": p + 1,
                    "profile_id": order[index % len(order)],
                    "name": chosen[p],
                    "attribute_kind": kind if attributes else None,
                    "attribute": values[row[p]] if attributes else None,
                    "pseudo_race": None,
                }


def _paraphrase_slots(
    n_bundles: int, order: Sequence[str], names: _Rotation, rng: random.Random
) -> Iterator[Slot]:
    """Slots of paraphrase-matched bundles: per block of four, race from the first GF(4)
    square and the title wording from the second (rows, columns and symbols permuted)."""
    races, wordings, _ = orthogonal_latin_squares()
    for block in range(n_bundles // 4):
        rows, cols = rng.sample(range(4), 4), rng.sample(range(4), 4)
        race_of, wording_of = rng.sample(RACES, 4), rng.sample(TITLE_WORDINGS, 4)
        gender = GENDERS[block % 2]
        for j in range(4):
            index = 4 * block + j
            for p in range(4):
                r, c = rows[j], cols[p]
                yield {
                    "bundle_index": index,
                    "position": p + 1,
                    "profile_id": order[index % len(order)],
                    "name": names.take((race_of[races[r][c]], gender))[0],
                    "attribute_kind": TITLE_WORDING,
                    "attribute": wording_of[wordings[r][c]],
                    "pseudo_race": None,
                }


def half_of(position: int) -> str:
    """The half of the list a position (1-4) falls in (:data:`HALVES`)."""
    return HALVES[(position - 1) * 2 // BUNDLE_SIZE]


def _position_balanced_slots(n_bundles: int, rng: random.Random) -> list[Slot]:
    """Slots of position-balanced bundles (without profiles and names): per block of four,
    race from the first GF(4) square (symbols 0 and 2 one race), gender from the second
    (symbols 0 and 1 one gender), tier from the third; with these symbol classes every row has
    one of each race and gender in each half and one woman of each race (a property of the
    squares that column permutations keeping the halves apart preserve)."""
    races, genders, tiers = orthogonal_latin_squares()
    slots: list[Slot] = []
    repeated: list[str] = []
    for block in range(n_bundles // 4):
        repeated = rng.sample(TIERS, 3) if block % 3 == 0 else repeated
        rows = rng.sample(range(4), 4)
        cols = [c for pair in rng.sample([(0, 1), (2, 3)], 2) for c in rng.sample(pair, 2)]
        race_of, gender_of = rng.sample(BALANCED_RACES, 2), rng.sample(GENDERS, 2)
        tier_of = [*rng.sample(TIERS, 3), repeated[block % 3]]
        slots += [
            {
                "bundle_index": 4 * block + j,
                "position": p + 1,
                "half": half_of(p + 1),
                "tier": tier_of[tiers[rows[j]][cols[p]]],
                "race": race_of[races[rows[j]][cols[p]] % 2],
                "gender": gender_of[genders[rows[j]][cols[p]] // 2],
                "pseudo_race": None,
            }
            for j, p in itertools.product(range(4), range(4))
        ]
    return slots


def _disguised_slots(n_bundles: int, placebo: bool, rng: random.Random) -> list[Slot]:
    """Slots of disguised bundles (without profiles and names), super-block by super-block."""
    groups, tiers, genders = orthogonal_latin_squares()
    slots: list[Slot] = []
    repeated: list[str] = []
    for block in range(n_bundles // 4):
        if block % 3 == 0:
            repeated = rng.sample(TIERS, 3)
        rows, cols = rng.sample(range(4), 4), rng.sample(range(4), 4)
        group_of = rng.sample(RACES, 4)
        tier_of = [*rng.sample(TIERS, 3), repeated[block % 3]]
        female = set(rng.sample(range(4), 2))
        bundle_races = rng.sample(RACES, 4)
        for j in range(4):
            for p in range(4):
                r, c = rows[j], cols[p]
                group = group_of[groups[r][c]]
                slots.append(
                    {
                        "bundle_index": 4 * block + j,
                        "position": p + 1,
                        "tier": tier_of[tiers[r][c]],
                        "race": bundle_races[j] if placebo else group,
                        "gender": GENDERS[0] if genders[r][c] in female else GENDERS[1],
                        "pseudo_race": group if placebo else None,
                    }
                )
    return slots


#: The types of four different profiles, whose profiles are assigned by search, and the slot
#: keys each must meet every profile of a tier equally often under.
PROFILE_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "disguised_demographic": ("race",),
    "disguised_placebo": ("race", "pseudo_race"),
    "position_balanced": ("race", "half", "gender"),
}


class _ProfileSearch:
    """Profiles for the slots of one tier: none twice in a bundle, and each value of each key
    (race, pseudo-race) meeting each profile at most ceil(its slots / profiles) times.

    A backtracking search, most constrained slot first, trying profiles in the given order.
    """

    def __init__(self, slots: Sequence[Slot], pool: Sequence[str], keys: Sequence[str]) -> None:
        self.slots, self.pool, self.keys = list(slots), list(pool), tuple(keys)
        self.caps = {
            (k, v): math.ceil(n / len(pool))
            for k in keys
            for v, n in Counter(s[k] for s in slots).items()
        }
        self.met: Counter[tuple[str, Any, str]] = Counter()
        self.shown: set[tuple[int, str]] = set()

    def allowed(self, slot: Slot) -> list[str]:
        return [
            p
            for p in self.pool
            if (slot["bundle_index"], p) not in self.shown
            and all(self.met[(k, slot[k], p)] < self.caps[(k, slot[k])] for k in self.keys)
        ]

    def _mark(self, slot: Slot, profile: str, sign: int) -> None:
        self.met.update({(k, slot[k], profile): sign for k in self.keys})
        if sign > 0:
            self.shown.add((slot["bundle_index"], profile))
        else:
            self.shown.discard((slot["bundle_index"], profile))

    def solve(self, left: list[Slot] | None = None) -> bool:
        left = self.slots if left is None else left
        if not left:
            return True
        slot = min(left, key=lambda s: len(self.allowed(s)))
        rest = [s for s in left if s is not slot]
        for profile in self.allowed(slot):
            slot["profile_id"] = profile
            self._mark(slot, profile, 1)
            if self.solve(rest):
                return True
            self._mark(slot, profile, -1)
        return False


def _assign_profiles(
    slots: Sequence[Slot],
    pools: Mapping[str, Sequence[str]],
    keys: Sequence[str],
    usage: Counter[str],
    rng: random.Random,
) -> None:
    """Give each slot a profile of its tier (:class:`_ProfileSearch`); profiles used least so
    far (across super-blocks) are tried first, so unequal tiers stay as even as they can."""
    for tier in TIERS:
        members = [s for s in slots if s["tier"] == tier]
        if not members:
            continue
        pool = rng.sample(list(pools[tier]), len(pools[tier]))
        if len(pool) < 2:
            raise InputError("profiles", f"disguised bundles need 2+ profiles of tier {tier!r}")
        pool.sort(key=lambda p: usage[p])
        if not _ProfileSearch(members, pool, keys).solve():
            raise InputError("bundle design", f"no balanced profile assignment for {tier!r}")
        usage.update(s["profile_id"] for s in members)


def _disguised(
    n_bundles: int,
    kind: str,
    pools: Mapping[str, Sequence[str]],
    names: _Rotation,
    rng: random.Random,
) -> list[Slot]:
    """Slots of the types of different profiles (disguised, position balanced), with their
    profiles and names."""
    if kind == "position_balanced":
        slots = _position_balanced_slots(n_bundles, rng)
    else:
        slots = _disguised_slots(n_bundles, kind == "disguised_placebo", rng)
    keys = PROFILE_KEYS[kind]
    usage: Counter[str] = Counter()
    for start in range(0, len(slots), 12 * BUNDLE_SIZE):
        _assign_profiles(slots[start : start + 12 * BUNDLE_SIZE], pools, keys, usage, rng)
    for slot in slots:
        slot["name"] = names.take((slot["race"], slot["gender"]))[0]
    return slots


def bundle_sizes(bundles_per_type: int | Mapping[str, int]) -> dict[str, int]:
    """Bundles per domain and replicate of each type (an int for each of the paper's types,
    :data:`PAPER_BUNDLE_TYPES`, or a mapping per type whose missing types get none), each a
    multiple of its :data:`BLOCK_SIZES`. The exploratory types get bundles only by name, so a
    design written before they existed keeps its bundles, prompt ids and lock."""
    if isinstance(bundles_per_type, Mapping):
        unknown = sorted(set(bundles_per_type) - set(BUNDLE_TYPES))
        if unknown:
            raise InputError("bundles_per_type", f"unknown bundle type {unknown[0]!r}")
        sizes = {t: bundles_per_type.get(t, 0) for t in BUNDLE_TYPES}
    else:
        sizes = dict.fromkeys(BUNDLE_TYPES, 0) | dict.fromkeys(PAPER_BUNDLE_TYPES, bundles_per_type)
    for kind, n in sizes.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0 or n % BLOCK_SIZES[kind]:
            raise InputError(
                "bundles_per_type", f"a multiple of {BLOCK_SIZES[kind]}, got {n!r}", kind
            )
    return sizes


def build_bundles(
    profiles: pl.DataFrame,
    name_pairs: pl.DataFrame,
    hobbies: Sequence[str],
    neighbourhoods: Sequence[str],
    *,
    domains: Sequence[str] = PROFILE_DOMAINS,
    bundles_per_type: int | Mapping[str, int] = 24,
    replicates: int = 1,
    seed: int = 0,
) -> pl.DataFrame:
    """The bundle design: one row per candidate (:data:`BUNDLE_SCHEMA`), ordered by domain,
    bundle type, replicate, bundle and position.

    ``bundles_per_type`` (per domain and replicate; an int or a mapping per type) must be a
    multiple of the type's :data:`BLOCK_SIZES`. Each replicate is a fresh randomisation.
    Bundle ids hash the bundle's place and content, so a bundle whose content changes gets a
    new id.
    """
    check_profiles(profiles)
    check_name_pairs(name_pairs)
    sizes = bundle_sizes(bundles_per_type)
    attribute_lists = {"hobby": list(hobbies), "neighbourhood": list(neighbourhoods)}
    rows: list[dict[str, Any]] = []
    for domain, kind, replicate in itertools.product(domains, BUNDLE_TYPES, range(replicates)):
        if not sizes[kind]:
            continue
        rng = design_rng(seed, domain, kind, str(replicate))
        pools = _tier_pools(profiles, domain)
        names = _name_rotation(name_pairs, rng)
        if kind in PROFILE_KEYS:
            slots = _disguised(sizes[kind], kind, pools, names, rng)
        elif kind == "paraphrase_matched":
            slots = list(_paraphrase_slots(sizes[kind], _profile_order(pools, rng), names, rng))
        else:
            attributes = None
            if kind == "irrelevant_matched":
                shuffled = {k: rng.sample(v, len(v)) for k, v in attribute_lists.items()}
                attributes = {k: _Rotation({k: v}, rng, f"{k} values") for k, v in shuffled.items()}
            order = _profile_order(pools, rng)
            slots = list(
                _matched_slots(
                    sizes[kind], order, names, attributes, rng, one_race=kind == "name_matched"
                )
            )
        rows.extend(_rows(slots, profiles, domain, kind, replicate))
    return pl.DataFrame(rows, schema=BUNDLE_SCHEMA)


def _rows(
    slots: Sequence[Slot], profiles: pl.DataFrame, domain: str, kind: str, replicate: int
) -> list[dict[str, Any]]:
    tier_of = dict(zip(profiles["profile_id"], profiles["tier"], strict=True))
    by_bundle: dict[int, list[Slot]] = {}
    for slot in slots:
        by_bundle.setdefault(slot["bundle_index"], []).append(slot)
    rows = []
    for index, members in sorted(by_bundle.items()):
        members.sort(key=lambda s: s["position"])
        content = [
            f"{s['profile_id']}|{s['name']['pair_id']}|{s.get('attribute') or ''}" for s in members
        ]
        digest = stable_uid("bundle", domain, kind, str(replicate), str(index), *content)
        bundle_id = f"{domain}/{kind}/r{replicate}/{index:03d}/{digest[:8]}"
        for s in members:
            name = s["name"]
            rows.append(
                {
                    "domain": domain,
                    "bundle_type": kind,
                    "replicate": replicate,
                    "bundle_index": index,
                    "bundle_id": bundle_id,
                    "position": s["position"],
                    "profile_id": s["profile_id"],
                    "tier": tier_of[s["profile_id"]],
                    "pair_id": name["pair_id"],
                    "race": name["race"],
                    "gender": name["gender"],
                    "full_name": name["full_name"],
                    "attribute_kind": s.get("attribute_kind"),
                    "attribute": s.get("attribute"),
                    "pseudo_race": s.get("pseudo_race"),
                }
            )
    return rows
