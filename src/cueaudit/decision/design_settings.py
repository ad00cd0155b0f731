"""The settings a decision design's prompt tables are built from (:class:`DesignSettings`,
read from ``decision.design`` and an extension's own keys; :func:`arm_designs` is the one place
an arm's design is made), and the rows each task's table will have, known before any table is
built (:func:`expected_counts`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from cueaudit.config import schema_defaults
from cueaudit.decision import cue_signals as cue_types
from cueaudit.decision import design, tiers
from cueaudit.decision.formats import DOMAINS
from cueaudit.decision.tasks import NAME_ASSIGNMENTS, PRIMARY, TASKS
from cueaudit.errors import InputError

#: The schema that holds every design key's default (:func:`design_defaults`).
DESIGN_SCHEMA: Final = ("decision.schema.yaml", "design")


def design_defaults() -> Mapping[str, Any]:
    """Each ``decision.design`` key's default, as the schema fills it in on validation."""
    return schema_defaults(*DESIGN_SCHEMA)


def _integer(settings: Mapping[str, Any], key: str, minimum: int) -> int:
    value = settings[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError("decision settings", f"an integer of at least {minimum}", key)
    return value


def _choices(settings: Mapping[str, Any], key: str, known: Sequence[str]) -> tuple[str, ...]:
    value = settings[key]
    if not isinstance(value, list | tuple) or not value:
        raise InputError("decision settings", f"a non-empty list of: {', '.join(known)}", key)
    unknown = [v for v in value if v not in known]
    if unknown:
        raise InputError("decision settings", f"unknown {unknown[0]!r} (known: {known})", key)
    return tuple(dict.fromkeys(value))


def _choice(settings: Mapping[str, Any], key: str, known: Sequence[str]) -> str:
    value = settings[key]
    if value not in known:
        raise InputError("decision settings", f"one of {', '.join(known)}, got {value!r}", key)
    return str(value)


def arm_designs(
    design: Mapping[str, Any], extensions: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Arm -> design settings: the pre-registered ``design``, then each extension's (the
    pre-registered design with the keys of the extension's own ``design`` replaced), in the
    order given. A validated config's design has every key (the schema fills them in), so an
    extension inherits each key it leaves out from the pre-registered one."""
    arms = {PRIMARY: dict(design)}
    for arm, own in extensions.items():
        arms[arm] = {**design, **own}
    return arms


@dataclass(frozen=True)
class DesignSettings:
    """The settings the prompt tables are built from (see :meth:`of` for the keys); the one
    reader of a design's keys."""

    prompts: str
    seed: int
    domains: tuple[str, ...]
    tasks: tuple[str, ...]
    paraphrases: int
    profiles_per_tier: int
    names_per_cell: int
    bundles_per_type: Mapping[str, int]
    replicates: int
    probe_bundles: int
    tier_rule: str
    name_assignment: str
    cues: tuple[str, ...]

    @property
    def crosses_profiles(self) -> bool:
        """Whether the design has a Rate or Decide task (profiles crossed with names)."""
        return any(TASKS[t].format in ("rate", "decide") for t in self.tasks)

    @property
    def bundle_cues(self) -> tuple[str, ...]:
        """The listed cue types that fill the ranking bundles and probes (four races)."""
        return tuple(c for c in self.cues if c in cue_types.BUNDLE_CUES)

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> DesignSettings:
        """Read the keys ``prompts, seed, domains, tasks, paraphrases, profiles_per_tier,
        names_per_cell, bundles_per_type (an int or one per bundle type), replicates,
        probe_bundles, tier_rule`` (:mod:`cueaudit.decision.tiers`), ``name_assignment``,
        ``cues`` (:mod:`cueaudit.decision.cue_signals`), a key left out taking the schema's
        default (:func:`design_defaults`); other keys are ignored (they belong to other parts
        of the study)."""
        values = {**design_defaults(), **settings}
        prompts = values["prompts"]
        if not isinstance(prompts, str) or not prompts:
            raise InputError("decision settings", "a path", "prompts")
        return _checked_cues(
            cls(
                prompts=prompts,
                seed=_integer(values, "seed", 0),
                domains=_choices(values, "domains", DOMAINS),
                tasks=_choices(values, "tasks", tuple(TASKS)),
                paraphrases=_integer(values, "paraphrases", 1),
                profiles_per_tier=_integer(values, "profiles_per_tier", 1),
                names_per_cell=_integer(values, "names_per_cell", 1),
                bundles_per_type=design.bundle_sizes(values["bundles_per_type"]),
                replicates=_integer(values, "replicates", 1),
                probe_bundles=_integer(values, "probe_bundles", 0),
                tier_rule=tiers.check_tier_rule(values["tier_rule"]),
                name_assignment=_choice(values, "name_assignment", NAME_ASSIGNMENTS),
                cues=cue_types.check_cues(values["cues"]),
            )
        )

    def probed(self, bundle_type: str) -> int:
        return min(self.probe_bundles, self.bundles_per_type[bundle_type])


def listed_cues(designs: Iterable[Mapping[str, Any]]) -> set[str]:
    """The cue types any of ``designs`` lists (the resources to load)."""
    return {cue for settings in designs for cue in DesignSettings.of(settings).cues}


def _checked_cues(cfg: DesignSettings) -> DesignSettings:
    """Refuse a cue type the design cannot show: dialect outside first-person domains, a
    ranking or probe task without a four-race cue type, another cue beside the confounded
    construction (which deals out name pairs)."""
    for cue in set(cfg.cues) & set(cue_types.OWN_WORDS_CUES):
        other = [d for d in cfg.domains if d not in cue_types.FIRST_PERSON_DOMAINS]
        if other:
            raise InputError(
                "decision settings",
                f"the {cue} cue shows a candidate's own words: only domains with "
                f"first-person text ({', '.join(cue_types.FIRST_PERSON_DOMAINS)}) have them, "
                f"not {', '.join(other)}",
                "cues",
            )
    bundled = [t for t in cfg.tasks if TASKS[t].format in ("rank", "probe")]
    if bundled and not cfg.bundle_cues:
        raise InputError(
            "decision settings",
            f"{bundled[0]} shows four-race bundles, and cues {list(cfg.cues)} signal fewer races: "
            f"add one of {', '.join(cue_types.BUNDLE_CUES)} or drop the ranking and probe tasks",
            "cues",
        )
    if cfg.name_assignment != NAME_ASSIGNMENTS[0] and cfg.cues != cue_types.DEFAULT_CUES:
        raise InputError(
            "decision settings",
            f"name_assignment {cfg.name_assignment} deals out name pairs: it runs with cues "
            f"[{cue_types.NAME_PAIR}] only, not {list(cfg.cues)}",
            "cues",
        )
    return cfg


def expected_counts(
    settings: Mapping[str, Any],
    tier_counts: tiers.TierCounts | None = None,
    *,
    profiles_file: str = "profiles",
) -> dict[str, int]:
    """The number of rows each task's table has in the design the settings describe, on a
    profile file (``profiles_file``, named in errors) with ``tier_counts`` profiles per domain
    and tier (:func:`cueaudit.decision.profiles.tier_counts`; default: ``profiles_per_tier``
    in every tier), under the design's ``tier_rule`` (:mod:`cueaudit.decision.tiers`): the sum
    over its cue types of :func:`expected_counts_by_cue`."""
    by_cue = expected_counts_by_cue(settings, tier_counts, profiles_file=profiles_file)
    tasks = DesignSettings.of(settings).tasks
    return {task: sum(counts[task] for counts in by_cue.values()) for task in tasks}


def expected_counts_by_cue(
    settings: Mapping[str, Any],
    tier_counts: tiers.TierCounts | None = None,
    *,
    profiles_file: str = "profiles",
) -> dict[str, dict[str, int]]:
    """Cue type -> the rows each task's table has of that cue type (see
    :func:`expected_counts`): Rate and Decide, every crossed profile under each signal of the
    cue (:func:`cueaudit.decision.cue_signals.signals_per_profile`); rankings and probes, every
    bundle once per cue type that fills the four-race bundles, none for the others."""
    cfg = DesignSettings.of(settings)
    if tier_counts is None:
        tier_counts = tiers.nominal_tier_counts(cfg.domains, cfg.profiles_per_tier)
    per_tier = tiers.crossed_per_tier(
        tier_counts,
        domains=cfg.domains,
        rule=cfg.tier_rule,
        profiles_per_tier=cfg.profiles_per_tier,
        source=profiles_file,
        crossing=cfg.crosses_profiles,
    )
    profiles = sum(n for counts in per_tier.values() for n in counts.values())
    per_domain = len(cfg.domains) * cfg.replicates
    bundles = per_domain * sum(cfg.bundles_per_type.values())
    probed = per_domain * sum(cfg.probed(t) for t in design.BUNDLE_TYPES)
    counts = {}
    for cue in cfg.cues:
        crossed = profiles * cue_types.signals_per_profile(cue, cfg.names_per_cell)
        if cfg.name_assignment == "fixed_per_profile":  # one race's pairs per profile
            crossed //= len(design.RACES)
        filled = cue in cue_types.BUNDLE_CUES
        rows = {
            "rate": crossed,
            "decide": crossed,
            "rank": bundles if filled else 0,
            "probe": probed if filled else 0,
        }
        counts[cue] = {task: rows[TASKS[task].format] * cfg.paraphrases for task in cfg.tasks}
    return counts


def tier_summary(settings: Mapping[str, Any], tier_counts: tiers.TierCounts) -> str:
    """The profiles per tier the design uses on a file of ``tier_counts``
    (:func:`cueaudit.decision.tiers.describe_tiers`), printed with the expected counts."""
    cfg = DesignSettings.of(settings)
    return tiers.describe_tiers(
        tier_counts,
        domains=cfg.domains,
        rule=cfg.tier_rule,
        profiles_per_tier=cfg.profiles_per_tier,
        crossing=cfg.crosses_profiles,
    )
