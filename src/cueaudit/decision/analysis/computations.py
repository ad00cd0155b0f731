"""The decision analyses' functions: each turns :class:`.inputs.AnalysisInputs` into its tables
(it writes nothing); :mod:`.registry` declares each with its tables, titles and inputs."""

from __future__ import annotations

import logging

import polars as pl

from cueaudit.decision.analysis import (
    bundle_designs,
    composition,
    contrasts,
    cue_contrasts,
    heterogeneity,
    instrument,
    nonresponse,
    planted,
    reasoning,
    replication,
    robustness,
    sequential,
    simulation_settings,
    specification_curve,
    wording,
)
from cueaudit.decision.analysis.frames import NAME_PAIR, PRIMARY
from cueaudit.decision.analysis.inputs import (
    AnalysisInputs,
    answered_at,
    extension_arms,
    pooled_with_primary,
)
from cueaudit.decision.views import outcome_summary as summarise_outcomes
from cueaudit.decision.views import register_views
from cueaudit.store import connect

log = logging.getLogger(__name__)


def outcome_summary_tables(inputs: AnalysisInputs) -> dict[str, pl.DataFrame]:
    tasks = inputs.params["tasks"]
    con = connect(
        prompts=inputs.files["prompts"],
        outcomes=inputs.files["outcomes"],
        views=[lambda c: register_views(c, tasks)],
    )
    return {"outcome_summary": summarise_outcomes(con)}


def composition_tables(inputs: AnalysisInputs) -> dict[str, pl.DataFrame]:
    """Every arm the analyses estimate, each cue type on its own rows; the first design
    failure stops the job, a failed analysed subsample too when asked, except in arms
    confounded by construction (``name_assignment: fixed_per_profile``)."""
    frames, params = inputs.frames, inputs.params
    checked = [
        composition.check_with_flags(
            frames,
            arm=arm,
            alpha=params["composition_alpha"],
            stop=params["stop_on_differential_nonresponse"],
            confounded=arm in params["confounded_arms"],
            cue=cue,
        )
        for arm in [PRIMARY, *extension_arms(frames)]
        for cue in frames.arm(arm, cue=None).cues() or [NAME_PAIR]
    ]
    return {
        "composition": pl.concat([table for table, _ in checked]),
        "composition_flags": pl.concat([flags for _, flags in checked]),
    }


def nonresponse_tables(inputs: AnalysisInputs) -> dict[str, pl.DataFrame]:
    """A differential non-response stops the job before anything is written when asked."""
    answers = nonresponse.answers_of(
        inputs.frames, nonresponse.read_reasons(inputs.files["outcomes"])
    )
    tests = nonresponse.differential_tests(answers, inputs.params["nonresponse_alpha"])
    if inputs.params["stop_on_differential_nonresponse"]:
        nonresponse.stop_if_differential(tests)
    for row in tests.filter(pl.col("differential").fill_null(False)).iter_rows(named=True):
        log.warning(
            "differential non-response: %s, model %s, format %s, by %s (q = %.2g): %s",
            row["arm"], row["model"], row["format"], row["dimension"], row["q_value"],
            row["groups"],
        )  # fmt: skip
    return {
        "nonresponse": nonresponse.nonresponse_table(answers, tests),
        "nonresponse_tests": tests,
    }


def contrasts_tables(inputs: AnalysisInputs) -> dict[str, pl.DataFrame]:
    """The planned family with the extensions' own contrasts (alone, or pooled with the
    primary rows), each flagged where non-response differs, and the sequential looks."""
    frames, prereg = inputs.frames, inputs.preregistration()
    tests = nonresponse.read_tests(inputs.files["nonresponse_tests"])

    def flagged(table: pl.DataFrame) -> pl.DataFrame:
        return nonresponse.flag_contrasts(table, tests)

    state = inputs.lock_state()
    log.info("pre-registration: %s", state.reason)
    fits = contrasts.fit_family(frames, prereg)
    extensions = []
    for arm in extension_arms(frames):
        pooled = arm in inputs.params["pooled_extensions"]
        data = pooled_with_primary(frames, arm) if pooled else frames
        table = contrasts.estimate_contrasts(data, prereg, pre_registered=state, arm=arm)
        extensions.append(table.select(pl.lit(arm).alias("arm"), pl.all()))
    empty = pl.DataFrame(schema={"arm": pl.String(), **contrasts.CONTRASTS_SCHEMA})
    top_ups = prereg.sequential.arms if prereg.sequential is not None else ()
    times = [t for arm in (PRIMARY, *top_ups) for t in answered_at(frames, arm)]
    return {
        "contrasts": flagged(
            contrasts.estimate_contrasts(frames, prereg, pre_registered=state, fits=fits)
        ),
        "interactions": contrasts.estimate_interactions(frames, prereg, fits=fits),
        "placebo": contrasts.estimate_placebo(frames, prereg, pre_registered=state),
        "leave_one_out": robustness.leave_one_out(frames, prereg),
        "extension_contrasts": flagged(pl.concat([empty, *extensions])),
        "sequential": sequential.sequential_looks(
            frames, prereg, pre_registered=inputs.lock_state(times)
        ),
    }


