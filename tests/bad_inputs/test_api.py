"""API faults: the OpenAI backend against a local endpoint that answers every request the same.

Cases by category (13):

- answers that are not retried (a 4xx other than 429, a 200 that is not a chat completion):
  10; each is one request, never retried, and raises InputError naming the endpoint and the
  request (and the config key where one is at fault);
- no API key: 1;
- retryable faults that outlast the time budget (500, 429 with a long Retry-After): 2.
"""

from __future__ import annotations

import pytest

from cueaudit.errors import InputError
from cueaudit.inference.core import Decoding, Request
from cueaudit.inference.openai_backend import OpenAIBackend, RetryableError
from tests.helpers.fault_proxy import CannedServer
from tests.helpers.inference import llama_settings

KEY_ENV = "CUEAUDIT_TEST_KEY"
REQUEST = Request("u1", "Should I see a doctor? Answer Yes or No.", 0)
NOT_RETRIED = [
    pytest.param(
        400,
        b'{"error": {"message": "Unsupported parameter: max_tokens", "param": "max_tokens"}}',
        "{where}: field 'max_tokens': request u1: HTTP 400: Unsupported parameter: max_tokens",
        id="api-400-names-the-parameter",
    ),
    pytest.param(
        400,
        b'{"error": {"message": "Invalid schema for response_format"}}',
        "{where}: request u1: HTTP 400: Invalid schema for response_format",
        id="api-400-with-a-message",
    ),
    pytest.param(
        400,
        b"Bad Request",
        "{where}: request u1: HTTP 400: Error code: 400",
        id="api-400-with-a-plain-text-body",
    ),
    pytest.param(
        401,
        b'{"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}',
        "{where}: field 'api_key_env': request u1: HTTP 401: Incorrect API key provided",
        id="api-401-names-the-key-setting",
    ),
    pytest.param(
        403,
        b'{"error": {"message": "Project does not have access to model smollm2"}}',
        "{where}: field 'api_key_env': request u1: HTTP 403: Project does not have access to "
        "model smollm2",
        id="api-403-names-the-key-setting",
    ),
    pytest.param(
        404,
        b'{"error": {"message": "The model smollm2 does not exist", "param": "model"}}',
        "{where}: field 'model': request u1: HTTP 404: The model smollm2 does not exist",
        id="api-404-model-unknown",
    ),
    pytest.param(
        200,
        b'{"choices": [ not json',
        "{where}: request u1: response body is not JSON (Expecting value: line 1 column 15 "
        "(char 14))",
        id="api-200-malformed-json",
    ),
    pytest.param(
        200,
        b"<html><body>Gateway login</body></html>",
        "{where}: request u1: response body is not JSON (Expecting value: line 1 column 1 "
        "(char 0))",
        id="api-200-html-page",
    ),
    pytest.param(
        200,
        b'{"id": "c1", "object": "chat.completion", "usage": {"prompt_tokens": 3}}',
        "{where}: request u1: field 'choices': not a chat completion (no choices; keys "
        "['id', 'object', 'usage'])",
        id="api-200-choices-missing",
    ),
    pytest.param(
        200,
        b'{"id": "c1", "object": "chat.completion", "choices": []}',
        "{where}: request u1: field 'choices': not a chat completion (no choices; keys "
        "['choices', 'id', 'object'])",
        id="api-200-choices-empty",
    ),
]


@pytest.mark.parametrize(("status", "body", "message"), NOT_RETRIED)
def test_api_fault_is_a_clear_error_and_is_not_retried(
    status: int, body: bytes, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with CannedServer(status, body) as server:
        backend = OpenAIBackend(llama_settings(server.url))
        with pytest.raises(InputError) as info:
            list(backend.generate([REQUEST], Decoding(max_new_tokens=2)))
    assert str(info.value) == message.format(where=f"{server.url} (model smollm2)")
    assert server.hits == 1 and backend.stats == {"requests": 1, "retries": 0, "succeeded": 0}


def test_api_key_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with CannedServer(200, b"{}") as server:
        backend = OpenAIBackend(llama_settings(server.url))
        with pytest.raises(InputError) as info:
            list(backend.generate([REQUEST], Decoding(max_new_tokens=2)))
    assert str(info.value) == (
        "environment: field 'api_key_env': set the API key in the environment variable "
        "CUEAUDIT_TEST_KEY"
    )
    assert server.hits == 0


@pytest.mark.parametrize(
    ("status", "headers", "reason"),
    [
        pytest.param(500, {}, "HTTP 500", id="api-500-until-the-time-budget"),
        pytest.param(429, {"Retry-After": "30"}, "HTTP 429", id="api-429-retry-after-past-budget"),
    ],
)
def test_retryable_fault_gives_up_at_the_time_budget(
    status: int, headers: dict[str, str], reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    body = b'{"error": {"message": "try later"}}'
    with CannedServer(status, body, headers) as server:
        # No try count: the budget alone ends the retries.
        backend = OpenAIBackend(llama_settings(server.url, give_up_after_s=0.5))
        with pytest.raises(RetryableError) as info:
            list(backend.generate([REQUEST], Decoding(max_new_tokens=2)))
    message = str(info.value)
    where = f"{server.url} (model smollm2)"
    assert message.startswith(f"{where}: request u1: gave up after {server.hits} tries")
    assert f"last: {reason}" in message and "give_up_after_s 0.5" in message
    assert backend.stats["requests"] == server.hits
    if status == 429:  # waiting 30 s would pass the budget: it gives up at once
        assert server.hits == 1
    else:
        assert server.hits > 1
