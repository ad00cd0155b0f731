"""A new decision analysis costs two file edits: the worked example of docs/architecture.md
("Adding a decision analysis"), made in a copy of the repository, gives a rule of its own in
the workflow's dry run, and run on a simulated study it writes the table its function
computes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from tests.conftest import ROOT
from tests.helpers.worked_example import (
    changed_files,
    code_blocks,
    copy_repository,
    insert_after,
)

pytestmark = pytest.mark.slow

MODULE_PATH = "src/cueaudit/decision/analysis/means_by_race.py"
REGISTRY_PATH = "src/cueaudit/decision/analysis/registry.py"
#: The end of the ANALYSES listing in the registry: the new row goes before it.
LISTING_END = "    )\n}\n\n\nFIGURES"


def worked_example() -> list[str]:
    """The code blocks of the page's "Adding a decision analysis": the module, the row."""
    return code_blocks("Adding a decision analysis", ["python", "python"])


def add_means_by_race(repo: Path) -> None:
    """The two edits of the worked example."""
    module, row = worked_example()
    (repo / MODULE_PATH).write_text(module, encoding="utf-8")
    import_line, row = row.split("\n", 1)
    registry = repo / REGISTRY_PATH
    text = insert_after(
        registry.read_text(), "from __future__ import annotations\n", import_line + "\n"
    )
    assert text.count(LISTING_END) == 1
    text = text.replace(LISTING_END, row.strip("\n") + "\n" + LISTING_END)
    registry.write_text(text, encoding="utf-8")


def decision_config(work: Path) -> Path:
    """The default decision audit alone, its files from the checkout."""
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text(encoding="utf-8"))
    config.pop("probing")
    config["cues"] = {}
    (work / "resources").symlink_to(ROOT / "resources")
    (work / "config").symlink_to(ROOT / "config")
    path = work / "run.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


RUN_ON_A_SIMULATED_STUDY = """
import sys
from pathlib import Path
from cueaudit.decision.analysis.registry import check_registry
from cueaudit.decision.analysis.simulate import simulate
from tests.helpers.decision_analyses import run_on_frames
from tests.unit.test_decision_simulation import settings

check_registry()
frames = simulate(settings(seeds=(0,)), 0)
run_on_frames("means_by_race", frames, Path(sys.argv[1]))
"""


def test_a_new_decision_analysis_is_two_edits(tmp_path: Path) -> None:
    repo, work = tmp_path / "repo", tmp_path / "work"
    copy_repository(repo)
    add_means_by_race(repo)
    assert changed_files(repo) == {MODULE_PATH, REGISTRY_PATH}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": f"{repo / 'src'}{os.pathsep}{ROOT}"}

    work.mkdir()
    target = "results/tables/decision_means_by_race.csv"
    dry_run = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"),
         "--directory", str(work), "--configfile", str(decision_config(work)), "-n", target],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert dry_run.returncode == 0, dry_run.stderr[-3000:]
    planned = dry_run.stdout + dry_run.stderr
    job = re.search(
        r"^rule summarise_decision_means_by_race:\n(.*?)^\s*jobid", planned, re.M | re.S
    )
    assert job is not None, planned[-3000:]
    assert "results/decision/frames/judgements.parquet" in job[1]
    assert "results/tables/decision_composition.csv" in job[1]
    assert f"output: {target}, results/tables/decision_means_by_race.md" in job[1]

    tables = tmp_path / "tables"
    run = subprocess.run(
        [sys.executable, "-c", RUN_ON_A_SIMULATED_STUDY, str(tables)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    written = pl.read_csv(tables / "decision_means_by_race.csv")
    judgements = pl.read_parquet(tables / "judgements.parquet").filter(pl.col("y").is_not_null())
    assert written.height == judgements.select("arm", "model", "format", "race").n_unique() > 4
    for row in written.iter_rows(named=True):
        cell = judgements.filter(
            (pl.col("arm") == row["arm"])
            & (pl.col("model") == row["model"])
            & (pl.col("format") == row["format"])
            & (pl.col("race") == row["race"])
        )
        assert row["n"] == cell.height
        assert row["mean"] == pytest.approx(cell["y"].mean(), rel=1e-12)
    markdown = (tables / "decision_means_by_race.md").read_text(encoding="utf-8")
    assert "Decision audit: mean judgement per arm, model, format and race" in markdown
