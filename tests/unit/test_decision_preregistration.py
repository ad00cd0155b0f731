"""The decision audit's pre-registration: the planned family and the lock's label."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cueaudit.decision.preregistration import freeze, load_preregistration, status
from cueaudit.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config/decision/preregistration.yaml"


def test_shipped_file_plans_36_contrasts_with_the_published_margins() -> None:
    plan = load_preregistration(SHIPPED)
    assert len(plan.contrasts) == 36
    assert len({c.id for c in plan.contrasts}) == 36
    assert {c.domain for c in plan.contrasts} == {"hiring", "lending", "triage"}
    assert plan.margins == {"rate": 0.090, "rank": 0.067, "decide": None}
    assert plan.primary["domain"] == "hiring" and plan.primary["contrast"] == "black_vs_white"
    assert plan.alpha == 0.05


def test_a_file_changed_after_the_lock_is_not_pre_registered(tmp_path: Path) -> None:
    prereg = tmp_path / "preregistration.yaml"
    shutil.copy(SHIPPED, prereg)
    lock = tmp_path / "results/decision/preregistration.lock"
    assert not status(prereg, lock).pre_registered  # never frozen
    record = freeze(prereg, lock)
    assert status(prereg, lock).pre_registered
    # Freezing again keeps the first lock, whatever the file says now.
    prereg.write_text(prereg.read_text().replace("rate: 0.090", "rate: 0.200"))
    assert freeze(prereg, lock) == record
    assert json.loads(lock.read_text())["sha256"] == record["sha256"]
    after = status(prereg, lock)
    assert not after.pre_registered
    assert "changed after it was locked" in after.reason and "exploratory" in after.reason
    # Restoring the locked content restores the label.
    shutil.copy(SHIPPED, prereg)
    assert status(prereg, lock).pre_registered


def test_a_malformed_file_is_never_locked(tmp_path: Path) -> None:
    bad = tmp_path / "preregistration.yaml"
    bad.write_text("alpha: 0.05\nprimary: {}\nfamily: {domains: [hiring], formats: [rate]}\n")
    lock = tmp_path / "lock"
    with pytest.raises(InputError, match="missing key 'equivalence_margins'"):
        freeze(bad, lock)
    assert not lock.exists()
    bad.write_text(SHIPPED.read_text().replace("formats: [rate, decide, rank]", "formats: [vote]"))
    with pytest.raises(InputError, match="unknown format 'vote'"):
        load_preregistration(bad)
