"""The decision audit's analyses, each declared once: one :class:`Analysis` row per analysis.

A row names the function that computes its tables (it writes nothing), the tables it returns
with their titles, what it reads and its threads and runtime. The workflow generates one
rule per row (``workflow/rules/decision/analysis.smk``) that runs the one adapter script
``run_decision_analysis.py``; the database, ``rule all`` and the report list the tables from
here. One :class:`Figure` row per figure, likewise, each its own rule over only the tables it
draws.

What a row reads (``inputs``), each an input of its rule by that name:

- ``"frames"``: the three analysis frames (:mod:`.frames`), as ``AnalysisInputs.frames``;
- a table of another row (``"composition"``, ``"contrasts"``, ...): waits for that analysis;
- a file the workflow names (:data:`WORKFLOW_INPUTS`): the pre-registration, the files its
  lock binds, the outcome or prompt tables, the published aid contrasts, the prompt wording.

Its config values (``params``) are paths in the ``decision`` block, e.g.
``"analysis.composition_alpha"`` (each as ``AnalysisInputs.params["composition_alpha"]``,
its last part), or values the workflow derives from the config (:data:`DERIVED_PARAMS`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import polars as pl

from cueaudit.decision.analysis import computations, figures
from cueaudit.decision.analysis.inputs import AnalysisInputs, no_frames, read_frames
from cueaudit.report import write_table

log = logging.getLogger(__name__)

#: Inputs the workflow provides by name (decision/common.smk, DECISION_INPUTS).
WORKFLOW_INPUTS: Final = frozenset(
    {"preregistration", "registration", "outcomes", "prompts", "published", "design_prompts"}
)
#: Params the workflow derives from the config (decision/common.smk, DECISION_PARAMS).
DERIVED_PARAMS: Final = frozenset(
    {"tasks", "confounded_arms", "pooled_extensions", "name_assignments", "paired_arms"}
)


Compute = Callable[[AnalysisInputs], Mapping[str, pl.DataFrame]]


@dataclass(frozen=True)
class Analysis:
    """One decision analysis: its rule, its tables and titles, its function and inputs."""

    #: Its name: the log's (logs/decision/<name>.log) and DECISION_TABLES' key.
    name: str
    #: Its rule's name (a cluster profile groups or sizes rules by name).
    rule: str
    #: Table -> title; each is results/tables/decision_<table>.csv + .md and a database table.
    tables: Mapping[str, str]
    compute: Compute
    inputs: tuple[str, ...] = ("frames", "composition")
    params: tuple[str, ...] = ()
    threads: int = 1
    #: Minutes (a cluster's time limit).
    runtime: int = 30
    #: What it computes, in a line (the row's documentation).
    about: str = ""


@dataclass(frozen=True)
class Figure:
    """One figure: the tables it draws and how (results/figures/decision_<name>.png)."""

    name: str
    tables: tuple[str, ...]
    draw: Callable[..., None]
    #: Also a PDF (results/figures/decision_<name>.pdf, for print), written beside the PNG.
    pdf: bool = False


_AFTER_COMPOSITION: Final = ("frames", "composition")
ANALYSES: Final[dict[str, Analysis]] = {
    row.name: row
    for row in (
        Analysis(
            "outcomes",
            "summarise_decision_outcomes",
            {"outcome_summary": "Decision audit: answers parsed per task, format and mode"},
            computations.outcome_summary_tables,
            inputs=("prompts", "outcomes"),
            params=("tasks",),
            about="answers parsed per task, format and mode",
        ),
        Analysis(
            "composition",
            "check_decision_composition",
            {
                "composition": "Decision audit: composition of every analysed subsample",
                "composition_flags": "Decision audit: the unbalanced cells of failed checks",
            },
            computations.composition_tables,
            inputs=("frames",),
            params=(
                "analysis.composition_alpha",
                "analysis.stop_on_differential_nonresponse",
                "confounded_arms",
            ),
            about="the composition of every analysed subsample; every other analysis waits",
        ),
        Analysis(
            "nonresponse",
            "analyse_decision_nonresponse",
            {
                "nonresponse": "Decision audit: non-response by group",
                "nonresponse_tests": "Decision audit: does non-response depend on race or "
                "gender? (per model and format)",
            },
            computations.nonresponse_tables,
            inputs=(*_AFTER_COMPOSITION, "outcomes"),
            params=("analysis.nonresponse_alpha", "analysis.stop_on_differential_nonresponse"),
            about="differential non-response per model and format: a flag, or a stop",
        ),
        Analysis(
            "contrasts",
            "estimate_decision_contrasts",
            {
                "contrasts": "Decision audit: pre-registered contrasts",
                "interactions": "Decision audit: format × group interactions",
                "placebo": "Decision audit: the placebo cell's false-positive check",
                "leave_one_out": "Decision audit: leave-one-name / profile-out",
                "extension_contrasts": "Decision audit: the planned contrasts re-estimated in "
                "each extension (not pre-registered)",
                "sequential": "Decision audit: pre-registered sequential looks (alpha spending)",
            },
            computations.contrasts_tables,
            inputs=(*_AFTER_COMPOSITION, "nonresponse_tests", "preregistration", "registration"),
            params=("pooled_extensions",),
            threads=2,
            runtime=60,
            about="the pre-registered contrasts, interactions, placebo, leave-one-out, "
            "extensions and sequential looks",
        ),
        Analysis(
            "planted",
            "plant_decision_disparities",
            {"planted": "Decision audit: planted disparities, recovered against planted"},
            computations.planted_tables,
            inputs=(*_AFTER_COMPOSITION, "preregistration", "design_prompts"),
            params=(
                "analysis.planted_sizes",
                "analysis.planted_contrast",
                "analysis.simulate",
                "analysis.seed",
            ),
            threads=2,
            runtime=60,
            about="planted disparities in real and simulated answers, recovered",
        ),
        Analysis(
            "instrument",
            "measure_decision_instrument",
            {
                "position": "Decision audit: first-listed gain against the largest demographic "
                "effect",
                "ties": "Decision audit: tie rates per bundle type",
                "recognition": "Decision audit: recognition rates per bundle type and probe",
                "agreement": "Decision audit: tool-call versus text answers",
                "recognition_position": "Decision audit: forced-choice recognition by the "
                "position of the Fairness option",
                "recognition_ties": "Decision audit: recognition against ties, per bundle type "
                "and model",
            },
            computations.instrument_tables,
            inputs=(*_AFTER_COMPOSITION, "contrasts"),
            about="the instrument's own effects: position, ties, recognition, text versus tool",
        ),
        Analysis(
            "heterogeneity",
            "estimate_decision_heterogeneity",
            {
                "contrasts_by": "Decision audit: the planned contrasts per model, mode and "
                "paraphrase (exploratory)",
                "heterogeneity": "Decision audit: heterogeneity of each contrast across models, "
                "modes, paraphrases",
                "intersectional": "Decision audit: race × gender cells against White men, and "
                "their interaction",
                "mode_differences": "Decision audit: the mode difference of each contrast, from "
                "one joint fit",
            },
            computations.heterogeneity_tables,
            inputs=(*_AFTER_COMPOSITION, "preregistration", "registration"),
            runtime=60,
            about="each contrast per model, mode and paraphrase, its heterogeneity, race × "
            "gender cells and mode differences (exploratory)",
        ),
        Analysis(
            "specification_curve",
            "estimate_decision_specification_curve",
            {
                "specification_curve": "Decision audit: every specification of the design's "
                "choices (exploratory)",
                "specification_summary": "Decision audit: the specification curve's verdicts "
                "and permutation tests (exploratory)",
            },
            computations.specification_curve_tables,
            inputs=(*_AFTER_COMPOSITION, "preregistration", "registration"),
            params=("analysis.specification_curve",),
            threads=2,
            runtime=240,
            about="every estimate the design's own choices give, and the curve's permutation "
            "tests (exploratory); specifications x (1 + 2 x permutations) fits",
        ),
        Analysis(
            "aid_replication",
            "estimate_decision_aid_replication",
            {
                "aid_replication": "Decision audit: the aid-domain replication on "
                "FairFund-Bench's stimuli, beside the published contrasts"
            },
            computations.aid_replication_tables,
            inputs=(*_AFTER_COMPOSITION, "preregistration", "published"),
            about="the aid domain's contrasts beside FairFund-Bench's published ones",
        ),
        Analysis(
            "wording",
            "estimate_decision_wording",
            {"wording": "Decision audit: the wording arm, by paraphrase and paraphrase × group"},
            computations.wording_tables,
            inputs=(*_AFTER_COMPOSITION, "composition_flags", "preregistration"),
            params=("name_assignments",),
            about="the wording arm by paraphrase and paraphrase × group, flagged cells marked",
        ),
        Analysis(
            "reasoning_paired",
            "compare_decision_reasoning",
            {
                "reasoning_paired": "Decision audit: reasoning on minus off, the same model, "
                "prompts and seeds"
            },
            computations.reasoning_paired_tables,
            inputs=(*_AFTER_COMPOSITION, "preregistration"),
            params=("paired_arms",),
            about="a paired arm (reasoning on) against the same model without",
        ),
        Analysis(
            "bundle_designs",
            "measure_decision_bundle_designs",
            {
                "recognition_ties_by_type": "Decision audit: ties and recognition by bundle "
                "type, and their association (exploratory)",
                "position_vs_demographics": "Decision audit: the half-of-list position contrast "
                "against race and gender at equal design precision (exploratory)",
            },
            computations.bundle_designs_tables,
            about="the exploratory bundle types: recognition against ties, position against "
            "demographics",
        ),
        Analysis(
            "cues",
            "estimate_decision_cues",
            {
                "cue_contrasts": "Decision audit: the planned contrasts per cue type (exploratory)",
                "cue_validity": "Decision audit: convergent validity of the cue types "
                "(exploratory)",
            },
            computations.cues_tables,
            inputs=(*_AFTER_COMPOSITION, "preregistration"),
            params=("analysis.composition_alpha",),
            about="every planned contrast per cue type beyond name pairs, and their "
            "convergent validity",
        ),
    )
}


FIGURES: Final[dict[str, Figure]] = {
    row.name: row
    for row in (
        Figure("forest", ("contrasts",), figures.plot_contrast_forest),
        Figure("planted", ("planted",), figures.plot_planted),
        Figure("position", ("position", "contrasts"), figures.plot_position_vs_demographic),
        Figure("ties_recognition", ("ties", "recognition"), figures.plot_tie_recognition),
        Figure("nonresponse", ("nonresponse",), figures.plot_nonresponse),
        Figure("forest_by_model", ("contrasts_by",), figures.plot_forest_by_model),
        Figure(
            "specification_curve",
            ("specification_curve",),
            figures.plot_specification_curve,
            pdf=True,
        ),
    )
}


def check_registry(
    analyses: Mapping[str, Analysis] = ANALYSES, figures_: Mapping[str, Figure] = FIGURES
) -> None:
    """Every table written once, every input and param one the workflow can give, every
    figure drawing tables that exist; raises ValueError naming the row."""
    written: dict[str, str] = {}
    for analysis in analyses.values():
        for table in analysis.tables:
            if table in written:
                raise ValueError(
                    f"decision analyses {written[table]!r} and {analysis.name!r} both write "
                    f"{table!r}"
                )
            written[table] = analysis.name
    for analysis in analyses.values():
        unknown = [
            name
            for name in analysis.inputs
            if name != "frames" and name not in WORKFLOW_INPUTS and name not in written
        ]
        if unknown:
            raise ValueError(
                f"decision analysis {analysis.name!r} reads {unknown}: neither a table of "
                f"another analysis nor a workflow input ({sorted(WORKFLOW_INPUTS)})"
            )
        if any(written.get(name) == analysis.name for name in analysis.inputs):
            raise ValueError(f"decision analysis {analysis.name!r} reads its own table")
        derived = [p for p in analysis.params if "." not in p and p not in DERIVED_PARAMS]
        if derived:
            raise ValueError(
                f"decision analysis {analysis.name!r}: params {derived} are neither config "
                f"paths (analysis.<key>) nor derived values ({sorted(DERIVED_PARAMS)})"
            )
    for figure in figures_.values():
        missing = [t for t in figure.tables if t not in written]
        if missing:
            raise ValueError(
                f"decision figure {figure.name!r} draws tables {missing} no analysis writes"
            )


def run_analysis(
    name: str,
    *,
    files: Mapping[str, Any],
    params: Mapping[str, Any],
    out: Mapping[str, str],
    threads: int = 1,
    analyses: Mapping[str, Analysis] = ANALYSES,
) -> dict[str, pl.DataFrame]:
    """Compute analysis ``name`` and write each of its tables (CSV at ``out[table]``,
    Markdown beside it, with its title). Nothing is written if the computation fails."""
    analysis = analyses[name]
    frames = read_frames(files) if "frames" in analysis.inputs else no_frames()
    tables = dict(analysis.compute(AnalysisInputs(frames, files, params, threads)))
    if set(tables) != set(analysis.tables):
        raise ValueError(
            f"decision analysis {name!r} returned tables {sorted(tables)}, "
            f"but its row declares {sorted(analysis.tables)}"
        )
    for table, title in analysis.tables.items():
        write_table(tables[table], out[table], title)
        log.info("%s: %d rows\n%s", table, tables[table].height, tables[table])
    return tables


def draw_figure(
    name: str, tables: Mapping[str, str], out: str, figures_: Mapping[str, Figure] = FIGURES
) -> None:
    """Draw figure ``name`` from the CSVs of its tables (in its row's order) to ``out`` (its
    PDF where it has one: the PNG is written beside it)."""
    figure = figures_[name]
    read = [pl.read_csv(tables[t], infer_schema_length=None) for t in figure.tables]
    figure.draw(*read, out)
