"""Run a reference R script of this folder on a data frame; skip when R or a package is absent
(fail instead when ``CUEAUDIT_REQUIRE_R=1``, as CI sets it, so a reference cannot go missing
unnoticed).

CI installs R from Debian: ``apt-get install -y --no-install-recommends r-base-core
r-cran-lme4 r-cran-lmertest r-cran-clubsandwich r-cran-survival r-cran-rpact``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

HERE = Path(__file__).resolve().parent


def _missing(why: str) -> None:
    if os.environ.get("CUEAUDIT_REQUIRE_R") == "1":
        pytest.fail(f"{why}, and CUEAUDIT_REQUIRE_R=1")
    pytest.skip(why)


def require_r(package: str) -> str:
    """Path of Rscript, or skip the test naming what is missing."""
    rscript = shutil.which("Rscript")
    if rscript is None:
        _missing("Rscript is not installed (Debian: r-base-core)")
        raise AssertionError  # unreachable: _missing skips or fails
    probe = subprocess.run(
        [rscript, "-e", f"quit(status = !requireNamespace('{package}', quietly = TRUE))"],
        capture_output=True,
        timeout=120,
    )
    if probe.returncode != 0:
        _missing(f"R package {package} is not installed (Debian: r-cran-{package.lower()})")
    return rscript


def run_reference(
    script: str, package: str, data: pd.DataFrame, tmp: Path, *args: str
) -> dict[str, dict[str, float]]:
    """Write ``data``, run ``script`` on it; return ``{kind: {name: value}}`` of its output."""
    rscript = require_r(package)
    src, out = tmp / "in.csv", tmp / "out.csv"
    data.to_csv(src, index=False)
    done = subprocess.run(
        [rscript, str(HERE / script), str(src), str(out), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(out)
    result: dict[str, dict[str, float]] = {}
    for kind, name, value in table.itertuples(index=False):
        result.setdefault(str(kind), {})[str(name)] = float(value)
    return result
