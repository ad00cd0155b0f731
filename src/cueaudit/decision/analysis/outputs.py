"""The decision audit's analysis outputs as files: what each workflow rule writes.

The rules run in this order, each reading only files the one before wrote:

1. :func:`write_frames`: the three analysis frames (:mod:`.frames`) as Parquet, from the
   prompt and outcome tables;
2. :func:`write_composition`: the composition check of every subsample the analyses use; a
   failing design check stops the job, and every other analysis waits for its table;
   :func:`write_nonresponse`: differential non-response by group, per model and format (a
   finding the contrast tables are flagged with, or a stop when the config asks);
3. :func:`write_contrasts` (pre-registered contrasts, interactions, the placebo cell's
   false-positive check, leave-one-out, the looks of a sequential top-up),
   :func:`write_planted` and :func:`write_instrument` (position, ties, recognition, text
   versus tool), :func:`write_heterogeneity` (per model,
   mode and paraphrase; heterogeneity, race x gender, mode differences),
   :func:`write_specification_curve` (every specification of the design's choices and the
   curve's permutation tests), each a CSV + Markdown table that the database loads;
4. :func:`write_figures`.

Beside them, the extension arms' own analyses: :func:`write_wording` (the wording arm, by
paraphrase and paraphrase × group), :func:`write_reasoning_paired` (a rerun with reasoning
on against the same model without), :func:`write_bundle_designs`, the paper's two open
questions on the exploratory bundle types (recognition against ties by bundle type, position
against demographics at equal precision), and :func:`write_cues` (cue types beyond name pairs:
their contrasts and their convergent validity).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

import polars as pl

from cueaudit.decision.analysis import (
    bundle_designs,
    composition,
    contrasts,
    cues,
    figures,
    heterogeneity,
    instrument,
    nonresponse,
    planner,
    planted,
    reasoning,
    replication,
    robustness,
    sequential,
    simulation_settings,
    specification_curve,
    wording,
)
from cueaudit.decision.analysis.frames import (
    NAME_PAIR,
    POINTS_RULES,
    PRIMARY,
    SCHEMAS,
    AnalysisFrames,
    load_frames,
)
from cueaudit.decision.preregistration import (
    Preregistration,
    Registration,
    Status,
    load_preregistration,
    status,
)
from cueaudit.decision.views import register_views
from cueaudit.io import write_parquet
from cueaudit.report import write_table
from cueaudit.store import connect

log = logging.getLogger(__name__)

FRAMES: Final = tuple(SCHEMAS)


def write_frames(
    prompts: Sequence[str],
    outcomes: Sequence[str],
    tasks: Sequence[str],
    out: Mapping[str, str],
    *,
    points: str = POINTS_RULES[0],
) -> AnalysisFrames:
    """The analysis frames of the decision tasks' outcomes, one Parquet file per frame; rank
    points on the scale ``points``."""
    con = connect(prompts=prompts, outcomes=outcomes, views=[lambda c: register_views(c, tasks)])
    frames = load_frames(con, points)
    for name in FRAMES:
        write_parquet(getattr(frames, name), out[name])
        log.info("%s: %d rows", name, getattr(frames, name).height)
    return frames


def extension_arms(frames: AnalysisFrames) -> list[str]:
    """The extension arms with rows in the frames (never the pre-registered one)."""
    arms: set[str] = set()
    for name in FRAMES:
        arms |= set(getattr(frames, name)["arm"].drop_nulls().to_list())
    return sorted(arms - {PRIMARY})


def pooled_with_primary(frames: AnalysisFrames, arm: str) -> AnalysisFrames:
    """The primary rows relabelled as ``arm`` beside the arm's own: an extension that adds
    to the pre-registered design (more bundles of the same kind) analysed with it."""
    relabel = pl.when(pl.col("arm") == PRIMARY).then(pl.lit(arm)).otherwise(pl.col("arm"))
    return AnalysisFrames(*(getattr(frames, n).with_columns(arm=relabel) for n in FRAMES))


def read_frames(paths: Mapping[str, str]) -> AnalysisFrames:
    return AnalysisFrames(*(pl.read_parquet(paths[name]) for name in FRAMES))


def write_composition(
    frames: AnalysisFrames,
    out: str,
    alpha: float,
    *,
    stop: bool,
    flags_out: str | None = None,
    confounded_arms: Sequence[str] = (),
) -> pl.DataFrame:
    """The composition check of every arm the analyses estimate (the primary design and each
    extension); the first design failure stops the job, a failed analysed subsample too when
    ``stop``, except in ``confounded_arms`` (a design's ``name_assignment:
    fixed_per_profile``), whose failures are reported. Each cue type of an arm is checked on
    its own rows. ``flags_out``: the offending cells of every failed test
    (:func:`.composition.check_with_flags`)."""
    arms = [PRIMARY, *extension_arms(frames)]
    checked = [
        composition.check_with_flags(
            frames, arm=arm, alpha=alpha, stop=stop, confounded=arm in confounded_arms, cue=cue
        )
        for arm in arms
        for cue in frames.arm(arm, cue=None).cues() or [NAME_PAIR]
    ]
    table = pl.concat([t for t, _ in checked])
    write_table(table, out, "Decision audit: composition of every analysed subsample")
    if flags_out is not None:
        flags = pl.concat([f for _, f in checked])
        write_table(flags, flags_out, "Decision audit: the unbalanced cells of failed checks")
    return table


def write_nonresponse(
    frames: AnalysisFrames,
    outcomes: Sequence[str],
    out: Mapping[str, str],
    *,
    alpha: float,
    stop: bool,
) -> pl.DataFrame:
    """Non-response per group and the per-model tests of whether it depends on race or
    gender (:mod:`.nonresponse`), the parsers' reasons read from the outcome tables; with
    ``stop``, a differential one stops the job before anything is written."""
    answers = nonresponse.answers_of(frames, nonresponse.read_reasons(outcomes))
    tests = nonresponse.differential_tests(answers, alpha)
    if stop:
        nonresponse.stop_if_differential(tests)
    for row in tests.filter(pl.col("differential").fill_null(False)).iter_rows(named=True):
        log.warning(
            "differential non-response: %s, model %s, format %s, by %s (q = %.2g): %s",
            row["arm"], row["model"], row["format"], row["dimension"], row["q_value"],
            row["groups"],
        )  # fmt: skip
    table = nonresponse.nonresponse_table(answers, tests)
    write_table(table, out["nonresponse"], "Decision audit: non-response by group")
    write_table(
        tests,
        out["nonresponse_tests"],
        "Decision audit: does non-response depend on race or gender? (per model and format)",
    )
    return tests


def answered_at(frames: AnalysisFrames, arm: str = PRIMARY) -> list[float | None]:
    """When each analysed answer of ``arm`` was generated (one time per ranking answer)."""
    data = frames.arm(arm)
    rankings = data.rankings.unique(["model", "seed", "task", "prompt_uid"])
    return [*data.judgements["generated"].to_list(), *rankings["generated"].to_list()]


def write_contrasts(
    frames: AnalysisFrames,
    *,
    registration: Registration,
    lock: str,
    out: Mapping[str, str],
    pooled_extensions: Sequence[str] = (),
    nonresponse_tests: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The pre-registered contrasts with BH q-values and TOST verdicts, the format × group
    interactions, the placebo cell's pseudo-race contrasts, the leave-one-out ranges, and the
    contrasts of each extension arm: alone, or (``pooled_extensions``, e.g. a precision
    top-up) together with the primary rows. With ``nonresponse_tests`` the contrast tables
    flag the contrasts of a format (and model) with differential non-response."""

    def flagged(contrast_table: pl.DataFrame) -> pl.DataFrame:
        if nonresponse_tests is None:
            return contrast_table
        return nonresponse.flag_contrasts(contrast_table, nonresponse_tests)

    prereg = load_preregistration(registration.preregistration)
    state = status(registration, lock, answered_at=answered_at(frames))
    log.info("pre-registration: %s", state.reason)
    fits = contrasts.fit_family(frames, prereg)
    table = contrasts.estimate_contrasts(frames, prereg, pre_registered=state, fits=fits)
    table = flagged(table)
    write_table(table, out["contrasts"], "Decision audit: pre-registered contrasts")
    interactions = contrasts.estimate_interactions(frames, prereg, fits=fits)
    write_table(interactions, out["interactions"], "Decision audit: format × group interactions")
    placebo = contrasts.estimate_placebo(frames, prereg, pre_registered=state)
    write_table(placebo, out["placebo"], "Decision audit: the placebo cell's false-positive check")
    loo = robustness.leave_one_out(frames, prereg)
    write_table(loo, out["leave_one_out"], "Decision audit: leave-one-name / profile-out")
    extensions = []
    for arm in extension_arms(frames):
        data = pooled_with_primary(frames, arm) if arm in pooled_extensions else frames
        table_arm = contrasts.estimate_contrasts(data, prereg, pre_registered=state, arm=arm)
        extensions.append(table_arm.select(pl.lit(arm).alias("arm"), pl.all()))
    empty = pl.DataFrame(schema={"arm": pl.String(), **contrasts.CONTRASTS_SCHEMA})
    write_table(
        flagged(pl.concat([empty, *extensions])),
        out["extension_contrasts"],
        "Decision audit: the planned contrasts re-estimated in each extension (not pre-registered)",
    )
    write_sequential(frames, prereg, registration, lock, out["sequential"])
    return table


