"""Bad inputs through the workflow (``snakemake --dry-run``): the exit code, the library's
message on the console, and ``results/`` left as it was.

Cases (2): a decision design setting the library rejects while the workflow is parsed, and a
configured resource file that does not exist (config cases: tests/e2e/test_config_errors.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.bad_inputs.battery import seeded_results, snapshot
from tests.conftest import SnakemakeRunner, write_config
from tests.e2e.test_decision import decision_config

pytestmark = pytest.mark.e2e


def bundles_not_a_multiple(config: dict[str, Any], workdir: Path) -> None:
    config["decision"]["design"]["bundles_per_type"]["demographic_matched"] = 6


def preregistration_missing(config: dict[str, Any], workdir: Path) -> None:
    config["decision"]["preregistration"] = str(workdir / "missing" / "prereg.yaml")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(
            bundles_not_a_multiple,
            "bundles_per_type: field 'demographic_matched': a multiple of 4, got 6",
            id="workflow-bundles-not-a-multiple",
        ),
        pytest.param(
            preregistration_missing,
            "config key decision.preregistration: not found: {workdir}/missing/prereg.yaml",
            id="workflow-preregistration-missing",
        ),
    ],
)
def test_bad_input_stops_the_dry_run(
    tmp_path: Path, run_snakemake: SnakemakeRunner, change: Any, message: str
) -> None:
    config = decision_config()
    change(config, tmp_path)
    write_config(tmp_path, config)
    results = seeded_results(tmp_path)
    before = snapshot(results)
    result = run_snakemake(tmp_path, "--dry-run", check=False)
    assert result.returncode == 1
    assert message.format(workdir=tmp_path) in result.stdout + result.stderr
    assert snapshot(results) == before
