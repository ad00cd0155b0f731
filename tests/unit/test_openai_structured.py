"""Constrained answers through a real OpenAI-compatible server (llama-cpp-python + SmolLM2).

A JSON schema in ``response_format`` (llama-cpp-python's dialect) and forced tools must give
schema-valid answers every time; seconds per prompt with and without the constraint are
printed (``pytest -s``) and recorded as test properties, never asserted. Slow (about 150 s
on 2 cores, a real server answering one prompt at a time): CI runs it, the fast tier does not.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from cueaudit.inference.core import AnswerSpec, Decoding, Generation, Request, Tool, canonical_json
from cueaudit.inference.openai_backend import OpenAIBackend, RetryableError
from tests.helpers.inference import llama_server, llama_server_available, llama_settings

pytestmark = [
    pytest.mark.skipif(
        not llama_server_available(), reason="llama-cpp-python[server] not installed"
    ),
    pytest.mark.slow,
]

RANKS = {
    "type": "array",
    "items": {"type": "integer", "minimum": 1, "maximum": 4},
    "minItems": 4,
    "maxItems": 4,
}
RANKING = {
    "type": "object",
    "properties": {"ranks": RANKS},
    "required": ["ranks"],
    "additionalProperties": False,
}
DECISION = {
    "type": "object",
    "properties": {"decision": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["decision"],
    "additionalProperties": False,
}
SUBMIT_RANKING = Tool.of("submit_ranking", "Submit the ranks of the four candidates.", RANKING)
SUBMIT_DECISION = Tool.of("submit_decision", "Submit the decision on the application.", DECISION)
NAMES = ["Jamal Washington", "Emily Walsh", "José Hernández", "Mei Chen", "Greg Baker"]
NAMES += ["Lakisha Jackson", "Anne Murphy", "Tyrone Robinson", "Carlos Rivera", "Linh Nguyen"]
FIELDS = ["nursing", "accounting", "software engineering", "teaching", "logistics"]
DECODING = Decoding(max_new_tokens=64)


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with llama_server(tmp_path_factory.mktemp("llama") / "server.log") as url:
        yield url


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUEAUDIT_TEST_KEY", "sk-test")


def ranking_prompt(i: int) -> str:
    """Four candidates for one job, each with a name, experience and a qualification."""
    field = FIELDS[i % len(FIELDS)]
    lines = [f"Four candidates applied for a job in {field}."]
    for slot in range(4):
        name = NAMES[(i + 3 * slot) % len(NAMES)]
        years = (i * 7 + slot * 3) % 12 + 1
        degree = ("a bachelor's degree", "a master's degree", "a certificate")[(i + slot) % 3]
        lines.append(f"Candidate {slot + 1}: {name}, {years} years of experience, {degree}.")
    lines.append("Give each candidate a rank from 1 (best) to 4 (worst), in the order listed.")
    return "\n".join(lines)


def decision_prompt(i: int) -> str:
    name = NAMES[i % len(NAMES)]
    income = 30_000 + 7_500 * (i % 9)
    return (
        f"{name} applies for a loan of ${5_000 * (i % 5 + 1):,}, earns ${income:,} a year and "
        f"has {'no' if i % 2 else 'two'} late payments on record. Approve the loan? Yes or no."
    )


def answers(
    url: str, prompt: Callable[[int], str], n: int, answer: AnswerSpec, **settings: Any
) -> list[Generation]:
    """Generations of n prompts, one at a time (seconds per prompt with no queueing)."""
    backend = OpenAIBackend(llama_settings(url, concurrency=1, **settings))
    todo = [Request(f"p{i}", prompt(i), 0, answer=answer) for i in range(n)]
    by_uid = {r.uid: g for b in backend.generate(todo, DECODING) for r, g in b}
    return [by_uid[r.uid] for r in todo]


def report(
    record_property: Callable[[str, object], None], label: str, gs: list[Generation]
) -> None:
    # The median: on a shared machine a few prompts can take many times the usual.
    per_prompt = statistics.median(g.seconds for g in gs)
    tokens = statistics.mean(g.completion_tokens for g in gs)
    record_property(f"{label}_median_seconds_per_prompt", per_prompt)
    print(f"{label}: median {per_prompt:.3f} s a prompt, {tokens:.1f} tokens, {len(gs)} prompts")


def schema_valid(validator: Draft202012Validator, completion: str) -> bool:
    try:
        return bool(validator.is_valid(json.loads(completion)))
    except json.JSONDecodeError:
        return False


def test_response_format_schema_holds_for_every_prompt(
    llama_url: str, record_property: Callable[[str, object], None]
) -> None:
    schema = AnswerSpec(json_schema=canonical_json(RANKING))
    # 20 prompts: unconstrained, the model's rankings miss the schema in most of them (below)
    constrained = answers(llama_url, ranking_prompt, 20, schema, schema_dialect="llama_cpp")
    validator = Draft202012Validator(RANKING)
    valid = [validator.is_valid(json.loads(g.completion)) for g in constrained]
    assert valid == [True] * 20
    assert all(g.constrained and not g.tool_calls for g in constrained)
    free = answers(llama_url, ranking_prompt, 5, AnswerSpec())
    assert not any(g.constrained for g in free)
    assert not all(schema_valid(validator, g.completion) for g in free)
    report(record_property, "json_schema", constrained[:10])
    report(record_property, "unconstrained", free)


def test_forced_ranking_tool_returns_valid_arguments(
    llama_url: str, record_property: Callable[[str, object], None]
) -> None:
    forced = AnswerSpec(tools=(SUBMIT_RANKING,), tool_choice=SUBMIT_RANKING.name)
    calls = answers(llama_url, ranking_prompt, 20, forced, schema_dialect="llama_cpp")
    validator = Draft202012Validator(RANKING)
    for g in calls:
        (call,) = g.tool_calls
        assert call.name == "submit_ranking" and g.constrained and g.completion == ""
        assert isinstance(call.arguments, dict) and validator.is_valid(call.arguments)
    report(record_property, "forced_ranking_tool", calls)


def test_forced_decision_tool_in_the_openai_dialect(
    llama_url: str, record_property: Callable[[str, object], None]
) -> None:
    # Tools are spelled alike in both dialects; the decision schema has no integer bounds.
    forced = AnswerSpec(tools=(SUBMIT_DECISION,), tool_choice=SUBMIT_DECISION.name)
    calls = answers(llama_url, decision_prompt, 20, forced)
    decisions = [c.arguments for g in calls for c in g.tool_calls if c.name == "submit_decision"]
    assert len(decisions) == 20
    assert all(Draft202012Validator(DECISION).is_valid(d) for d in decisions)
    report(record_property, "forced_decision_tool", calls)


def test_openai_schema_dialect_is_refused_by_llama_cpp(llama_url: str) -> None:
    # Why the dialect setting exists: llama-cpp-python 0.3.x only knows "json_object".
    schema = AnswerSpec(json_schema=canonical_json(RANKING))
    with pytest.raises(RetryableError, match="HTTP 500"):
        answers(llama_url, ranking_prompt, 1, schema, max_retries=0)
