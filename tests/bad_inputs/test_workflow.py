"""Bad inputs through the workflow (``snakemake --dry-run``): the exit code, the library's
message on the console, and ``results/`` left as it was.

Cases (17): decision design settings the library rejects while the workflow is parsed (bundle
sizes, more paraphrases than the prompts file has, a misspelt max_new_tokens task, a design of
millions of requests whose size is not confirmed), extension names that would escape results/
or replace the pre-registered arm (a path, a space, "primary"), a configured resource file
that does not exist, six ``--configfile`` files Snakemake would report without the file and
line, with a traceback, or not at all (a YAML syntax error, a tab, a Python tag, an empty
file, a missing file, a folder), a stale installed copy of the library first on the path,
and a hobby and a neighbourhood that carry a demographic cue (the build rule itself runs: no
dry run reaches the check).
Snakemake loads ``--configfile`` files while it parses its command line, before the
Snakefile; the workflow profile reads them first (cueaudit.config.stop_on_bad_configfiles).
Other config cases: tests/e2e/test_config_errors.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.bad_inputs.battery import seeded_results, snapshot
from tests.conftest import ROOT, SnakemakeRunner, write_config
from tests.e2e.test_decision import decision_config

pytestmark = pytest.mark.e2e


def bundles_not_a_multiple(config: dict[str, Any], workdir: Path) -> None:
    config["decision"]["design"]["bundles_per_type"]["demographic_matched"] = 6


def preregistration_missing(config: dict[str, Any], workdir: Path) -> None:
    config["decision"]["preregistration"] = str(workdir / "missing" / "prereg.yaml")


def extension(name: str) -> Any:
    def change(config: dict[str, Any], workdir: Path) -> None:
        config["decision"]["extensions"] = {name: {"extension": True, "design": {"seed": 1}}}

    return change


def max_new_tokens_misspelt(config: dict[str, Any], workdir: Path) -> None:
    config["decision"]["max_new_tokens"] = {"decision_rate_txt": 16}


def more_paraphrases_than_written(config: dict[str, Any], workdir: Path) -> None:
    config["decision"]["design"]["paraphrases"] = 3


def a_huge_design(config: dict[str, Any], workdir: Path) -> None:
    config["models"] = {f"m{i}": dict(config["models"]["smollm2-135m"]) for i in range(40)}
    config["seeds"] = list(range(60))
    design = config["decision"]["design"]
    for every in ("tasks", "domains"):
        design.pop(every)
    design.update(profiles_per_tier=4, names_per_cell=5)


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
        pytest.param(
            extension("../../../../../escape/x"),
            "config key decision.extensions: '../../../../../escape/x' does not match "
            "'^[a-z][a-z0-9]*(_[a-z0-9]+)*$'",
            id="workflow-extension-name-a-path",
        ),
        pytest.param(
            extension("top up"),
            "config key decision.extensions: 'top up' does not match",
            id="workflow-extension-name-with-a-space",
        ),
        pytest.param(
            extension("primary"),
            "config key decision.extensions.primary: 'primary' is the pre-registered design's "
            "arm; give the extension another name",
            id="workflow-extension-named-primary",
        ),
        pytest.param(
            max_new_tokens_misspelt,
            "config key decision.max_new_tokens.decision_rate_txt: not a format (rate, decide, "
            "rank, probe, tool_call) or a task of this design",
            id="workflow-max-new-tokens-task-misspelt",
        ),
        pytest.param(
            more_paraphrases_than_written,
            "prompts.yaml: field 'instructions.rate': fewer than 3 paraphrases",
            id="workflow-more-paraphrases-than-written",
        ),
        pytest.param(
            a_huge_design,
            "more than 1,000,000; confirm its size with expected_requests:",
            id="workflow-a-huge-design-unconfirmed",
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


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(
            "probing:\n  analysis:\n    seeds: [0, 1\n    bootstrap_replicates: 300\n",
            "{extra}: YAML syntax error at line 4, column 25: while parsing a flow sequence; "
            "expected ',' or ']', but got ':'",
            id="configfile-yaml-syntax-error",
        ),
        pytest.param(
            "probing:\n\tanalysis: {}\n",
            "{extra}: YAML syntax error at line 2, column 1: while scanning for the next token; "
            "found character '\\t' that cannot start any token",
            id="configfile-tab-indentation",
        ),
        pytest.param(
            # Snakemake's loader builds a tuple from this; the config's own loader refuses it.
            "seeds: !!python/tuple [0, 1]\n",
            "{extra}: YAML syntax error at line 1, column 8: could not determine a constructor "
            "for the tag 'tag:yaml.org,2002:python/tuple'",
            id="configfile-python-tag",
        ),
        pytest.param(
            "",
            "{extra}: the file is empty (it must hold the config's keys)",
            id="configfile-empty",
        ),
        pytest.param(
            None,
            "{extra}: cannot read the config file: [Errno 2] No such file or directory: '{extra}'",
            id="configfile-missing",
        ),
        pytest.param(
            "folder",
            "{extra}: cannot read the config file: [Errno 21] Is a directory: '{extra}'",
            id="configfile-folder",
        ),
    ],
)
def test_a_bad_configfile_is_named_with_its_line(
    tmp_path: Path, run_snakemake: SnakemakeRunner, content: str | None, message: str
) -> None:
    write_config(tmp_path, decision_config())
    extra = tmp_path / "extra.yaml"
    if content == "folder":
        extra.mkdir()
    elif content is not None:
        extra.write_text(content, encoding="utf-8")
    results = seeded_results(tmp_path)
    before = snapshot(results)
    result = run_snakemake(tmp_path, "--dry-run", "--configfile", str(extra), check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 1
    assert f"Error: {message.format(extra=extra)}\n" in output, output[-2000:]
    assert "Traceback" not in output
    assert snapshot(results) == before


def test_the_workflow_uses_the_checkouts_library_not_an_installed_copy(
    tmp_path: Path, run_snakemake: SnakemakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another checkout's editable install (or an older release) first on the path: the
    workflow profile, which runs before the Snakefile, must still import this checkout's."""
    stale = tmp_path / "stale" / "cueaudit"
    stale.mkdir(parents=True)
    (stale / "__init__.py").write_text("")
    (stale / "config.py").write_text(
        "import sys\n\ndef stop_on_bad_configfiles(argv):\n    sys.exit('a stale cueaudit')\n"
    )
    # The checkout itself on the path too, behind the stale copy, as its own editable
    # install puts it: being on the path is not enough, it has to come first.
    monkeypatch.setenv("PYTHONPATH", f"{stale.parent}:{ROOT / 'src'}")
    write_config(tmp_path, decision_config())
    result = run_snakemake(tmp_path, "--dry-run", check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "a stale cueaudit" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("key", "line", "token"),
    [
        pytest.param(
            "hobbies", "bowling with Latoya", "the name 'Latoya'", id="workflow-hobby-with-a-name"
        ),
        pytest.param(
            "neighbourhoods",
            "a street in Harlem",
            "the demographic term 'Harlem'",
            id="workflow-neighbourhood-with-a-term",
        ),
    ],
)
def test_a_cue_in_an_attribute_list_stops_the_prompt_build(
    tmp_path: Path, run_snakemake: SnakemakeRunner, key: str, line: str, token: str
) -> None:
    """The workflow's build rule refuses a planted cue in either attribute list, naming the
    file, the line and the token, and writes no prompt table."""
    config = decision_config()
    shipped = Path(config["decision"][key]).read_text(encoding="utf-8")
    planted = tmp_path / f"{key}.txt"
    planted.write_text(shipped + line + "\n", encoding="utf-8")
    config["decision"][key] = str(planted)
    write_config(tmp_path, config)
    results = seeded_results(tmp_path)
    before = snapshot(results)
    result = run_snakemake(tmp_path, "results/prompts/decision_rate_text.parquet", check=False)
    assert result.returncode == 1
    number = len(shipped.splitlines()) + 1
    message = f"attribute {planted}:{number}: field 'entry': contains {token}"
    log = (tmp_path / "logs/decision/build_decision_prompts.log").read_text(encoding="utf-8")
    assert message in log, log[-2000:]
    assert snapshot(results) == before
