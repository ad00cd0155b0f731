"""The decision-audit benchmarks run at their --smoke size, so a benchmark that stops running
fails the tests (their numbers at this size mean nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, out: Path) -> dict:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def test_decision_calibration_smoke(tmp_path: Path) -> None:
    results = _run("decision_calibration.py", tmp_path / "calibration.json")
    assert results["smoke"] and results["null"]["studies"] == results["planted"]["studies"] == 4
    cells = results["null"]["cells"]
    assert set(cells) == {"rate/lmm", "decide/lmm", "rank/lmm", "rank/rologit"}
    for cell in cells.values():
        assert 0.0 <= cell["rejection_rate"] <= 1.0 and cell["tests"] > 0
    planted = results["planted"]["cells"]["rank/lmm"]
    assert planted["planted"] == pytest.approx(0.20) and "mean_estimate" in planted
    table = (tmp_path / "calibration.md").read_text()
    assert table.startswith("| format / estimator |") and "Measured at commit " in table


def test_decision_analysis_smoke(tmp_path: Path) -> None:
    results = _run("decision_analysis.py", tmp_path / "analysis.json")
    steps = ("contrasts", "interactions", "placebo", "leave_one_out", "planted", "position")
    for step in steps:
        assert "error" not in results[step] and results[step]["table_rows"] > 0, step
