"""Pre-flight checks of the configured models: each own-run failure refused before the first
prompt, with one line naming the model and what is missing.

Static checks, with no network (:func:`check_models`; run where the workflow validates its
config, so ``snakemake -n`` shows them too):

- the API key's environment variable is set, unless ``openai.api_key_env`` is null (a server
  that needs no key: the client sends :data:`NO_KEY`);
- a local model folder (``path`` written as a path, not a hub id) exists;
- a task whose analyses read option scores is not run by an API model that returns none
  (without ``openai.logprobs: true`` its outcome would be null on every answer).

The probe (:func:`probe_endpoint`; the ``check_model`` rule, before any inference job of an API
model): a few short requests show that the endpoint serves the model, returns
log-probabilities where the model's tasks score options, and honours the JSON schemas and tool
calls of its tasks' formats. A backend block missing altogether is a config error
(cueaudit.config).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final

from cueaudit.errors import InputError
from cueaudit.inference import openai_protocol as protocol
from cueaudit.inference.backends import BACKENDS
from cueaudit.inference.core import AnswerSpec, Decoding, Request
from cueaudit.inference.openai_backend import refusal, retry_after
from cueaudit.inference.openai_protocol import OpenAISettings

log = logging.getLogger(__name__)

#: What the probe asks: short, and answerable in any of the formats.
PROBE_TEXT: Final = "Is water wet? Answer Yes or No."
#: Tokens of the plain probe (a few, so that a model that thinks first still emits one).
PLAIN_TOKENS: Final = 4
#: Most tokens of a format's probe: enough for a short JSON answer or tool call.
FORMAT_TOKENS: Final = 64
#: Tries of a probe request answered HTTP 429 (rate limited), and the longest wait between.
RATE_LIMIT_TRIES: Final = 3
RATE_LIMIT_WAIT_S: Final = 10.0
#: The keys of an ``openai:`` block, which a refusal may name (HTTP 400's ``param`` is a field
#: of the request body instead).
OPENAI_KEYS: Final = frozenset(f.name for f in fields(OpenAISettings))


def _openai_block(spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    block = spec.get("openai")
    return block if isinstance(block, Mapping) else None


def _is_api(spec: Mapping[str, Any]) -> bool:
    return not BACKENDS[spec["backend"]].local_weights


# -- static checks ----------------------------------------------------------------------------


def looks_local(path: str, base: Path = Path()) -> bool:
    """Whether a model's ``path`` is written as a folder on this machine, not a hub id.

    cueaudit.models loads a ``path`` that is a folder, and otherwise resolves it as a Hugging
    Face id (``name`` or ``org/name``). Absolute paths, paths starting with ``.`` or ``~``,
    paths of more than two parts (no hub id has them) and ``dir/name`` whose ``dir`` is a
    folder here are meant as folders.
    """
    parts = Path(path).parts
    return (
        Path(path).is_absolute()
        or path.startswith((".", "~"))
        or len(parts) > 2
        or (len(parts) == 2 and (base / parts[0]).is_dir())
    )


def _path_problems(name: str, spec: Mapping[str, Any], base: Path) -> Iterator[str]:
    path = spec.get("path")
    if path is None or "gguf_package" in spec:
        return
    key = f"config key models.{name}.path"
    # With gguf_file, path is the folder holding it (cueaudit.models.gguf_source).
    if not ("gguf_file" in spec or looks_local(path, base)):
        return
    if path.startswith("~"):
        yield f"{key}: '~' is not expanded in {path!r}; give the folder's full path"
    elif not (base / path).exists():
        yield f"{key}: local model folder not found: {path}"
    elif not (base / path).is_dir():
        yield f"{key}: not a folder: {path}"


def _key_problems(name: str, block: Mapping[str, Any], environ: Mapping[str, str]) -> Iterator[str]:
    env = block.get("api_key_env", OpenAISettings.api_key_env)
    batch = block.get("batch") or {}
    if env is None or (batch.get("enabled") and batch.get("dry_run")):
        return  # a server that needs no key; a dry run of the Batch API sends nothing
    if not environ.get(env):
        yield (
            f"config key models.{name}.openai.api_key_env: the environment variable {env} is "
            "not set (export the key there, or set api_key_env: null for a server that needs "
            "no key)"
        )


def model_tasks(tasks: Mapping[str, Mapping[str, Any]], name: str) -> list[str]:
    """The tasks model ``name`` runs (all, unless a task names its models)."""
    return [t for t, spec in tasks.items() if not spec.get("models") or name in spec["models"]]


def _score_problems(
    name: str,
    block: Mapping[str, Any],
    tasks: Mapping[str, Mapping[str, Any]],
) -> Iterator[str]:
    if block.get("logprobs"):
        return
    needing = [t for t in model_tasks(tasks, name) if tasks[t].get("needs_scores")]
    if not needing:
        return
    why = tasks[needing[0]]["needs_scores"]
    which = f"tasks {', '.join(needing)} need" if len(needing) > 1 else f"task {needing[0]} needs"
    yield (
        f"config key models.{name}.openai.logprobs: {which} option "
        f"scores ({why['because']}), which an API model returns only with log-probabilities: "
        f"set openai.logprobs: true, or use {why['instead']}"
    )


def model_problems(
    config: Mapping[str, Any],
    tasks: Mapping[str, Mapping[str, Any]],
    environ: Mapping[str, str] | None = None,
    base_dir: str | Path = ".",
) -> Iterator[str]:
    """What would stop each configured model's first inference job, found without network.

    ``tasks`` is the workflow's inference-task table (cueaudit.study.InferenceTasks; a task's
    ``needs_scores`` says which setting makes its analyses read option scores, and the
    alternative). Each problem is one line starting with ``config key models.<model>``.
    """
    environ = os.environ if environ is None else environ
    for name, spec in config["models"].items():
        if not _is_api(spec):
            yield from _path_problems(name, spec, Path(base_dir))
            continue
        block = _openai_block(spec)
        if block is None:
            continue  # cueaudit.config refuses an API model without its block
        yield from _key_problems(name, block, environ)
        yield from _score_problems(name, block, tasks)


def check_models(
    config: Mapping[str, Any],
    tasks: Mapping[str, Mapping[str, Any]],
    environ: Mapping[str, str] | None = None,
    base_dir: str | Path = ".",
) -> None:
    """Raise InputError with every problem of :func:`model_problems` (one line when one)."""
    problems = list(model_problems(config, tasks, environ, base_dir))
    if len(problems) == 1:
        raise InputError("config", problems[0])
    if problems:
        raise InputError("config", "models not ready to run:\n  " + "\n  ".join(problems))


# -- the probe --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Format:
    """One answer format of a model's tasks, probed once: its first task's name and spec."""

    task: str
    answer: AnswerSpec
    max_new_tokens: int


def formats_to_probe(answers: Mapping[str, tuple[AnswerSpec, int]]) -> list[Format]:
    """One :class:`Format` per distinct JSON schema or tool set among ``answers`` (task ->
    (its answer spec, its max_new_tokens)); plain-text formats need no probe of their own."""
    seen: set[str] = set()
    formats = []
    for task, (answer, max_new_tokens) in answers.items():
        if answer.json_schema is None and not answer.tools:
            continue
        key = json.dumps(answer.cache_fields(), sort_keys=True)
        if key not in seen:
            seen.add(key)
            formats.append(Format(task, answer, min(max_new_tokens, FORMAT_TOKENS)))
    return formats


class _Probe:
    """Sends the probe's requests to one endpoint; every failure is one line naming ``name``."""

    def __init__(self, name: str, settings: OpenAISettings, client: Any) -> None:
        self.name, self.settings, self.client = name, settings, client
        self.where = f"config key models.{name}"
        self.at = f"{settings.endpoint} (model '{settings.model}')"

    def fail(self, message: str, key: str = "") -> InputError:
        return InputError(f"{self.where}{key}", f"{self.at}: {message}")

    def send(self, answer: AnswerSpec, max_new_tokens: int, what: str) -> dict[str, Any]:
        import openai

        request = Request("preflight", PROBE_TEXT, 0, answer=answer)
        decoding = Decoding(temperature=None, max_new_tokens=max_new_tokens)
        body = protocol.request_body(request, decoding, self.settings)
        model, messages = body.pop("model"), body.pop("messages")
        for attempt in range(RATE_LIMIT_TRIES):
            try:
                response = self.client.chat.completions.create(
                    model=model, messages=messages, extra_body=body
                )
            except openai.APIStatusError as error:
                wait = retry_after(error.response.headers)
                if error.status_code == 429 and attempt + 1 < RATE_LIMIT_TRIES:
                    time.sleep(min(RATE_LIMIT_WAIT_S, 1.0 if wait is None else wait))
                    continue
                detail, field = refusal(error)
                key = f".openai.{field}" if field in OPENAI_KEYS else ""
                message = f"{what} was refused: HTTP {error.status_code}: {detail}"
                raise self.fail(message, key) from None
            except openai.APIConnectionError as error:
                cause = error.__cause__ or error
                raise self.fail(
                    f"cannot reach the endpoint ({type(cause).__name__}: {cause}); is the "
                    "server running, and is openai.base_url right?",
                    ".openai.base_url",
                ) from None
            except json.JSONDecodeError as error:
                raise self.fail(f"the answer to {what} is not JSON ({error})") from None
            body_out: dict[str, Any] = response.model_dump()
            protocol.generation_from_body(body_out, answer, source=f"{self.where}: {self.at}")
            return body_out
        raise AssertionError("unreachable")


