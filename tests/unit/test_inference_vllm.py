"""vLLM backend: request building without vLLM installed; a clear error without it."""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from cueaudit.errors import InputError
from cueaudit.inference.core import AnswerSpec, Decoding, Option, Request, Tool, canonical_json
from cueaudit.inference.seeding import prompt_seed
from cueaudit.inference.vllm_backend import (
    TOP_LOGPROBS,
    VLLMBackend,
    _import_vllm,
    build_requests,
    continuation_logprob,
    first_step_logprobs,
    first_step_request,
    form_request,
    option_scores,
    output_schema,
    sampling_arguments,
    sampling_params,
)

SCHEMA = {"type": "object", "properties": {"ranks": {"type": "array"}}, "required": ["ranks"]}
TOOL = Tool.of("submit_ranking", "Submit the ranks.", SCHEMA)
YES_NO = (Option("Yes", ("Yes", "yes")), Option("No", ("No",)))


@dataclass
class Logprob:
    """vLLM's Logprob, as far as the backend reads it."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


def test_requests_carry_per_prompt_seeds_and_task_budget() -> None:
    reqs = [Request("u1", "a", 0), Request("u2", "b", 0), Request("u1", "a", 1)]
    decoding = Decoding(top_k=50, max_new_tokens=8)
    built = build_requests(((r, [ord(r.text)]) for r in reqs), decoding)
    assert [b.prompt_token_ids for b in built] == [[97], [98], [97]]
    first = built[0].sampling
    assert first["max_tokens"] == 8 and first["temperature"] == 1.0 and first["top_k"] == 50
    assert first["seed"] == prompt_seed(0, "u1") % (2**63 - 1)
    assert len({b.sampling["seed"] for b in built}) == 3
    no_top_k = build_requests([(reqs[0], [1])], Decoding(top_k=0))[0].sampling
    assert no_top_k["top_k"] == -1
    # Plain text asks for neither logprobs nor structure.
    assert first["logprobs"] is None and built[0].structured is None


def test_greedy_decoding_is_vllms_temperature_zero_alone() -> None:
    """Temperature 0 is vLLM's greedy; the filters, which cannot change a greedy answer, are
    not passed, and the repetition penalty is."""
    greedy = Decoding(temperature=0.0, top_p=0.9, top_k=50, min_p=0.1, repetition_penalty=1.2)
    assert sampling_arguments(greedy) == {"temperature": 0.0, "repetition_penalty": 1.2}
    sampled = Decoding(temperature=1.0, top_p=0.9, top_k=50)
    assert sampling_arguments(sampled) == {"temperature": 1.0, "top_p": 0.9, "top_k": 50}


def test_options_schemas_and_forced_tools_shape_the_requests() -> None:
    options = Request("o", "q", 0, answer=AnswerSpec(options=YES_NO))
    schema = Request("s", "q", 0, answer=AnswerSpec(json_schema=canonical_json(SCHEMA)))
    tool = Request("t", "q", 0, answer=AnswerSpec(tools=(TOOL,), tool_choice="submit_ranking"))
    auto = Request(
        "a", "q", 0, answer=AnswerSpec(options=YES_NO, tools=(TOOL,), tool_choice="auto")
    )
    constrained_options = Request(
        "c", "q", 0, answer=AnswerSpec(options=YES_NO, json_schema=canonical_json(SCHEMA))
    )
    built = build_requests(
        [(r, [1, 2]) for r in (options, schema, tool, auto, constrained_options)], Decoding()
    )
    assert [b.sampling["logprobs"] for b in built] == [TOP_LOGPROBS, None, None, TOP_LOGPROBS, None]
    assert [b.structured for b in built] == [
        None,
        {"json": SCHEMA},
        {"json": SCHEMA},
        None,
        {"json": SCHEMA},
    ]
    assert output_schema(tool.answer) == SCHEMA and output_schema(auto.answer) is None


def test_form_scoring_requests_and_their_logprobs() -> None:
    scoring = form_request([5, 6, 7], [8, 9])
    assert scoring.prompt_token_ids == [5, 6, 7, 8, 9]
    assert scoring.sampling["prompt_logprobs"] == 1 and scoring.sampling["max_tokens"] == 1
    assert scoring.structured is None
    first = first_step_request([5, 6])
    assert first.sampling["logprobs"] == TOP_LOGPROBS and first.sampling["max_tokens"] == 1
    # vLLM's prompt logprobs: None for the first token, then the actual token (and the top-1).
    prompt_logprobs = [
        None,
        {6: Logprob(-0.5)},
        {7: Logprob(-0.25)},
        {8: Logprob(-1.5), 3: Logprob(-0.1)},
        {9: Logprob(-2.0)},
    ]
    assert continuation_logprob(prompt_logprobs, 3, [8, 9]) == -3.5
    with pytest.raises(RuntimeError, match="no prompt logprob"):
        continuation_logprob(prompt_logprobs, 3, [4, 9])
    assert first_step_logprobs({8: Logprob(-1.0), 3: Logprob(-2.0)}) == {8: -1.0, 3: -2.0}
    assert first_step_logprobs(None) == {}


def test_option_scores_sum_the_forms_probabilities() -> None:
    logprobs = {"Yes": math.log(0.25), "yes": math.log(0.125), "No": math.log(0.5)}
    scores = option_scores(AnswerSpec(options=YES_NO), logprobs.__getitem__)
    assert scores == {
        "Yes|yes": pytest.approx(math.log(0.375)),
        "No": pytest.approx(math.log(0.5)),
    }
    never = option_scores(AnswerSpec(options=YES_NO[1:]), lambda form: -math.inf)
    assert never == {"No": -math.inf}


def test_sampling_params_use_structured_outputs_or_the_older_guided_decoding() -> None:
    def fake_vllm(**params: Any) -> Any:
        return SimpleNamespace(SamplingParams=dict, sampling_params=SimpleNamespace(**params))

    built = build_requests(
        [(Request("s", "q", 0, answer=AnswerSpec(json_schema=canonical_json(SCHEMA))), [1])],
        Decoding(),
    )[0]
    current = sampling_params(fake_vllm(StructuredOutputsParams=dict), built)
    assert current["structured_outputs"] == {"json": SCHEMA} and "guided_decoding" not in current
    older = sampling_params(fake_vllm(GuidedDecodingParams=dict), built)
    assert older["guided_decoding"] == {"json": SCHEMA} and older["max_tokens"] == 16
    plain = build_requests([(Request("p", "q", 0), [1])], Decoding())[0]
    assert "structured_outputs" not in sampling_params(fake_vllm(), plain)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_missing_vllm_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="pip install 'cueaudit\\[vllm\\]'"):
        _import_vllm()


def test_vllm_refuses_bitsandbytes_8bit() -> None:
    with pytest.raises(InputError, match="8-bit"):
        VLLMBackend("unused", "id", quantization="8bit")
    with pytest.raises(InputError, match="8-bit"):
        VLLMBackend.from_spec(
            {"resolved_path": "unused", "model_id": "id"}, {"quantization": "8bit"}
        )
