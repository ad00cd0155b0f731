"""The README's "Audit your own model", followed as written: each config snippet is written to a
working folder (the endpoint's pointed at the test llama.cpp server, the vLLM model's at a
local model folder), its dry run is run, and what it prints must be what the README shows: the
design's size lines and the job table's rows and total. Dry runs only: no model answers a
prompt, and the one llama.cpp server is shared by the module.

Two snippets use config keys of issue 31 (`api_key_env: null`, the `vllm:` block): each is
skipped, saying so, while the schema does not have its key yet.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import SnakemakeRunner
from tests.helpers.inference import llama_server, llama_server_available
from tests.helpers.readme import ROOT, job_table, parse_dry_run, readme_snippets, render_dry_run

pytestmark = pytest.mark.e2e

SNIPPETS = readme_snippets()
SCHEMA = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text(encoding="utf-8"))
MODEL_KEYS = SCHEMA["properties"]["models"]["additionalProperties"]["properties"]


def _schema_allows_keyless_endpoints() -> bool:
    kind = MODEL_KEYS["openai"]["properties"]["api_key_env"].get("type")
    return "null" in ([kind] if isinstance(kind, str) else list(kind or []))


def _workflow_has_rule(name: str) -> bool:
    rules = [ROOT / "Snakefile", *(ROOT / "workflow/rules").rglob("*.smk")]
    return any(f"rule {name}:" in path.read_text(encoding="utf-8") for path in rules)


needs_keyless_endpoints = pytest.mark.skipif(
    not _schema_allows_keyless_endpoints(),
    reason="waits for issue 31's endpoint checks: models.<m>.openai.api_key_env: null",
)
needs_vllm_block = pytest.mark.skipif(
    "vllm" not in MODEL_KEYS, reason="waits for issue 31's vLLM work: the models.<m>.vllm block"
)


def working_folder(folder: Path) -> Path:
    """A folder where the README's relative paths resolve as in the checkout, with every file
    snippet written into it; my_profiles.jsonl as the snippet's comment makes it (the shipped
    profiles' hiring lines)."""
    for name in ("resources", "config"):
        (folder / name).symlink_to(ROOT / name)
    for (kind, name), body in SNIPPETS.items():
        if kind == "file":
            (folder / name).write_text(body, encoding="utf-8")
    shipped = (ROOT / "resources/decision/profiles.jsonl").read_text(encoding="utf-8")
    hiring = [line for line in shipped.splitlines() if '"hiring"' in line]
    (folder / "my_profiles.jsonl").write_text("\n".join(hiring) + "\n", encoding="utf-8")
    return folder


def edit_config(folder: Path, name: str, edit: Any) -> None:
    """Change the written config snippet ``name`` as its comments tell the reader to."""
    path = folder / name
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def dry_run_as_the_readme_shows(folder: Path, name: str, run_snakemake: SnakemakeRunner) -> None:
    shown = parse_dry_run(SNIPPETS[("dry-run", name)])
    args = [str(folder / a) if (folder / a).is_file() else a for a in shown.command]
    result = run_snakemake(folder, *args)
    output = result.stdout + result.stderr
    jobs, total = job_table(output)
    printed = {line.strip() for line in output.splitlines()}
    lines = [line for line in output.splitlines() if line.startswith(("probing", "decision"))]
    paste = render_dry_run(shown.command, list(dict.fromkeys(lines)), jobs, total)
    assert [line for line in shown.lines if line.strip() not in printed] == [], paste
    assert {rule: jobs.get(rule) for rule in shown.jobs} == shown.jobs, paste
    assert total == shown.total, paste
    if not shown.elided:
        assert jobs == shown.jobs, paste
    assert not (folder / "results").exists()


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The test llama.cpp server, started once for the module."""
    if not llama_server_available():
        pytest.skip("needs llama-cpp-python[server] (bash scripts/install.sh --test)")
    with llama_server(tmp_path_factory.mktemp("llama") / "server.log") as url:
        yield url


def served_model(url: str) -> str:
    """The model id the server lists, as `curl <base_url>/models` shows the reader."""
    with urllib.request.urlopen(f"{url}/models", timeout=10) as answer:
        return str(json.load(answer)["data"][0]["id"])


def point_at_the_server(url: str) -> Any:
    def edit(config: dict[str, Any]) -> None:
        settings = config["models"]["my-endpoint"]["openai"]
        settings |= {"base_url": url, "model": served_model(url)}

    return edit


@needs_keyless_endpoints
def test_the_endpoint_snippet_dry_run(
    tmp_path: Path, server_url: str, run_snakemake: SnakemakeRunner
) -> None:
    folder = working_folder(tmp_path)
    edit_config(folder, "my-endpoint.yaml", point_at_the_server(server_url))
    dry_run_as_the_readme_shows(folder, "my-endpoint.yaml", run_snakemake)


@needs_keyless_endpoints
@pytest.mark.skipif(
    not _workflow_has_rule("check_model"),
    reason="waits for issue 31's pre-flight rule check_model",
)
def test_the_endpoint_snippet_passes_the_pre_flight_probe(
    tmp_path: Path, server_url: str, run_snakemake: SnakemakeRunner
) -> None:
    """The pre-flight job alone, for real: the server must answer the README's settings (the
    model served, log-probabilities for the option scores) without a key."""
    folder = working_folder(tmp_path)
    edit_config(folder, "my-endpoint.yaml", point_at_the_server(server_url))
    run_snakemake(
        folder, "--configfile", str(folder / "my-endpoint.yaml"), "--until", "check_model"
    )
    assert not (folder / "results/responses").exists()


@needs_vllm_block
def test_the_vllm_snippet_dry_run_on_a_local_model_folder(
    tmp_path: Path, smollm2_dir: Path, run_snakemake: SnakemakeRunner
) -> None:
    folder = working_folder(tmp_path)

    def local_folder(config: dict[str, Any]) -> None:
        (model,) = config["models"].values()
        model["path"] = str(smollm2_dir)

    edit_config(folder, "my-vllm.yaml", local_folder)
    dry_run_as_the_readme_shows(folder, "my-vllm.yaml", run_snakemake)


def test_the_own_prompts_and_profiles_snippet_dry_run(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    folder = working_folder(tmp_path)
    dry_run_as_the_readme_shows(folder, "my-study.yaml", run_snakemake)