def _choice(body: Mapping[str, Any]) -> Mapping[str, Any]:
    choice: Mapping[str, Any] = body["choices"][0]
    return choice


def _honoured_json(choice: Mapping[str, Any]) -> bool:
    content = str((choice.get("message") or {}).get("content") or "").strip()
    try:
        return isinstance(json.loads(content), dict)
    except json.JSONDecodeError:
        # cut at the probe's token limit: the grammar still held if it opened an object
        return choice.get("finish_reason") == "length" and content.startswith("{")


def probe_endpoint(
    name: str,
    settings: OpenAISettings,
    answers: Mapping[str, tuple[AnswerSpec, int]],
    client: Any = None,
) -> dict[str, Any]:
    """Probe the endpoint of API model ``name`` for what its tasks need; the record of what
    was probed, or InputError (one line naming the model and what is missing).

    ``answers``: task -> (answer spec, max_new_tokens) of every task the model runs. One plain
    request (with log-probabilities when ``openai.logprobs`` is on and a task scores options)
    shows the model is served; then one request per distinct JSON schema or tool format.
    """
    record: dict[str, Any] = {
        "model": name,
        "endpoint": settings.endpoint,
        "model_name": settings.model,
    }
    if settings.batch.enabled and settings.batch.dry_run:
        return record | {"skipped": "openai.batch.dry_run: nothing is sent"}
    probe = _Probe(name, settings, client or protocol.make_client(settings, asynchronous=False))
    options = next((a.options for a, _ in answers.values() if a.options), ())
    want_logprobs = settings.logprobs and bool(options)
    plain = _choice(probe.send(AnswerSpec(options=options), PLAIN_TOKENS, "a one-line request"))
    record["served"] = True
    if want_logprobs:
        content = (plain.get("logprobs") or {}).get("content") or []
        if not content or not content[0].get("top_logprobs"):
            raise probe.fail(
                "returned no log-probabilities (top_logprobs), which the option scores of its "
                "tasks need; use a server that returns them, or set openai.logprobs: false "
                "(and analyse the parsed answers)",
                ".openai.logprobs",
            )
    record["logprobs"] = want_logprobs
    probed: dict[str, str] = {}
    for fmt in formats_to_probe(answers):
        what = f"task {fmt.task}'s format"
        choice = _choice(probe.send(fmt.answer, fmt.max_new_tokens, what))
        if fmt.answer.forced_tool is not None:
            calls = protocol.tool_calls(choice.get("message") or {})
            if not any(c.name == fmt.answer.forced_tool.name for c in calls):
                raise probe.fail(
                    f"answered {what} without the forced call of tool "
                    f"'{fmt.answer.forced_tool.name}' (tool_choice); the design's tool formats "
                    "need a server that honours tools and tool_choice"
                )
            probed[fmt.task] = "tool call"
        elif fmt.answer.json_schema is not None:
            if not _honoured_json(choice):
                raise probe.fail(
                    f"answered {what} with text that is not the JSON its schema asks for "
                    f"(openai.schema_dialect: {settings.schema_dialect}); the design's JSON "
                    "formats need a server that honours JSON schemas",
                    ".openai.schema_dialect",
                )
            probed[fmt.task] = "JSON schema"
        else:
            probed[fmt.task] = "tools accepted"
    record["formats"] = probed
    log.info("model %s is ready at %s: %s", name, settings.endpoint, record)
    return record


def write_record(record: Mapping[str, Any], path: str | Path) -> None:
    from cueaudit.io import write_text

    write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", path)
