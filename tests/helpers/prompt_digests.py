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
from pathlib import Path

from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.decision.aid import with_aid
from cueaudit.decision.analysis.simulation_settings import (
    SimulationSettings,
    config_settings,
    paper_settings,
)
from cueaudit.decision.formats import AID_DOMAIN, DEFAULT_PROMPTS
from cueaudit.decision.profiles import load_attribute_list, load_profiles
from cueaudit.decision.prompts import PRIMARY, build_decision_prompts

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
    profiles = load_profiles(
        settings.path(settings.profiles),
        settings.profiles_format,  # type: ignore[arg-type]
        settings.strip_suffixes,
    )
    pairs = load_name_pairs(settings.path(settings.name_pairs))
    hobbies = load_attribute_list(settings.path(settings.hobbies))
    neighbourhoods = load_attribute_list(settings.path(settings.neighbourhoods))
    chosen = {a: d for a, (d, _) in settings.arms().items() if arms is None or a in arms}
    domains = sorted({d for design in chosen.values() for d in design.get("domains", ())})
    stimuli = settings.fairfund_stimuli and settings.path(settings.fairfund_stimuli)
    profiles, appeals = with_aid(profiles, pairs, stimuli or None, domains)
    out: dict[str, list] = {}
    for arm, design in chosen.items():
        prompts = str(settings.path(design.get("prompts", DEFAULT_PROMPTS)))
        tables = build_decision_prompts(
            profiles, pairs, hobbies, neighbourhoods, {**design, "prompts": prompts}, arm,
            appeals=appeals,
        )  # fmt: skip
        for task, table in tables.items():
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
