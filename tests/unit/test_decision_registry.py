"""The registry of decision analyses refuses rows the workflow could not run."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cueaudit.decision.analysis.registry import ANALYSES, FIGURES, check_registry


def test_the_shipped_registry_is_consistent() -> None:
    check_registry()
    # every analysis but the outcome summary and the composition check waits for composition
    waiting = {name for name, row in ANALYSES.items() if "composition" in row.inputs}
    assert set(ANALYSES) - waiting == {"outcomes", "composition"}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda rows: rows | {"copy": replace(rows["planted"], name="copy")},
            "decision analyses 'planted' and 'copy' both write 'planted'",
        ),
        (
            lambda rows: rows | {"cues": replace(rows["cues"], inputs=("frames", "contrast"))},
            "decision analysis 'cues' reads ['contrast']: neither a table of another analysis",
        ),
        (
            lambda rows: rows | {"cues": replace(rows["cues"], inputs=("frames", "cue_validity"))},
            "decision analysis 'cues' reads its own table",
        ),
        (
            lambda rows: rows | {"cues": replace(rows["cues"], params=("composition_alpha",))},
            "decision analysis 'cues': params ['composition_alpha'] are neither config paths",
        ),
    ],
)
def test_a_row_the_workflow_cannot_run_is_refused(edit, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        check_registry(edit(dict(ANALYSES)))


def test_a_figure_of_a_table_no_analysis_writes_is_refused() -> None:
    figures = FIGURES | {"forest": replace(FIGURES["forest"], tables=("contrast",))}
    with pytest.raises(ValueError, match=r"decision figure 'forest' draws tables \['contrast'\]"):
        check_registry(ANALYSES, figures)