def planted_tables(inputs: AnalysisInputs) -> dict[str, pl.DataFrame]:
    """Answers of the focal group changed, rendered in each task's format and parsed back,
    recovered by both estimators; and the same sizes planted in simulated answers."""
    params, prompts = inputs.params, inputs.files["design_prompts"]
    simulated = None
    if params["simulate"]:
        simulated = simulation_settings.SimulationSettings(design={"prompts": prompts})
    table = planted.planted_disparities(
        inputs.frames,
        inputs.preregistration(),
        planted.answer_kinds(prompts),
        sizes=tuple(params["planted_sizes"]),
        contrast=params["planted_contrast"],
        simulated=simulated,
        seed=params["seed"],
    )
    return {"planted": table}


def instrument_tables(inputs: AnalysisInputs) -> dict[str, pl.DataFrame]:
    frames = inputs.frames
    return {
        "position": instrument.position_effects(frames, inputs.table("contrasts")),
        "ties": instrument.tie_rates(frames),
        "recognition": instrument.recognition_rates(frames),
        "agreement": instrument.format_agreement(frames),
        "recognition_position": instrument.recognition_by_position(frames),
        "recognition_ties": instrument.recognition_ties(frames),
    }


def heterogeneity_tables(inputs: AnalysisInputs) -> dict[str, pl.DataFrame]:
    frames, prereg, state = inputs.frames, inputs.preregistration(), inputs.lock_state()
    per_level = heterogeneity.contrasts_by(frames, prereg, pre_registered=state)
    return {
        "contrasts_by": per_level,
        "heterogeneity": heterogeneity.estimate_heterogeneity(
            frames, prereg, pre_registered=state, per_level=per_level
        ),
        "intersectional": heterogeneity.estimate_intersectional(
            frames, prereg, pre_registered=state
        ),
        "mode_differences": heterogeneity.estimate_mode_differences(
            frames, prereg, pre_registered=state, per_mode=per_level
        ),
    }


def specification_curve_tables(inputs: AnalysisInputs) -> dict[str, pl.DataFrame]:
    """The permutations are refitted in the rule's threads (spawned processes)."""
    settings = inputs.params["specification_curve"]
    curve, summary = specification_curve.specification_curve(
        inputs.frames,
        inputs.preregistration(),
        contrasts=settings["contrasts"],
        permutations=settings["permutations"],
        alpha=settings.get("alpha"),
        seed=settings["seed"],
        pre_registered=inputs.lock_state(),
        workers=inputs.threads,
    )
    return {"specification_curve": curve, "specification_summary": summary}


def aid_replication_tables(inputs: AnalysisInputs) -> dict[str, pl.DataFrame]:
    """No published file (no arm runs the aid domain): an empty table."""
    published = [
        contrast
        for path in inputs.files["published"]
        for contrast in replication.load_published(path)
    ]
    alpha = inputs.preregistration().alpha
    return {"aid_replication": replication.aid_replication(inputs.frames, published, alpha=alpha)}


def wording_tables(inputs: AnalysisInputs) -> dict[str, pl.DataFrame]:
    flags = pl.read_csv(inputs.files["composition_flags"], schema=composition.FLAGS_SCHEMA)
    table = wording.wording_contrasts(
        inputs.frames,
        name_assignments=inputs.params["name_assignments"],
        flags=flags,
        alpha=inputs.preregistration().alpha,
    )
    return {"wording": table}


def reasoning_paired_tables(inputs: AnalysisInputs) -> dict[str, pl.DataFrame]:
    alpha = inputs.preregistration().alpha
    pairs = inputs.params["paired_arms"]
    return {"reasoning_paired": reasoning.paired_contrasts(inputs.frames, pairs, alpha=alpha)}


def bundle_designs_tables(inputs: AnalysisInputs) -> dict[str, pl.DataFrame]:
    return {
        "recognition_ties_by_type": bundle_designs.recognition_ties_by_type(inputs.frames),
        "position_vs_demographics": bundle_designs.position_vs_demographics(inputs.frames),
    }


def cues_tables(inputs: AnalysisInputs) -> dict[str, pl.DataFrame]:
    prereg = inputs.preregistration()
    table = cue_contrasts.cue_contrasts(
        inputs.frames,
        prereg,
        alpha=prereg.alpha,
        composition_alpha=inputs.params["composition_alpha"],
    )
    return {"cue_contrasts": table, "cue_validity": cue_contrasts.cue_validity(inputs.frames)}
