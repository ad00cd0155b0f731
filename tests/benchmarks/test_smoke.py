"""Every benchmark runs at its --smoke size, so a benchmark that stops running fails the tests
(their numbers at this size mean nothing), and benchmarks/README.md's tables are what the
benchmarks' JSON renders."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
#: Not benchmarks: the shared helpers and the README generator.
HELPERS = {"common.py", "readme.py"}
#: The longest smoke run first: under ``pytest -n 2 --dist load`` (.ci/run) the other worker
#: takes the rest meanwhile (inference.py builds the default run's prompt tables first).
SCRIPTS = sorted(
    (p.name for p in BENCHMARKS.glob("*.py") if p.name not in HELPERS),
    key=lambda name: (name != "inference.py", name),
)


def _benchmark_module(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))  # the benchmarks import their common.py
    try:
        spec = importlib.util.spec_from_file_location(
            f"benchmarks_{name}", BENCHMARKS / f"{name}.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def _readme_module() -> ModuleType:
    return _benchmark_module("readme")


def test_the_benchmarks_are_found() -> None:
    assert {"dag.py", "analysis.py", "expansion.py", "gpu_inference.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_has_a_smoke_size(script: str) -> None:
    source = (BENCHMARKS / script).read_text(encoding="utf-8")
    assert re.search(r"""add_argument\(\s*["']--smoke["']""", source), f"{script}: no --smoke"
    docstring = ast.get_docstring(ast.parse(source)) or ""
    assert "--smoke" in docstring, f"{script}: its docstring does not say what --smoke runs"
    assert 'if __name__ == "__main__":' in source, f"{script}: runs when imported"


def _calibration(results: dict, out: Path) -> None:
    assert results["null"]["studies"] == results["planted"]["studies"] == 4
    cells = results["null"]["cells"]
    assert set(cells) == {"rate/lmm", "decide/lmm", "rank/lmm", "rank/rologit"}
    for cell in cells.values():
        assert 0.0 <= cell["rejection_rate"] <= 1.0 and cell["tests"] > 0
    planted = results["planted"]["cells"]["rank/lmm"]
    assert planted["planted"] == pytest.approx(0.20) and "mean_estimate" in planted
    table = out.with_suffix(".md").read_text()
    assert table.startswith("| format / estimator |") and "Measured at commit " in table


def _decision_analysis(results: dict, out: Path) -> None:
    steps = ("contrasts", "interactions", "placebo", "leave_one_out", "planted", "position")
    for step in steps:
        assert "error" not in results[step] and results[step]["table_rows"] > 0, step


def _interaction_calibration(results: dict, out: Path) -> None:
    assert set(results["regimes"]) == {"calibration", "shared names"}
    for run in results["regimes"].values():
        assert run["studies"] == 4
        assert set(run["formats"]) == {"rate-decide", "rate-rank", "decide-rank"}
        for row in run["formats"].values():
            assert row["tests"] == 16 and 0.0 <= row["rejection_rate"] <= 1.0
    assert out.with_suffix(".md").read_text().startswith("| regime | formats |")


#: What a benchmark's smoke results must hold besides running (by script).
CONTENT_CHECKS = {
    "decision_calibration.py": _calibration,
    "decision_analysis.py": _decision_analysis,
    "interaction_calibration.py": _interaction_calibration,
}


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_runs_at_its_smoke_size(script: str, tmp_path: Path) -> None:
    out = tmp_path / script.replace(".py", ".json")
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        # a hung benchmark fails, a busy machine does not: inference.py's smoke, which builds
        # the default run's prompt tables first, took 400 s at load average 4
        timeout=1800,
        cwd=ROOT,
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    assert out.is_file(), f"{script} --smoke wrote no {out.name}"
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["smoke"] is True
    assert results["commit"]
    if script in CONTENT_CHECKS:
        CONTENT_CHECKS[script](results, out)


def test_every_readme_block_has_a_benchmark_that_renders_it() -> None:
    readme = _readme_module()
    names = readme.blocks(readme.README.read_text(encoding="utf-8"))
    assert names and len(names) == len(set(names))
    for name in names:
        tree = ast.parse((BENCHMARKS / f"{name}.py").read_text(encoding="utf-8"))
        functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert "render_table" in functions, name


def test_the_readme_is_what_the_json_renders() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "readme.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_fails_on_a_stale_table(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    readme = _readme_module()
    text = readme.README.read_text(encoding="utf-8")
    assert readme.render(text) == text
    stale = text.replace("<!-- table: dag -->\n", "<!-- table: dag -->\n| 1 | 2.0 | 3 MB |\n", 1)
    outside = text.replace("## Workflow DAG", "## The workflow DAG", 1)
    assert stale != text and outside != text
    assert readme.differing(stale) == ["dag"]
    assert readme.render(stale) == text  # the generator puts the table back
    assert readme.differing(outside) == [] and readme.render(outside) == outside
    copy = tmp_path / "README.md"
    copy.write_text(stale, encoding="utf-8")
    assert readme.main(["--check", "--readme", str(copy)]) == 1
    assert "dag" in capsys.readouterr().err
    assert copy.read_text(encoding="utf-8") == stale  # --check writes nothing


def test_a_missing_json_renders_as_not_measured(tmp_path: Path) -> None:
    readme = _readme_module()
    text = "# x\n\n<!-- table: dag -->\nold\n<!-- /table -->\n"
    rendered = readme.render(text, tmp_path)
    assert "Not measured yet: run `python benchmarks/dag.py`." in rendered
    assert rendered.startswith("# x\n\n<!-- table: dag -->\n") and "old" not in rendered


def test_run_info_and_the_smoke_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import common
    finally:
        sys.path.remove(str(BENCHMARKS))
    info = common.run_info()
    assert set(info) == {"commit", "date", "cpus", "load_average"}
    assert info["commit"] and isinstance(info["load_average"], list)
    assert common.default_out("dag", False) == BENCHMARKS / "results/dag.json"
    assert BENCHMARKS not in common.default_out("dag", True).parents
    results = {"smoke": True}
    common.write_results(tmp_path / "x.json", results)
    written = json.loads((tmp_path / "x.json").read_text())
    assert {"commit", "date", "load_after"} <= set(written)
    legacy = {"load_average_start": 7.39, "load_average_end": 7.62}
    assert common.footer(legacy) == (
        "Measured (commit not recorded), load average 7.4 → 7.6, date not recorded."
    )
    monkeypatch.setattr(common, "ROOT", tmp_path)  # not a git checkout
    assert common.run_info()["commit"] == "unknown"


#: A Snakemake log of two jobs: the set-up, then one inference job for every task of a seed.
SNAKEMAKE_LOG = """\
[Mon Dec  7 17:00:00 2026]
rule expand_prompts:
    output: results/prompts/legal.parquet
    jobid: 3
    wildcards: task=legal
    resources: tmpdir=/tmp
[Mon Dec  7 17:00:04 2026]
Finished jobid: 3 (Rule: expand_prompts)
[Mon Dec  7 17:00:05 2026]
rule generate_seed_responses:
    output: results/responses_per_seed/smollm2-135m/seed0
    log: logs/inference/smollm2-135m/seed0.log
    jobid: 7
    wildcards: model=smollm2-135m, seed=0
    threads: 2
[Mon Dec  7 17:01:45 2026]
Finished jobid: 7 (Rule: generate_seed_responses)
[Mon Dec  7 17:01:46 2026]
localrule copy_seed_responses:
    jobid: 9
    wildcards: model=smollm2-135m, seed=0, task=legal, shard=0
[Mon Dec  7 17:01:47 2026]
Finished jobid: 9 (Rule: copy_seed_responses)
"""
#: The seed job's own log: its engine start, then its two tasks.
SEED_LOG = """\
2026-12-07 17:00:06,120 INFO cueaudit.inference.runner: decoding (config over the model's defaults)
2026-12-07 17:00:13,500 INFO cueaudit.inference.runner: task 1 of 2: legal
2026-12-07 17:00:13,600 INFO cueaudit.inference.runner: model calls: 24, cache hits: 0
2026-12-07 17:01:13,900 INFO cueaudit.inference.runner: task 2 of 2: decision_rate_text
"""


def test_the_main_job_splits_a_seed_job_at_its_tasks(tmp_path: Path) -> None:
    """A per-seed inference job (config/config.yaml's way) counts as its engine start plus
    one share per task, each in its study's stage; the job count stays Snakemake's."""
    main_job = _benchmark_module("main_job")
    jobs = main_job.parse_log(SNAKEMAKE_LOG)
    assert [(j["rule"], j["seconds"]) for j in jobs] == [
        ("expand_prompts", 4.0),
        ("generate_seed_responses", 100.0),
        ("copy_seed_responses", 1.0),
    ]
    log = tmp_path / "logs/inference/smollm2-135m/seed0.log"
    log.parent.mkdir(parents=True)
    log.write_text(SEED_LOG)
    split = main_job.split_seed_jobs(jobs, tmp_path)
    shares = [(j["rule"], j["task"], j["seconds"]) for j in split if "generate" in j["rule"]]
    assert shares == [
        ("generate_seed_responses", None, 8.0),  # 17:00:05 to the first task line
        ("generate_responses", "legal", 60.0),
        ("generate_responses", "decision_rate_text", 32.0),  # to the job's end
    ]
    stages = main_job.stages(split)
    assert stages["inference: probing advice tasks"]["job_seconds"] == 60.0
    assert stages["inference: decision audit"]["job_seconds"] == 32.0
    assert stages["inference: engine starts of the per-seed jobs"]["jobs"] == 1
    assert stages["parsing"]["jobs"] == 1  # the copied shard
    log.write_text("2026-12-07 17:00:06,120 INFO cueaudit.inference.runner: no task line\n")
    with pytest.raises(SystemExit, match="no task line"):
        main_job.split_seed_jobs(jobs, tmp_path)
