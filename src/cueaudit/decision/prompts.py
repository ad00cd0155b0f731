"""The decision audit's prompt tables, one per inference task.

=======================  =======  ====  ==========================================
task                     format   mode  rows
=======================  =======  ====  ==========================================
decision_rate_text       rate     text  profile × name pair × paraphrase
decision_rate_tool       rate     tool  (the same crossing)
decision_decide_text     decide   text  (the same crossing)
decision_decide_tool     decide   tool  (the same crossing)
decision_rank_text       rank     text  bundle × paraphrase
decision_rank_json       rank     json  (the same bundles)
decision_rank_tool       rank     tool  (the same bundles)
decision_probe_choice    probe    text  probed bundle × paraphrase
decision_probe_free      probe    text  (the same probed bundles)
=======================  =======  ====  ==========================================

Every table has the shared columns ``prompt_uid, task, text, group`` (``group``: domain and
paraphrase, whose instruction all its prompts start with; empty for probes) and the design
columns of :data:`SINGLE_PROMPT_SCHEMA`. Ranking and probe tables hold one row per bundle
prompt: the per-candidate columns (:data:`CANDIDATE_COLUMNS`, named ``candidates_<column>``)
are lists in the order shown
(A-D), so ``explode_candidates`` gives one row per candidate beside the parsed ``ranks``.
Single-profile rows have ``bundle_type`` "single", no bundle and position 1. An extension arm
may replace the crossing by the confounded construction (``name_assignment:
fixed_per_profile``, :func:`fixed_name_sets`): each profile under one race's name pairs.
Probe tables add ``probe`` and, for the forced choice, ``option_order`` (its labels in the
order shown, rotated across prompts: :func:`cueaudit.decision.probes.option_orders`) and
``fairness_position`` (where the Fairness option is listed, 1 = first); both are null for
the free-text probe.

Ids: a single-profile prompt's uid hashes its task, domain, paraphrase, profile and name
pair, so adding a profile or a name only adds rows; a bundle prompt's uid hashes its task,
paraphrase and bundle id, and the bundle id hashes the bundle's content.

Cue types (``cues``, :mod:`cueaudit.decision.cue_signals`): every table has a ``cue`` column, and
each listed cue type adds its own rows to Rate and Decide (every crossed profile under each of its
signals) and, if it signals four races, to the ranking and probe tables (every design bundle
under its signals, the bundle id unchanged). A row of a cue type other than ``name_pair``
hashes the cue into its uid as well; the default, ``[name_pair]``, builds exactly the tables
and ids it built before the factor existed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import polars as pl

from cueaudit.decision import cue_signals as cue_types
from cueaudit.decision import design, probes, tiers
from cueaudit.decision.composition_checks import check_design
from cueaudit.decision.design_settings import DesignSettings
from cueaudit.decision.formats import (
    FORMATS,
    Candidate,
    PromptResources,
    load_prompt_resources,
    render_bundle,
    render_single,
)
from cueaudit.decision.tasks import (
    ARM_SEPARATOR,
    NAME_ASSIGNMENTS,
    PRIMARY,
    RATING_SCALE,
    SINGLE,
    STUDY,
    TASKS,
    arm_task,
)
from cueaudit.errors import InputError
from cueaudit.parsing import get_kind
from cueaudit.prompts import stable_uid

_SHARED: Final = {"prompt_uid": pl.String, "task": pl.String, "text": pl.String, "group": pl.String}
_SCALARS: Final = {
    "study": pl.String,
    "arm": pl.String,
    "cue": pl.String,
    "domain": pl.String,
    "format": pl.String,
    "mode": pl.String,
    "paraphrase": pl.String,
    "bundle_type": pl.String,
    "bundle_id": pl.String,
    "replicate": pl.Int64,
    "attribute_kind": pl.String,
}
#: Columns with one value per candidate (lists, in the order shown, in bundle tables).
CANDIDATE_COLUMNS: Final = {
    c: design.BUNDLE_SCHEMA[c]
    for c in (
        *("position", "profile_id", "tier", "pair_id"),
        *("race", "gender", "attribute", "pseudo_race"),
    )
}


def listed(column: str) -> str:
    """The name of a per-candidate list column in ranking and probe tables (``candidates_race``
    beside the single-profile tables' scalar ``race``, so every prompt table of every study
    can be read as one table by column name)."""
    return f"candidates_{column}"


SINGLE_PROMPT_SCHEMA: Final = {**_SHARED, **_SCALARS, **CANDIDATE_COLUMNS}
RANK_PROMPT_SCHEMA: Final = {
    **_SHARED,
    **_SCALARS,
    **{listed(c): pl.List(t) for c, t in CANDIDATE_COLUMNS.items()},
}
PROBE_PROMPT_SCHEMA: Final = {**RANK_PROMPT_SCHEMA, "probe": pl.String, **probes.OPTION_COLUMNS}


def task_answers(settings: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each task's outcome kind and answer settings (checked by building the kind); a design
    asking for more paraphrases than the prompts file has is refused here, while the workflow
    is parsed, not when its prompt tables are built."""
    cfg = DesignSettings.of(settings)
    resources = load_prompt_resources(cfg.prompts)
    _paraphrases(resources, cfg.paraphrases)
    answers: dict[str, tuple[str, dict[str, Any]]] = {}
    for task in cfg.tasks:
        spec = TASKS[task]
        if spec.probe is not None:
            answers[task] = probes.probe_answer(resources, spec.probe)
            continue
        answer: dict[str, Any] = {"format": spec.mode}
        if spec.format == "rate":
            answer["scale"] = RATING_SCALE
        if spec.format == "rank":
            answer["candidates"] = list(resources.candidate_labels)
        tool = resources.tools[spec.format]
        if spec.mode == "tool":
            answer |= {"tool_name": tool.name, "tool_description": tool.description}
        if spec.mode != "text":
            answer["argument_description"] = tool.argument_description
        answers[task] = (spec.kind, answer)
    for task, (kind, answer) in answers.items():
        try:
            get_kind(kind, answer)
        except InputError as error:
            raise InputError(resources.source, f"task {task}: {error}", "tools") from error
    return answers


