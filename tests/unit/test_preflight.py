"""Pre-flight: each own-run failure of a model refused before the first prompt, in one line
naming the model and what is missing (cueaudit.inference.preflight, cueaudit.config), and a
dead endpoint that stops its job at once (cueaudit.inference.openai_backend)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cueaudit.config import validate_config
from cueaudit.errors import InputError
from cueaudit.inference.backends import inference_jobs
from cueaudit.inference.core import AnswerSpec, Decoding, Option, Request, Tool, canonical_json
from cueaudit.inference.openai_backend import OpenAIBackend
from cueaudit.inference.openai_protocol import NO_KEY, OpenAISettings, api_key
from cueaudit.inference.preflight import check_models, looks_local, probe_endpoint
from cueaudit.studies import STUDIES
from tests.helpers.fault_proxy import CannedServer, chat_completion

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
YES = Option("Yes", ("Yes", "yes"))
NO = Option("No", ("No", "no"))
SCHEMA_ANSWER = {
    "type": "object",
    "properties": {"decision": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["decision"],
}
TOOL = Tool.of("submit_decision", "Submit the decision.", SCHEMA_ANSWER)


def default_config() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "config/config.yaml").read_text())


def with_model(spec: dict[str, Any]) -> dict[str, Any]:
    config = default_config()
    config["models"]["api"] = spec
    validate_config(config, SCHEMA, STUDIES)
    return config


def tasks_of(config: dict[str, Any]) -> dict[str, Any]:
    tasks: dict[str, Any] = {}
    for study in STUDIES.values():
        if study.enabled(config):
            tasks |= study.inference_tasks(config)
    return tasks


def refusal(config: dict[str, Any], environ: dict[str, str], base: Path = ROOT) -> str:
    with pytest.raises(InputError) as error:
        check_models(config, tasks_of(config), environ, base)
    return str(error.value)


# -- static: a backend block, the key, local folders, option scores --------------------------


def invalid(config: dict[str, Any]) -> str:
    """The message validate_config refuses ``config`` with."""
    with pytest.raises(InputError) as error:
        validate_config(config, SCHEMA, STUDIES)
    return str(error.value)


def test_an_api_model_without_its_block_is_refused() -> None:
    config = default_config()
    config["models"]["gpt"] = {"backend": "openai"}
    assert (
        "config key models.gpt.openai: required with backend openai (at least model: the "
        "model's name at the endpoint; base_url: the endpoint, null for api.openai.com)"
    ) in invalid(config)


def test_inference_jobs_per_seed_is_for_local_engines_only() -> None:
    config = default_config()
    config["models"]["gpt"] = {
        "backend": "openai",
        "openai": {"model": "m"},
        "inference_jobs": "per_seed",
    }
    assert (
        "config key models.gpt.inference_jobs: per_seed starts a local engine once per seed; "
        "backend openai has none (drop the key)"
    ) in invalid(config)
    config["models"]["gpt"]["inference_jobs"] = "per_task"
    validate_config(config, SCHEMA, STUDIES)
    assert inference_jobs(config["models"]["gpt"]) == "per_task"
    assert inference_jobs({"backend": "vllm"}) == "per_seed"
    assert inference_jobs({"backend": "vllm", "inference_jobs": "per_task"}) == "per_task"
    assert inference_jobs({"backend": "hf"}) == "per_task"


def test_an_unset_key_variable_is_refused_and_null_means_no_key() -> None:
    block = {"model": "m", "base_url": "http://127.0.0.1:9/v1", "logprobs": True}
    config = with_model({"backend": "openai", "openai": {**block, "api_key_env": "MY_KEY"}})
    assert refusal(config, {}) == (
        "config: config key models.api.openai.api_key_env: the environment variable MY_KEY is "
        "not set (export the key there, or set api_key_env: null for a server that needs no key)"
    )
    check_models(config, tasks_of(config), {"MY_KEY": "sk-1"}, ROOT)
    keyless = with_model({"backend": "openai", "openai": {**block, "api_key_env": None}})
    check_models(keyless, tasks_of(keyless), {}, ROOT)
    assert api_key(None) == NO_KEY
    assert OpenAISettings.from_spec(keyless["models"]["api"]).api_key_env is None


def test_a_batch_dry_run_needs_no_key() -> None:
    block = {"model": "m", "logprobs": True, "batch": {"enabled": True, "dry_run": True}}
    config = with_model({"backend": "openai", "openai": block})
    check_models(config, tasks_of(config), {}, ROOT)


def test_a_missing_local_model_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "models" / "here").mkdir(parents=True)
    (tmp_path / "weights.bin").write_text("x")
    for path, problem in [
        ("./models/gone", "local model folder not found: ./models/gone"),
        (str(tmp_path / "nowhere"), f"local model folder not found: {tmp_path / 'nowhere'}"),
        ("models/gone", "local model folder not found: models/gone"),  # ./models is a folder
        ("a/b/c", "local model folder not found: a/b/c"),  # no hub id has three parts
        ("./weights.bin", "not a folder: ./weights.bin"),
        ("~/models/x", "'~' is not expanded in '~/models/x'; give the folder's full path"),
    ]:
        config = with_model({"backend": "hf", "path": path})
        assert refusal(config, {}, tmp_path) == f"config: config key models.api.path: {problem}"
    for path in ("./models/here", "models/here", "HuggingFaceTB/SmolLM2-135M-Instruct", "gpt2"):
        config = with_model({"backend": "vllm", "path": path})
        check_models(config, tasks_of(config), {}, tmp_path)
    config = with_model({"backend": "hf", "path": "gone", "gguf_file": "m.gguf"})
    assert "models.api.path: local model folder not found: gone" in refusal(config, {}, tmp_path)


def test_looks_local_tells_folders_from_hub_ids(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    assert looks_local("/abs/m", tmp_path) and looks_local("./m", tmp_path)
    assert looks_local("models/m", tmp_path) and looks_local("a/b/c", tmp_path)
    assert not looks_local("org/name", tmp_path) and not looks_local("gpt2", tmp_path)


def test_probability_outcome_without_logprobs_is_refused() -> None:
    """The default config analyses P(Yes): an API model without logprobs would give none."""
    block = {"model": "m", "api_key_env": None}
    config = with_model({"backend": "openai", "openai": block})
    assert config["probing"]["analysis"]["binary_outcome"] == "probability"
    assert refusal(config, {}) == (
        "config: config key models.api.openai.logprobs: tasks healthcare, legal need option "
        "scores (probing.analysis.binary_outcome: probability), which an API model returns "
        "only with log-probabilities: set openai.logprobs: true, or use "
        "probing.analysis.binary_outcome: answer"
    )
    config["models"]["api"]["openai"]["logprobs"] = True
    check_models(config, tasks_of(config), {}, ROOT)
    config["models"]["api"]["openai"]["logprobs"] = False
    config["probing"]["analysis"]["binary_outcome"] = "answer"
    check_models(config, tasks_of(config), {}, ROOT)


def test_problems_of_several_models_are_listed_together() -> None:
    config = with_model({"backend": "openai", "openai": {"model": "m", "logprobs": True}})
    config["models"]["local"] = {"backend": "hf", "path": "/no/such/folder"}
    message = refusal(config, {})
    assert message.startswith("config: models not ready to run:\n")
    assert "models.api.openai.api_key_env: the environment variable OPENAI_API_KEY" in message
    assert "models.local.path: local model folder not found: /no/such/folder" in message


# -- the probe --------------------------------------------------------------------------------


def probe_settings(url: str, **kw: Any) -> OpenAISettings:
    return OpenAISettings(model="m", base_url=url, api_key_env=None, **kw)


SCORED = {"healthcare": (AnswerSpec(options=(YES, NO)), 4)}
JSON_TASK = {"decide_json": (AnswerSpec(json_schema=canonical_json(SCHEMA_ANSWER)), 32)}
TOOL_TASK = {"decide_tool": (AnswerSpec(tools=(TOOL,), tool_choice="submit_decision"), 32)}


def probe_error(status: int, body: bytes, answers: dict[str, Any], **kw: Any) -> str:
    with CannedServer(status, body) as server, pytest.raises(InputError) as error:
        probe_endpoint("api", probe_settings(server.url, **kw), answers)
    return str(error.value).replace(server.url, "URL")


def test_the_probe_records_what_it_found() -> None:
    call = [{"id": "t", "type": "function", "function": {"name": "submit_decision"}}]
    call[0]["function"]["arguments"] = '{"decision": "yes"}'
    with CannedServer(200, chat_completion('{"decision": "yes"}', True, call)) as server:
        record = probe_endpoint(
            "api", probe_settings(server.url, logprobs=True), SCORED | JSON_TASK | TOOL_TASK
        )
        assert server.hits == 3  # plain (with log-probabilities), JSON, tool
    assert record == {
        "model": "api",
        "endpoint": server.url,
        "model_name": "m",
        "served": True,
        "logprobs": True,
        "formats": {"decide_json": "JSON schema", "decide_tool": "tool call"},
    }


def test_an_endpoint_where_nothing_listens_is_one_line() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(InputError) as error:
        probe_endpoint("api", probe_settings(url, timeout_s=5), SCORED)
    message = str(error.value)
    assert message.startswith(
        f"config key models.api.openai.base_url: {url} (model 'm'): cannot reach the endpoint "
        "(ConnectError: "
    )
    assert message.endswith("is the server running, and is openai.base_url right?")
    assert "\n" not in message


def test_a_model_the_endpoint_does_not_serve_is_named() -> None:
    body = b'{"error": {"message": "The model m does not exist", "param": "model"}}'
    assert probe_error(404, body, SCORED) == (
        "config key models.api.openai.model: URL (model 'm'): a one-line request was refused: "
        "HTTP 404: The model m does not exist"
    )
    body = b'{"error": {"message": "Incorrect API key provided"}}'
    assert probe_error(401, body, SCORED).startswith("config key models.api.openai.api_key_env:")


def test_an_endpoint_without_log_probabilities_is_refused() -> None:
    assert probe_error(200, chat_completion(), SCORED, logprobs=True) == (
        "config key models.api.openai.logprobs: URL (model 'm'): returned no log-probabilities "
        "(top_logprobs), which the option scores of its tasks need; use a server that returns "
        "them, or set openai.logprobs: false (and analyse the parsed answers)"
    )


def test_an_endpoint_that_ignores_schemas_or_tools_is_refused() -> None:
    assert probe_error(200, chat_completion("Yes, it is."), JSON_TASK) == (
        "config key models.api.openai.schema_dialect: URL (model 'm'): answered task "
        "decide_json's format with text that is not the JSON its schema asks for "
        "(openai.schema_dialect: openai); the design's JSON formats need a server that "
        "honours JSON schemas"
    )
    assert probe_error(200, chat_completion("Yes"), TOOL_TASK) == (
        "config key models.api: URL (model 'm'): answered task decide_tool's format without "
        "the forced call of tool 'submit_decision' (tool_choice); the design's tool formats "
        "need a server that honours tools and tool_choice"
    )


def test_a_batch_dry_run_is_not_probed() -> None:
    settings = OpenAISettings.from_spec(
        {"openai": {"model": "m", "batch": {"enabled": True, "dry_run": True}}}
    )
    record = probe_endpoint("api", settings, SCORED)
    assert record["skipped"] == "openai.batch.dry_run: nothing is sent"


# -- a dead endpoint stops the job at once, and says so on the console ------------------------


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def test_a_dead_endpoint_stops_after_a_few_connection_failures() -> None:
    url = dead_url()
    settings = OpenAISettings(
        model="m",
        base_url=url,
        api_key_env=None,
        backoff_base_s=0.01,
        backoff_max_s=0.02,
        max_connection_failures=3,
        give_up_after_s=600,  # the old behaviour: retried until this ran out
    )
    backend = OpenAIBackend(settings)
    request = Request("u1", "Hello?", 0)
    with pytest.raises(InputError) as error:
        list(backend.generate([request], Decoding(max_new_tokens=2)))
    message = str(error.value)
    assert message.startswith(
        f"{url} (model m): field 'base_url': cannot connect: 3 connection failures in a row (last: "
    )
    assert message.endswith(
        "is the server running, and is openai.base_url right? (stopped at "
        "openai.max_connection_failures 3)"
    )
    assert backend.stats == {"requests": 3, "retries": 2, "succeeded": 0}


def test_retries_and_the_error_reach_the_console_and_the_log(tmp_path: Path) -> None:
    """A script's retries and its error are on its stderr (Snakemake's console), as well as
    in its log file (run in a process of its own: the set-up replaces sys.stderr)."""
    log = tmp_path / "job.log"
    code = f"""
from cueaudit.io import setup_logging
setup_logging({str(log)!r})
from cueaudit.inference.core import Decoding, Request
from cueaudit.inference.openai_backend import OpenAIBackend, OpenAISettings
settings = OpenAISettings(model="m", base_url={dead_url()!r}, api_key_env=None,
                          backoff_base_s=0.01, backoff_max_s=0.02, max_connection_failures=2)
list(OpenAIBackend(settings).generate([Request("u1", "Hi", 0)], Decoding(max_new_tokens=2)))
"""
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == 1
    console = result.stderr
    assert "WARNING cueaudit.inference.openai_backend: retry 1 of u1 in" in console
    assert "APIConnectionError" in console
    errors = [line for line in console.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and "cannot connect: 2 connection failures in a row" in errors[0]
    assert "Traceback" not in console  # the frames go to the log file only
    logged = log.read_text()
    assert "retry 1 of u1" in logged and "Traceback" in logged