def write_sequential(
    frames: AnalysisFrames,
    prereg: Preregistration,
    registration: Registration,
    lock: str,
    out: str,
) -> pl.DataFrame:
    """The looks of the pre-registration's ``sequential`` plan (:mod:`.sequential`; empty
    without one), labelled pre-registered while the lock holds and every analysed answer of
    the primary design and of the top-up arms postdates it."""
    arms = prereg.sequential.arms if prereg.sequential is not None else ()
    times = [t for arm in (PRIMARY, *arms) for t in answered_at(frames, arm)]
    state = status(registration, lock, answered_at=times)
    table = sequential.sequential_looks(frames, prereg, pre_registered=state)
    write_table(table, out, "Decision audit: pre-registered sequential looks (alpha spending)")
    return table


def write_aid_replication(inputs: Mapping[str, str], out: str) -> pl.DataFrame:
    """The aid-domain replication (:mod:`.replication`) from the frames of ``inputs``:
    cueaudit's contrasts on FairFund's stimuli beside the published values of
    ``inputs["published"]`` (none: no arm runs the aid domain, an empty table), intervals at
    the alpha of ``inputs["preregistration"]``."""
    prereg = load_preregistration(inputs["preregistration"])
    published = [p for path in inputs["published"] for p in replication.load_published(path)]
    table = replication.aid_replication(read_frames(inputs), published, alpha=prereg.alpha)
    write_table(
        table,
        out,
        "Decision audit: the aid-domain replication on FairFund-Bench's stimuli, beside the "
        "published contrasts",
    )
    return table


