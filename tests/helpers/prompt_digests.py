"""Digests of the decision audit's prompt tables (task, prompt id, text) for the default run's
design (``config/config.yaml``) and the paper's (``config/decision/paper.yaml``), so a change
that must leave existing prompts alone (a new design factor at its default) can be checked
against the digests of the code before it (``tests/fixtures/decision_prompt_digests.json``).

Regenerate only for an intended change of the prompts: ``python -m tests.helpers.prompt_digests``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tempfile
from pathlib import Path

import polars as pl

from cueaudit.decision.analysis.simulation_settings import (
    SimulationSettings,
    config_settings,
    paper_settings,
)
from cueaudit.decision.build import write_decision_prompts
from cueaudit.decision.design import EXPLORATORY_BUNDLE_TYPES
from cueaudit.decision.design_settings import DesignSettings
from cueaudit.decision.formats import AID_DOMAIN
from cueaudit.decision.tasks import PRIMARY, arm_task

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests/fixtures/decision_prompt_digests.json"
#: FairFund-Bench's stimuli where the workspace keeps them (beside the checkout, or beside the
#: folder of worktrees); the paper's aid arm is digested only where they are.
FAIRFUND_CANDIDATES = (
    ROOT.parent / "shared/data/fairfund/stimuli.csv",
    ROOT.parent.parent / "shared/data/fairfund/stimuli.csv",
)


def fairfund_stimuli() -> Path | None:
    return next((p for p in FAIRFUND_CANDIDATES if p.is_file()), None)


def _digests(settings: SimulationSettings, label: str, arms: set[str] | None) -> dict[str, list]:
    """The digests of the prompt tables the workflow's build writes for ``arms`` (all: None)."""
    designs = {
        arm: {**design, "prompts": str(settings.path(DesignSettings.of(design).prompts))}
        for arm, (design, _) in settings.arms().items()
        if arms is None or arm in arms
    }
    stimuli = settings.fairfund_stimuli
    out: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as folder:
        paths = {
            arm_task(task, arm): str(Path(folder) / f"{arm_task(task, arm)}.parquet")
            for arm, design in designs.items()
            for task in DesignSettings.of(design).tasks
        }
        write_decision_prompts(
            profiles_path=settings.path(settings.profiles),
            profiles_format=settings.profiles_format,
            strip_suffixes=settings.strip_suffixes,
            audit_cues=(),
            name_pairs_path=settings.path(settings.name_pairs),
            hobbies_path=settings.path(settings.hobbies),
            neighbourhoods_path=settings.path(settings.neighbourhoods),
            terms_path=ROOT / "resources/decision/demographic_terms.txt",
            designs=designs,
            out_paths=paths,
            fairfund_stimuli_path=None if stimuli is None else settings.path(stimuli),
        )
        for task, path in paths.items():
            # the exploratory bundle types add prompts; every other prompt must stay as it was
            table = pl.read_parquet(path).filter(
                ~pl.col("bundle_type").is_in(EXPLORATORY_BUNDLE_TYPES)
            )
            digest = hashlib.sha256()
            for uid, text in table.select("prompt_uid", "text").iter_rows():
                digest.update(f"{uid}\t{hashlib.sha256(text.encode()).hexdigest()}\n".encode())
            out[f"{label}/{task}"] = [table.height, digest.hexdigest()]
    return out


def digests(root: Path = ROOT) -> dict[str, list]:
    """``{"config/<task>" | "paper/<task>": [rows, sha256]}``: the default run's pre-registered
    arm and every arm of the paper's design (its aid arm only where FairFund's stimuli are)."""
    out = _digests(config_settings(root, "config/config.yaml"), "config", {PRIMARY})
    paper = paper_settings(root)
    stimuli = fairfund_stimuli()
    if stimuli is None:
        arms = {
            arm
            for arm, (design, _) in paper.arms().items()
            if AID_DOMAIN not in design.get("domains", ())
        }
        return out | _digests(paper, "paper", arms)
    paper = dataclasses.replace(paper, fairfund_stimuli=str(stimuli))
    return out | _digests(paper, "paper", None)


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(digests(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