def _paraphrases(resources: PromptResources, n: int) -> dict[str, tuple[str, ...]]:
    chosen = {fmt: resources.paraphrases(fmt)[:n] for fmt in FORMATS}
    short = [fmt for fmt, ids in chosen.items() if len(ids) < n]
    if short:
        raise InputError(
            resources.source, f"fewer than {n} paraphrases", f"instructions.{short[0]}"
        )
    return chosen


def _crossed(
    profiles: pl.DataFrame,
    name_pairs: pl.DataFrame,
    cfg: DesignSettings,
    appeals: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The profiles the tier rule gives Rate and Decide (``profiles``:
    :attr:`tiers.TierSelection.crossed`) crossed with the first ``names_per_cell`` name pairs
    (by rank) of each race and gender; ``appeals`` (the aid domain's) replace the texts of the
    rows they name."""
    chosen = profiles.sort("domain", "tier", "profile_id").select(
        "domain", "profile_id", "tier", "title", "text"
    )
    shown = ("pair_id", "race", "gender", "full_name", "descriptor")
    names = (
        name_pairs.sort("race", "gender", "name_rank", "pair_id")
        .group_by("race", "gender", maintain_order=True)
        .head(cfg.names_per_cell)
        .select(c for c in shown if c in name_pairs.columns)
    )
    return _with_appeals(chosen.join(names, how="cross"), appeals)


def _with_appeals(rows: pl.DataFrame, appeals: pl.DataFrame | None) -> pl.DataFrame:
    """Rows whose profile has an appeal under their name pair (the aid domain:
    :func:`cueaudit.decision.aid.aid_appeals`) show that appeal as their text."""
    if appeals is None:
        return rows
    key = pl.concat_str("profile_id", "pair_id", separator="\x1f")
    keys = appeals.select(key.alias("key"))["key"]
    appeal = key.replace_strict(keys, appeals["text"], default=None, return_dtype=pl.String)
    return rows.with_columns(text=pl.coalesce(appeal, "text"))


def fixed_name_sets(crossed: pl.DataFrame, paraphrase_index: int) -> pl.DataFrame:
    """The confounded construction (``name_assignment: fixed_per_profile``): of the crossing
    (:func:`_crossed`, profiles in design order: tier, profile id), the ``i``-th profile of
    each domain keeps only the name pairs of race ``RACES[(i + paraphrase_index) % 4]``. Each
    race gets one profile per tier when a tier has four, so the race contrast compares
    different applications, and a different set of them in each paraphrase."""
    order = crossed.select("domain", "profile_id").unique(maintain_order=True)
    dealt: dict[tuple[str, str], str] = {}
    seen: dict[str, int] = {}
    for domain, profile in order.iter_rows():
        i = seen.get(domain, 0)
        seen[domain] = i + 1
        dealt[(domain, profile)] = design.RACES[(i + paraphrase_index) % len(design.RACES)]
    keep = [
        dealt[(d, p)] == race
        for d, p, race in crossed.select("domain", "profile_id", "race").iter_rows()
    ]
    return crossed.filter(pl.Series(keep, dtype=pl.Boolean))


def _single_table(
    task: str,
    crossed: pl.DataFrame,
    resources: PromptResources,
    paraphrases: Sequence[str],
    name_assignment: str = NAME_ASSIGNMENTS[0],
) -> pl.DataFrame:
    spec = TASKS[task]
    rows = []
    for index, paraphrase in enumerate(paraphrases):
        shown = crossed if name_assignment == "crossed" else fixed_name_sets(crossed, index)
        for r in shown.iter_rows(named=True):
            candidate = Candidate(
                r["full_name"], r["title"], r["text"], descriptor=r.get("descriptor")
            )
            text = render_single(
                resources,
                domain=r["domain"],
                fmt=spec.format,
                mode=spec.mode,
                paraphrase=paraphrase,
                candidate=candidate,
            )
            cue = r.get("cue") or cue_types.NAME_PAIR
            uid = stable_uid(
                task, r["domain"], paraphrase, r["profile_id"], r["pair_id"], *_cue_key(cue)
            )
            rows.append(
                {
                    **_scalars(task, r["domain"], paraphrase, text, uid, cue),
                    **{c: r.get(c) for c in CANDIDATE_COLUMNS},
                    "group": f"{r['domain']}/{paraphrase}",
                    "bundle_type": SINGLE,
                    "position": 1,
                }
            )
    return pl.DataFrame(rows, schema=SINGLE_PROMPT_SCHEMA)


def _cue_key(cue: str) -> tuple[str, ...]:
    """What a cue type adds to a prompt's uid: nothing for name pairs (their ids are those of
    the design before cue types), the cue type for the others."""
    return () if cue == cue_types.NAME_PAIR else (cue,)


def _scalars(
    task: str, domain: str, paraphrase: str, text: str, uid: str, cue: str
) -> dict[str, Any]:
    spec = TASKS[task]
    return {
        "prompt_uid": uid,
        "task": task,
        "text": text,
        "study": STUDY,
        "arm": PRIMARY,
        "cue": cue,
        "domain": domain,
        "format": spec.format,
        "mode": spec.mode,
        "paraphrase": paraphrase,
    }


def _wide_bundles(
    bundles: pl.DataFrame, profiles: pl.DataFrame, appeals: pl.DataFrame | None = None
) -> list[dict[str, Any]]:
    """One dict per bundle, per-candidate values as lists in position order (``bundles``
    shown under one cue type: :func:`cueaudit.decision.cue_signals.bundle_signals`)."""
    shown = bundles.sort("bundle_id", "position").join(
        profiles.select("profile_id", "title", "text"), on="profile_id", how="left"
    )
    shown = _with_appeals(shown, appeals)
    per_candidate = [*CANDIDATE_COLUMNS, "full_name", "title", "text", "descriptor"]
    return (
        shown.sort("domain", "bundle_type", "replicate", "bundle_index", "position")
        .group_by("bundle_id", maintain_order=True)
        .agg(
            *(pl.col(c).first() for c in ("domain", "bundle_type", "replicate", "bundle_index")),
            pl.col("attribute_kind").first(),
            pl.col("cue").first(),
            *(pl.col(c) for c in per_candidate),
        )
        .to_dicts()
    )


def _option_orders(
    bundles: Sequence[Mapping[str, Any]],
    resources: PromptResources,
    paraphrases: Sequence[str],
    seed: int,
) -> dict[tuple[str, str], tuple[str, ...]]:
    """The forced choice's option order of each (bundle id, paraphrase), rotated over the
    prompts in :data:`probes.ROTATION_ORDER` (:func:`probes.option_orders`)."""
    keyed = sorted(
        ({**b, "paraphrase": p} for b in bundles for p in paraphrases),
        key=lambda r: tuple(r[c] for c in probes.ROTATION_ORDER),
    )
    orders = probes.option_orders(resources.probes["choice"].labels, len(keyed), seed)
    return {(r["bundle_id"], r["paraphrase"]): o for r, o in zip(keyed, orders, strict=True)}


def _bundle_table(
    task: str,
    bundles: Sequence[Mapping[str, Any]],
    resources: PromptResources,
    paraphrases: Sequence[str],
    seed: int = 0,
) -> pl.DataFrame:
    spec = TASKS[task]
    choice = spec.probe == "choice"
    orders = _option_orders(bundles, resources, paraphrases, seed) if choice else {}
    rows = []
    for paraphrase in paraphrases:
        for b in bundles:
            candidates = [
                Candidate(name, title, text, b["attribute_kind"], attribute, descriptor)
                for name, title, text, attribute, descriptor in zip(
                    b["full_name"], b["title"], b["text"], b["attribute"], b["descriptor"],
                    strict=True,
                )
            ]  # fmt: skip
            mode = "text" if spec.probe else spec.mode
            text = render_bundle(
                resources,
                domain=b["domain"],
                mode=mode,
                paraphrase=paraphrase,
                candidates=candidates,
            )
            order = orders.get((b["bundle_id"], paraphrase), ())
            if spec.probe:
                text = probes.render_probe(resources, spec.probe, text, order)
            uid = stable_uid(task, paraphrase, b["bundle_id"], *_cue_key(b["cue"]))
            row = {
                **_scalars(task, b["domain"], paraphrase, text, uid, b["cue"]),
                **{listed(c): b[c] for c in CANDIDATE_COLUMNS},
                "group": "" if spec.probe else f"{b['domain']}/{paraphrase}",
                **{c: b[c] for c in ("bundle_type", "bundle_id", "replicate", "attribute_kind")},
            }
            if spec.probe:
                row |= {"probe": spec.probe, "option_order": list(order) or None}
                row["fairness_position"] = (
                    order.index(probes.FAIRNESS_OPTION) + 1 if order else None
                )
            rows.append(row)
    return pl.DataFrame(rows, schema=PROBE_PROMPT_SCHEMA if spec.probe else RANK_PROMPT_SCHEMA)


def build_decision_prompts(
    profiles: pl.DataFrame,
    name_pairs: pl.DataFrame,
    hobbies: Sequence[str],
    neighbourhoods: Sequence[str],
    settings: Mapping[str, Any],
    arm: str = PRIMARY,
    *,
    profiles_file: str = "profiles",
    appeals: pl.DataFrame | None = None,
    cue_resources: cue_types.CueResources | None = None,
) -> dict[str, pl.DataFrame]:
    """The prompt table of each task in ``settings["tasks"]`` (all of :data:`TASKS` by
    default), in that order, keyed by the arm's task names (:func:`arm_task`). An extension
    arm's prompts get their own ids, so its rows never mix with the primary design's. Each cue
    type of ``settings["cues"]`` adds its rows (:mod:`cueaudit.decision.cue_signals`; the first
    names and dialect translations it needs are ``cue_resources``).

    Rate and Decide cross the chosen profiles and name pairs (:class:`DesignSettings`);
    bundles (:func:`cueaudit.decision.design.build_bundles`) draw on the profiles the tier
    rule keeps (:func:`cueaudit.decision.tiers.select_profiles`; every profile of the domain
    unless ``tier_rule: smallest``) and every name pair, and must pass
    :func:`~cueaudit.decision.composition_checks.check_design`. ``profiles_file`` names the file
    in an error about its tiers. ``appeals`` (profile, name pair, text; the aid domain's) replace
    the profile text of the candidates they name.
    """
    cfg = DesignSettings.of(settings)
    resources = load_prompt_resources(cfg.prompts)
    design.check_profiles(profiles)
    design.check_name_pairs(name_pairs)
    paraphrases = _paraphrases(resources, cfg.paraphrases)
    selection = tiers.select_profiles(
        profiles,
        domains=cfg.domains,
        rule=cfg.tier_rule,
        profiles_per_tier=cfg.profiles_per_tier,
        seed=cfg.seed,
        source=profiles_file,
        crossing=cfg.crosses_profiles,
    )
    tables: dict[str, pl.DataFrame] = {}
    single = [t for t in cfg.tasks if TASKS[t].format in ("rate", "decide")]
    signals = {
        cue: cue_types.cue_signals(
            cue, name_pairs, cue_resources, names_per_cell=cfg.names_per_cell, seed=cfg.seed
        )
        for cue in cfg.cues
    }

    def shown_appeals(cue: str, chosen: pl.DataFrame) -> pl.DataFrame | None:
        if cue == cue_types.NAME_PAIR:
            return appeals
        return cue_types.cue_appeals(cue, chosen, signals[cue], cue_resources)

    if single:
        crossed = [
            cue_types.with_cue_ids(
                _crossed(
                    selection.crossed, signals[cue], cfg, shown_appeals(cue, selection.crossed)
                ),
                cue,
            )
            for cue in cfg.cues
        ]
        for task in single:
            tables[task] = pl.concat(
                _single_table(
                    task, part, resources, paraphrases[TASKS[task].format], cfg.name_assignment
                )
                for part in crossed
            )
    if len(tables) < len(cfg.tasks):
        bundles = design.build_bundles(
            selection.bundled,
            name_pairs,
            hobbies,
            neighbourhoods,
            domains=cfg.domains,
            bundles_per_type=cfg.bundles_per_type,
            replicates=cfg.replicates,
            seed=cfg.seed,
        )
        check_design(bundles)
        chosen = probes.select_probe_bundles(bundles, cfg.probe_bundles)
        bundled = {}
        for cue in cfg.bundle_cues:
            shown = shown_appeals(cue, profiles)
            bundled[cue] = (
                _wide_bundles(cue_types.bundle_signals(bundles, cue), profiles, shown),
                _wide_bundles(cue_types.bundle_signals(chosen, cue), profiles, shown),
            )
        for task in cfg.tasks:
            if task not in tables:
                tables[task] = pl.concat(
                    _bundle_table(
                        task,
                        probed if TASKS[task].probe else everything,
                        resources,
                        paraphrases["rank"],
                        cfg.seed,
                    )
                    for everything, probed in bundled.values()
                )
    for task, table in tables.items():
        if table["prompt_uid"].n_unique() < table.height:
            raise InputError("decision prompts", f"{task}: repeated prompt ids", "prompt_uid")
    return {arm_task(task, arm): _in_arm(tables[task], arm) for task in cfg.tasks}


def _in_arm(table: pl.DataFrame, arm: str) -> pl.DataFrame:
    if arm == PRIMARY:
        return table
    uids = [stable_uid(arm, uid) for uid in table["prompt_uid"]]
    return table.with_columns(
        prompt_uid=pl.Series(uids, dtype=pl.String),
        task=pl.col("task") + ARM_SEPARATOR + arm,
        arm=pl.lit(arm),
    )


def explode_candidates(table: pl.DataFrame) -> pl.DataFrame:
    """A ranking or probe table with one row per candidate (``position`` 1-4 = A-D)."""
    columns = {listed(c): c for c in CANDIDATE_COLUMNS}
    return table.explode(list(columns)).rename(columns)