def write_planted(
    frames: AnalysisFrames,
    *,
    preregistration: str,
    prompts: str,
    settings: Mapping[str, Any],
    out: str,
) -> pl.DataFrame:
    """Planted disparities: answers of the focal group changed, rendered in each task's format
    and mode and parsed back, then recovered by both estimators; and the same sizes planted in
    simulated answers to the same prompts. ``settings`` is the config's ``decision.analysis``
    block (``planted_sizes``, ``planted_contrast``, ``simulate``, ``seed``), defaults filled by
    the schema."""
    prereg = load_preregistration(preregistration)
    sizes = tuple(settings["planted_sizes"])
    simulated = None
    if settings["simulate"]:
        simulated = simulation_settings.SimulationSettings(design={"prompts": prompts})
    table = planted.planted_disparities(
        frames,
        prereg,
        planted.answer_kinds(prompts),
        sizes=sizes,
        contrast=settings["planted_contrast"],
        simulated=simulated,
        seed=settings["seed"],
    )
    write_table(table, out, "Decision audit: planted disparities, recovered against planted")
    return table


def write_instrument(
    frames: AnalysisFrames, contrast_table: pl.DataFrame, out: Mapping[str, str]
) -> None:
    """The audit instrument's own effects: position, ties, recognition, text versus tool."""
    tables = {
        "position": (
            instrument.position_effects(frames, contrast_table),
            "Decision audit: first-listed gain against the largest demographic effect",
        ),
        "ties": (instrument.tie_rates(frames), "Decision audit: tie rates per bundle type"),
        "recognition": (
            instrument.recognition_rates(frames),
            "Decision audit: recognition rates per bundle type and probe",
        ),
        "agreement": (
            instrument.format_agreement(frames),
            "Decision audit: tool-call versus text answers",
        ),
        "recognition_position": (
            instrument.recognition_by_position(frames),
            "Decision audit: forced-choice recognition by the position of the Fairness option",
        ),
        "recognition_ties": (
            instrument.recognition_ties(frames),
            "Decision audit: recognition against ties, per bundle type and model",
        ),
    }
    for name, (table, title) in tables.items():
        write_table(table, out[name], title)


