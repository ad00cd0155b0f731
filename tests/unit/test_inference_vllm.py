"""vLLM backend: request building without vLLM installed; a clear error without it."""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from cueaudit.errors import InputError
from cueaudit.inference.constrained import JSON_LAYOUT
from cueaudit.inference.core import AnswerSpec, Decoding, Option, Request, Tool, canonical_json
from cueaudit.inference.seeding import prompt_seed
from cueaudit.inference.vllm_backend import (
    VLLMBackend,
    VLLMSettings,
    _import_vllm,
    build_requests,
    continuations,
    engine_arguments,
    first_step_logprobs,
    form_logprob,
    guided_schema,
    option_scores,
    output_schema,
    sampling_arguments,
    sampling_params,
    scored_tokens,
    scoring_request,
)

SCHEMA = {"type": "object", "properties": {"ranks": {"type": "array"}}, "required": ["ranks"]}
TOOL = Tool.of("submit_ranking", "Submit the ranks.", SCHEMA)
YES_NO = (Option("Yes", ("Yes", "yes")), Option("No", ("No",)))
#: A tokenizer stand-in: one token per character, "Yes" a single token.
TOKENS = {"Yes": [7], "yes": [8], "No": [9]}


def form_ids(form: str) -> list[int]:
    return TOKENS.get(form, [ord(c) for c in form])


