"""Which profiles of each quality tier a decision design uses: ``decision.design.tier_rule``.

A profile file need not have as many profiles in each tier: AgentFairBench's public split
has 4 / 5 / 3 (hiring), 5 / 5 / 2 (lending) and 4 / 5 / 3 (triage) clear-yes / borderline /
clear-no profiles. The rule says what the design does with that, and the expected row counts
(:func:`cueaudit.decision.design_settings.expected_counts`) follow it from the file's tier
counts, so the tables built always have the counts printed before the run:

``equal`` (default)
    Rate and Decide cross ``profiles_per_tier`` profiles of each tier (the first by id); a
    tier with fewer is refused, naming the file, its tier counts and the other two rules.
    Bundles draw on every profile of the domain.
``smallest``
    Each domain keeps, per tier, as many profiles as its smallest tier has, drawn at random
    per seed, domain and tier (:func:`cueaudit.decision.design.design_rng`); Rate and Decide
    cross the first ``min(profiles_per_tier, smallest)`` of each tier's draw, and the bundles
    draw on the kept profiles only, so every table of the domain shows its tiers equally.
``available``
    Rate and Decide cross ``min(profiles_per_tier, n)`` profiles of a tier of ``n`` (the first
    by id); bundles draw on every profile (the Latin squares over the available profiles: the
    disguised bundles' tier slots are balanced by construction, race × profile as evenly as
    the tier's size allows, checked by chi-square when it does not divide 4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, NamedTuple

import polars as pl

from cueaudit.decision.design import design_rng
from cueaudit.decision.profiles import TIERS, ProfileFormat, load_profiles, tier_counts
from cueaudit.errors import InputError

TIER_RULES: Final = ("equal", "smallest", "available")
DEFAULT_TIER_RULE: Final = TIER_RULES[0]

#: ``{domain: {tier: n}}``, as :func:`cueaudit.decision.profiles.tier_counts` gives it.
TierCounts = Mapping[str, Mapping[str, int]]


def check_tier_rule(rule: object) -> str:
    if rule not in TIER_RULES:
        raise InputError(
            "decision settings", f"unknown {rule!r} (known: {', '.join(TIER_RULES)})", "tier_rule"
        )
    return str(rule)


def nominal_tier_counts(
    domains: Sequence[str], profiles_per_tier: int
) -> dict[str, dict[str, int]]:
    """The tier counts of a file with exactly ``profiles_per_tier`` profiles in every tier."""
    return {d: dict.fromkeys(TIERS, profiles_per_tier) for d in domains}


def _counts_text(counts: Mapping[str, int]) -> str:
    return " / ".join(f"{counts.get(t, 0)} {t}" for t in TIERS)


def _smallest(counts: Mapping[str, int]) -> int:
    return min(counts.get(t, 0) for t in TIERS)


def crossed_per_tier(
    tier_counts: TierCounts,
    *,
    domains: Sequence[str],
    rule: str,
    profiles_per_tier: int,
    source: str = "profiles",
    crossing: bool = True,
) -> dict[str, dict[str, int]]:
    """The profiles each domain and tier gives Rate and Decide under ``rule``; ``source``
    (the profile file) names the error of a domain the rule cannot use. A design without
    Rate or Decide (``crossing`` false) needs only a profile in every tier."""
    check_tier_rule(rule)
    used: dict[str, dict[str, int]] = {}
    for domain in domains:
        counts = tier_counts.get(domain, {})
        smallest = _smallest(counts)
        if smallest == 0:
            raise InputError(
                source,
                f"domain {domain!r} has {_counts_text(counts)} profiles: every tier needs one",
                "tier",
            )
        if crossing and rule == "equal" and smallest < profiles_per_tier:
            short = next(t for t in TIERS if counts.get(t, 0) < profiles_per_tier)
            raise InputError(
                source,
                f"domain {domain!r} has {_counts_text(counts)} profiles, and tier_rule equal "
                f"needs profiles_per_tier {profiles_per_tier} in each ({short} has "
                f"{counts.get(short, 0)}): set decision.design.tier_rule to smallest "
                f"({min(smallest, profiles_per_tier)} per tier, drawn by seed) or available "
                "(every profile up to profiles_per_tier), or lower profiles_per_tier",
                "tier",
            )
        if rule == "smallest":
            used[domain] = dict.fromkeys(TIERS, min(profiles_per_tier, smallest))
        else:
            used[domain] = {t: min(profiles_per_tier, counts[t]) for t in TIERS}
    return used


def bundled_per_tier(
    tier_counts: TierCounts, *, domains: Sequence[str], rule: str
) -> dict[str, dict[str, int]]:
    """The profiles each domain and tier gives the bundles under ``rule`` (every profile, or
    under ``smallest`` as many as the domain's smallest tier)."""
    check_tier_rule(rule)
    used = {}
    for domain in domains:
        counts = tier_counts.get(domain, {})
        smallest = _smallest(counts)
        used[domain] = {t: smallest if rule == "smallest" else counts.get(t, 0) for t in TIERS}
    return used


def describe_tiers(
    tier_counts: TierCounts,
    *,
    domains: Sequence[str],
    rule: str,
    profiles_per_tier: int,
    crossing: bool = True,
) -> str:
    """One line for the counts printed before a run: the profiles per tier each domain gives
    Rate / Decide (``crossing``: the design has them) and the bundles."""
    crossed = crossed_per_tier(
        tier_counts,
        domains=domains,
        rule=rule,
        profiles_per_tier=profiles_per_tier,
        crossing=crossing,
    )
    bundled = bundled_per_tier(tier_counts, domains=domains, rule=rule)

    def listed(used: Mapping[str, Mapping[str, int]]) -> str:
        return ", ".join(f"{d} {'/'.join(str(used[d][t]) for t in TIERS)}" for d in domains)

    rated = f"Rate / Decide {listed(crossed)}; " if crossing else ""
    return (
        f"profiles per tier ({'/'.join(TIERS)}, tier_rule {rule}): {rated}bundles {listed(bundled)}"
    )


def profile_tier_counts(
    path: str | Path, format: ProfileFormat = "cueaudit", strip_suffixes: Sequence[str] = ()
) -> dict[str, dict[str, int]]:
    """The tier counts of a profile file, read as the prompt builder reads it."""
    return tier_counts(load_profiles(path, format, strip_suffixes))


class TierSelection(NamedTuple):
    """The profiles Rate and Decide cross, and the profiles bundles draw on."""

    crossed: pl.DataFrame
    bundled: pl.DataFrame


def select_profiles(
    profiles: pl.DataFrame,
    *,
    domains: Sequence[str],
    rule: str,
    profiles_per_tier: int,
    seed: int,
    source: str = "profiles",
    crossing: bool = True,
) -> TierSelection:
    """The profiles of ``domains`` each table uses under ``rule`` (the module docstring);
    ``crossed`` holds exactly :func:`crossed_per_tier` profiles of each domain and tier."""
    mine = profiles.filter(pl.col("domain").is_in(domains))
    counts = tier_counts(mine)
    per_tier = crossed_per_tier(
        counts,
        domains=domains,
        rule=rule,
        profiles_per_tier=profiles_per_tier,
        source=source,
        crossing=crossing,
    )
    crossed: list[str] = []
    bundled: list[str] = []
    for domain in domains:
        for tier in TIERS:
            in_tier = (pl.col("domain") == domain) & (pl.col("tier") == tier)
            ids = sorted(mine.filter(in_tier)["profile_id"].to_list())
            if rule == "smallest":
                rng = design_rng(seed, "tier_rule", domain, tier)
                ids = rng.sample(ids, _smallest(counts[domain]))
            bundled.extend(ids)
            crossed.extend(ids[: per_tier[domain][tier]])
    return TierSelection(
        crossed=mine.filter(pl.col("profile_id").is_in(crossed)),
        bundled=mine.filter(pl.col("profile_id").is_in(bundled)),
    )