def write_figures(tables: Mapping[str, str], out: Mapping[str, str]) -> None:
    read = {name: pl.read_csv(path, infer_schema_length=None) for name, path in tables.items()}
    figures.plot_contrast_forest(read["contrasts"], out["forest"])
    figures.plot_planted(read["planted"], out["planted"])
    figures.plot_position_vs_demographic(read["position"], read["contrasts"], out["position"])
    figures.plot_tie_recognition(read["ties"], read["recognition"], out["ties_recognition"])
    figures.plot_nonresponse(read["nonresponse"], out["nonresponse"])
    figures.plot_forest_by_model(read["contrasts_by"], out["forest_by_model"])
    figures.plot_specification_curve(
        read["specification_curve"],
        out.get("specification_curve_pdf") or out["specification_curve"],
    )


def write_plan(
    *,
    config: Mapping[str, Any],
    preregistration: str,
    prompt_tables: Mapping[str, str],
    max_new_tokens: Mapping[str, int],
    out: Mapping[str, str],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The planner's tables before any model call: per planned contrast its power, MDE,
    equivalence floor and the units that bring the floor under the margin, on studies of
    the configured design simulated at ``decision.plan.effects``; and the design's cost per
    model and task. ``config`` holds ``seeds``, the models' blocks and the decision block."""
    plan = config["decision"]["plan"]
    settings = simulation_settings.from_config(config)
    table = planner.plan_contrasts(
        settings,
        load_preregistration(preregistration),
        studies=plan["studies"],
        effects=plan["effects"],
        seed=plan["seed"],
    )
    write_table(table, out["plan"], "Decision audit: planned power, floors and extra units")
    seeds = {
        model: block.get("seeds", config["seeds"]) for model, block in config["models"].items()
    }
    cost = planner.plan_cost(
        prompt_tables,
        planner.task_runs(settings, seeds),
        config["models"],
        max_new_tokens,
        tokens_per_char=plan["tokens_per_char"],
    )
    write_table(cost, out["plan_cost"], "Decision audit: planned requests, tokens and cost")
    return table, cost


def _lock_state(
    frames: AnalysisFrames, registration: Registration, lock: str
) -> tuple[Preregistration, Status]:
    """The pre-registration and whether the frames' results may be labelled pre-registered."""
    state = status(registration, lock, answered_at=answered_at(frames))
    return load_preregistration(registration.preregistration), state


def write_heterogeneity(
    frames: AnalysisFrames,
    *,
    preregistration: str,
    registered: tuple[Mapping[str, Any], Mapping[str, str]],
    lock: str,
    out: Mapping[str, str],
) -> pl.DataFrame:
    """The planned contrasts per model, mode and paraphrase, their heterogeneity (Cochran's Q
    and the joint fit's factor x group interaction), the race x gender cells against White men
    and the mode differences of each contrast from one joint fit (:mod:`.heterogeneity`, all
    exploratory). ``registered`` is the design and files the lock binds."""
    registration = Registration(preregistration, *registered)
    prereg, state = _lock_state(frames, registration, lock)
    per_level = heterogeneity.contrasts_by(frames, prereg, pre_registered=state)
    tables = {
        "contrasts_by": (
            per_level,
            "Decision audit: the planned contrasts per model, mode and paraphrase (exploratory)",
        ),
        "heterogeneity": (
            heterogeneity.estimate_heterogeneity(
                frames, prereg, pre_registered=state, per_level=per_level
            ),
            "Decision audit: heterogeneity of each contrast across models, modes, paraphrases",
        ),
        "intersectional": (
            heterogeneity.estimate_intersectional(frames, prereg, pre_registered=state),
            "Decision audit: race × gender cells against White men, and their interaction",
        ),
        "mode_differences": (
            heterogeneity.estimate_mode_differences(
                frames, prereg, pre_registered=state, per_mode=per_level
            ),
            "Decision audit: the mode difference of each contrast, from one joint fit",
        ),
    }
    for name, (table, title) in tables.items():
        write_table(table, out[name], title)
    return per_level


def write_specification_curve(
    frames: AnalysisFrames,
    *,
    registration: Registration,
    lock: str,
    settings: Mapping[str, Any],
    out: Mapping[str, str],
    workers: int = 1,
) -> pl.DataFrame:
    """Every specification of the design's choices for each contrast of interest with its
    verdict, and per contrast the curve's counts, statistics and permutation tests
    (:mod:`.specification_curve`, exploratory), labelled as the lock allows. ``settings``
    is ``decision.analysis.specification_curve``; the permutations are refitted in
    ``workers`` processes."""
    prereg, state = _lock_state(frames, registration, lock)
    curve, summary = specification_curve.specification_curve(
        frames,
        prereg,
        contrasts=settings["contrasts"],
        permutations=settings["permutations"],
        alpha=settings.get("alpha"),
        seed=settings["seed"],
        pre_registered=state,
        workers=workers,
    )
    write_table(
        curve,
        out["specification_curve"],
        "Decision audit: every specification of the design's choices (exploratory)",
    )
    write_table(
        summary,
        out["specification_summary"],
        "Decision audit: the specification curve's verdicts and permutation tests (exploratory)",
    )
    return summary


def write_wording(
    frames: AnalysisFrames,
    *,
    flags: str,
    name_assignments: Mapping[str, str],
    preregistration: str,
    out: str,
) -> pl.DataFrame:
    """The wording arm's contrasts by paraphrase and as paraphrase × group
    (:mod:`.wording`), each cell marked where the composition check flagged it (``flags``:
    the composition flags table's CSV), intervals at the pre-registration's alpha."""
    alpha = load_preregistration(preregistration).alpha
    flagged = pl.read_csv(flags, schema=composition.FLAGS_SCHEMA)
    table = wording.wording_contrasts(
        frames, name_assignments=name_assignments, flags=flagged, alpha=alpha
    )
    write_table(table, out, "Decision audit: the wording arm, by paraphrase and paraphrase × group")
    return table


def write_reasoning_paired(
    frames: AnalysisFrames, *, pairs: Mapping[str, str], preregistration: str, out: str
) -> pl.DataFrame:
    """Each paired arm's contrasts against the same model's without reasoning, as paired
    differences (:mod:`.reasoning`), intervals at the pre-registration's alpha."""
    alpha = load_preregistration(preregistration).alpha
    table = reasoning.paired_contrasts(frames, pairs, alpha=alpha)
    write_table(
        table, out, "Decision audit: reasoning on minus off, the same model, prompts and seeds"
    )
    return table


def write_bundle_designs(frames: AnalysisFrames, out: Mapping[str, str]) -> None:
    """The exploratory bundle types' tables (:mod:`.bundle_designs`): recognition against ties
    per bundle type, and position against demographics from the position-balanced bundles
    (both empty without the bundles they need)."""
    tables = {
        "recognition_ties_by_type": (
            bundle_designs.recognition_ties_by_type(frames),
            "Decision audit: ties and recognition by bundle type, and their association "
            "(exploratory)",
        ),
        "position_vs_demographics": (
            bundle_designs.position_vs_demographics(frames),
            "Decision audit: the half-of-list position contrast against race and gender at "
            "equal design precision (exploratory)",
        ),
    }
    for name, (table, title) in tables.items():
        write_table(table, out[name], title)


def write_cues(
    frames: AnalysisFrames,
    *,
    preregistration: str,
    composition_alpha: float,
    out: Mapping[str, str],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Cue types beyond name pairs (:mod:`.cues`, exploratory): every planned contrast each
    cue type can express, on its own rows with its composition check, and the convergent
    validity of the cue types (correlations of their per-profile disparities, Fisher-z
    averaged over models); intervals at the pre-registration's alpha. Both tables are empty
    when no arm shows a cue type beyond name pairs."""
    prereg = load_preregistration(preregistration)
    table = cues.cue_contrasts(
        frames, prereg, alpha=prereg.alpha, composition_alpha=composition_alpha
    )
    write_table(
        table,
        out["cue_contrasts"],
        "Decision audit: the planned contrasts per cue type (exploratory)",
    )
    validity = cues.cue_validity(frames)
    write_table(
        validity,
        out["cue_validity"],
        "Decision audit: convergent validity of the cue types (exploratory)",
    )
    return table, validity