@dataclass
class Logprob:
    """vLLM's Logprob, as far as the backend reads it."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


def test_requests_carry_per_prompt_seeds_and_task_budget() -> None:
    reqs = [Request("u1", "a", 0), Request("u2", "b", 0), Request("u1", "a", 1)]
    decoding = Decoding(top_k=50, max_new_tokens=8)
    built = build_requests(((r, [ord(r.text)]) for r in reqs), decoding, form_ids)
    assert [b.prompt_token_ids for b in built] == [[97], [98], [97]]
    first = built[0].sampling
    assert first["max_tokens"] == 8 and first["temperature"] == 1.0 and first["top_k"] == 50
    assert first["seed"] == prompt_seed(0, "u1") % (2**63 - 1)
    assert len({b.sampling["seed"] for b in built}) == 3
    no_top_k = build_requests([(reqs[0], [1])], Decoding(top_k=0), form_ids)[0].sampling
    assert no_top_k["top_k"] == -1
    # Plain text asks for neither logprobs nor structure.
    assert first["logprob_token_ids"] is None and built[0].structured is None


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
        [(r, [1, 2]) for r in (options, schema, tool, auto, constrained_options)],
        Decoding(),
        form_ids,
    )
    # the single-token forms' own tokens, scored at the generation's first step; a
    # constrained request's first step is masked, so it is scored apart
    assert [b.sampling["logprob_token_ids"] for b in built] == [
        [7, 8, 9],
        None,
        None,
        [7, 8, 9],
        None,
    ]
    guided = {"json": {**SCHEMA, "x-guidance": JSON_LAYOUT}}
    assert [b.structured for b in built] == [None, guided, guided, None, guided]
    assert output_schema(tool.answer) == SCHEMA and output_schema(auto.answer) is None


def test_scoring_requests_and_multi_token_forms() -> None:
    first = scoring_request([5, 6], [7, 9])
    assert first.sampling["logprob_token_ids"] == [7, 9] and first.sampling["max_tokens"] == 1
    assert first.structured is None and first.sampling["temperature"] == 0.0
    # "Maybe" is five tokens here: four one-token requests after its tokens so far, and
    # forms sharing a prefix share its request
    answer = AnswerSpec(options=(Option("Maybe", ("Maybe", "Mayday")),))
    asks = continuations(answer, form_ids)
    assert asks[(77,)] == [97] and asks[(77, 97)] == [121]
    assert asks[(77, 97, 121)] == [98, 100] and asks[(77, 97, 121, 98)] == [101]
    assert len(asks) == 6  # Mayday goes on after "Mayd" and "Mayda"
    first_step = {77: -1.0}
    steps = {(77,): {97: -0.5}, (77, 97): {121: -0.25}, (77, 97, 121): {98: -2.0, 100: -3.0},
             (77, 97, 121, 98): {101: -0.125}}  # fmt: skip
    assert form_logprob(form_ids("Maybe"), first_step, steps) == -3.875
    assert form_logprob(form_ids("Mayday")[:4], first_step, steps) == -4.75
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
        form_ids,
    )[0]
    current = sampling_params(fake_vllm(StructuredOutputsParams=dict), built)
    guided = {"json": guided_schema(SCHEMA)}
    assert current["structured_outputs"] == guided and "guided_decoding" not in current
    older = sampling_params(fake_vllm(GuidedDecodingParams=dict), built)
    assert older["guided_decoding"] == guided and older["max_tokens"] == 16
    # an unset field is not passed: vLLM's own default stands
    assert "logprob_token_ids" not in current
    plain = build_requests([(Request("p", "q", 0), [1])], Decoding(), form_ids)[0]
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


def test_the_json_layout_is_the_hf_engines() -> None:
    # the HF engine compiles schemas with JSON_LAYOUT as llguidance's defaults; vLLM's
    # guidance backend gets the same layout inside the schema, where a schema's own wins
    assert guided_schema(SCHEMA)["x-guidance"] == JSON_LAYOUT
    assert JSON_LAYOUT["whitespace_flexible"] is False
    own = guided_schema({**SCHEMA, "x-guidance": {"item_separator": ","}})
    assert own["x-guidance"]["item_separator"] == ","


def test_first_tokens_are_scored_once_each_and_bounded() -> None:
    answer = AnswerSpec(options=(*YES_NO, Option("Maybe", ("Maybe", "Mayday"))))
    assert scored_tokens(answer, form_ids) == [7, 8, 9, 77]  # every form's first token
    many = AnswerSpec(options=tuple(Option(str(k), (str(k),)) for k in range(200)))
    with pytest.raises(InputError, match="at most 128"):
        scored_tokens(many, lambda form: [int(form)])


def test_engine_arguments_on_the_cpu_build_and_on_gpus() -> None:
    settings = VLLMSettings(kv_cache_gib=1.5, max_model_len=1024, batch_invariant=True)
    kwargs, env = engine_arguments("/m", "float32", settings, cpu=True, threads=2)
    # in this process, on the job's threads, with the KV cache as its memory and no chunked
    # prefill (seeded requests stop the CPU engine otherwise)
    assert kwargs["distributed_executor_backend"] == "uni"
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert env["OMP_NUM_THREADS"] == "2" and env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2" and env["VLLM_BATCH_INVARIANT"] == "1"
    assert kwargs["enable_chunked_prefill"] is False and "gpu_memory_utilization" not in kwargs
    assert kwargs["max_model_len"] == 1024
    assert kwargs["structured_outputs_config"] == {"backend": "guidance"}
    assert kwargs["enforce_eager"] is True  # the CPU build's compile cache does not load
    gpu, gpu_env = engine_arguments(
        "/m",
        "bfloat16",
        VLLMSettings(tensor_parallel_size=4, gpu_memory_utilization=0.8),
        cpu=False,
        threads=2,
    )
    assert gpu["gpu_memory_utilization"] == 0.8 and gpu["tensor_parallel_size"] == 4
    assert gpu["enforce_eager"] is False
    assert "distributed_executor_backend" not in gpu and "enable_chunked_prefill" not in gpu
    assert gpu_env == {}
    tp_cpu, tp_env = engine_arguments("/m", "float32", VLLMSettings(tensor_parallel_size=2),
                                      cpu=True, threads=2)  # fmt: skip
    assert "distributed_executor_backend" not in tp_cpu
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in tp_env
    with pytest.raises(InputError, match="unknown vllm settings"):
        VLLMSettings.from_config({"gpu_memory": 0.5})


class FakeLLM:
    """vLLM's ``LLM.generate`` over a made-up distribution: the log-probability of token t
    after tokens c is -(sum(c) % 7 + t % 5) / 4 (not normalised: a stand-in)."""

    def __init__(self) -> None:
        self.requests: list[list[int]] = []

    @staticmethod
    def logprob(context: list[int], token: int) -> float:
        return -((sum(context) % 7) + token % 5) / 4

    def generate(self, prompts: list[dict], params: list[Any], use_tqdm: bool = False) -> list:
        outputs = []
        for prompt, sampling in zip(prompts, params, strict=True):
            ids = prompt["prompt_token_ids"]
            self.requests.append(ids)
            tokens = sampling.get("logprob_token_ids") or []
            step = {t: Logprob(self.logprob(ids, t)) for t in tokens}
            completion = SimpleNamespace(text="Yes", token_ids=[7], finish_reason="stop",
                                         logprobs=[step] if tokens else None)  # fmt: skip
            outputs.append(SimpleNamespace(outputs=[completion], prompt_token_ids=ids))
        return outputs


def fake_backend() -> tuple[VLLMBackend, FakeLLM]:
    backend = VLLMBackend.__new__(VLLMBackend)
    backend.settings, backend._form_ids = VLLMSettings(chunk_prompts=2), {}
    backend.stats = {"engine_starts": 0, "requests": 0}
    backend.form_ids = form_ids  # type: ignore[method-assign]
    backend.prompt_ids = lambda request: [ord(c) for c in request.text]  # type: ignore[method-assign]
    llm = FakeLLM()
    fake_vllm = SimpleNamespace(
        SamplingParams=dict, sampling_params=SimpleNamespace(StructuredOutputsParams=dict)
    )
    backend._engine = lambda: (fake_vllm, llm)  # type: ignore[method-assign]
    return backend, llm


def test_option_scores_are_the_sums_of_each_forms_tokens() -> None:
    options = (Option("Yes", ("Yes", "YES")), Option("No", ("No", "nope")))
    plain = [Request(f"u{k}", f"q{k}", 0, answer=AnswerSpec(options=options)) for k in range(3)]
    schema = AnswerSpec(options=options, json_schema=canonical_json(SCHEMA))
    constrained = Request("c", "q9", 0, answer=schema)
    backend, llm = fake_backend()
    batches = list(backend.generate([*plain, constrained], Decoding(max_new_tokens=4)))
    assert [len(b) for b in batches] == [2, 2]  # chunks of vllm.chunk_prompts
    for request, generation in (pair for batch in batches for pair in batch):
        prompt = [ord(c) for c in request.text]

        def exact(form: str, prompt: list[int] = prompt) -> float:
            ids = form_ids(form)
            return sum(llm.logprob(prompt + ids[:k], ids[k]) for k in range(len(ids)))

        expected = option_scores(request.answer, exact)
        assert generation.option_logprobs == pytest.approx(expected), request.uid
    # per chunk: the generations, one first-step request for the constrained prompt, and one
    # request per multi-token form prefix: "YES" 2 (Y, YE), "nope" 3 (n, no, nop)
    assert len(llm.requests) == 4 + 1 + 4 * 5
    scores = [s for batch in backend.score(plain) for _, s in batch]
    assert scores[0] == batches[0][0][1].option_logprobs
