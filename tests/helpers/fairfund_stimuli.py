"""A stimuli file in FairFund-Bench's format (its codebook's columns and labels) whose appeals
are written here, so the aid domain's tests run without FairFund's own texts. The names are
the shipped Elder & Hayes pairs, which are FairFund's."""

from __future__ import annotations

import csv
from pathlib import Path

from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.decision.fairfund import FAIRFUND_SCHEMA, FAIRFUND_VALUES

NAME_PAIRS = Path(__file__).resolve().parents[2] / "resources/names/elder_hayes_pairs.csv"
PREFIX = {"Medical": "med", "Rent": "rent", "Education": "edu"}
NEEDS = {"Medical": "a hospital bill", "Rent": "this month's rent", "Education": "tuition"}
FRAMINGS = {
    "no_cause": "",
    "structural": " My hours were cut when the plant closed.",
    "self_cause": " I left a steady job to try something new.",
    "stigma_no_redemption": " I spent my savings on gambling.",
    "stigma_redemption": " I spent my savings on gambling, and I am now in a recovery programme.",
}


def appeal(full_name: str, category: str, scenario: int, framing: str) -> str:
    return (
        f"Hi, my name is {full_name} and I am asking for help with {NEEDS[category]} "
        f"(case {scenario}).{FRAMINGS[framing]} Any help would mean a lot. Thank you!"
    )


def write_stimuli(path: Path, scenarios_per_category: int = 2) -> Path:
    """Every scenario x framing x name pair (40) of ``scenarios_per_category`` scenarios in
    each category, in FairFund's column order."""
    pairs = load_name_pairs(NAME_PAIRS).sort("race", "gender", "name_rank")
    rows = []
    for category in FAIRFUND_VALUES["category"]:
        for k in range(1, scenarios_per_category + 1):
            scenario = f"{PREFIX[category]}_{k:02d}"
            for framing in FAIRFUND_VALUES["framing"]:
                for pair in pairs.iter_rows(named=True):
                    text = appeal(pair["full_name"], category, k, framing)
                    rows.append(
                        {
                            "stimulus_id": f"{scenario}__{framing}__{pair['pair_id']}",
                            "category": category,
                            "scenario_id": scenario,
                            "scenario_label": f"{scenario}_label",
                            "framing": framing,
                            "race": pair["race"],
                            "gender": pair["gender"].capitalize(),
                            "name_rank": pair["name_rank"],
                            "first": pair["first"],
                            "last": pair["last"],
                            "full_name": pair["full_name"],
                            "text": text,
                            "word_count": len(text.split()),
                            "target_word_count": 120,
                            "within_tolerance": "FALSE",
                        }
                    )
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(FAIRFUND_SCHEMA))
        writer.writeheader()
        writer.writerows(rows)
    return path
