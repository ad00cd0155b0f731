"""vLLM backend (``backend: vllm``): offline ``LLM.generate``, on CUDA GPUs or vLLM's CPU build.

vLLM schedules the requests itself (continuous batching) and reuses shared prefixes through
its prefix cache (``enable_prefix_caching``), so prompts are handed over in chunks of
``vllm.chunk_prompts``, as token ids of the chat-rendered prompt (the HF engine's tokens: no
second BOS). Each chunk's answers go back to the runner as it finishes, so they reach the
response cache and the log while the job runs, and a killed job resumes. Each prompt carries
its own sampling seed derived from (run seed, prompt_uid), as in the HF engine.

- **Option scores**, log P(form | prompt) summed over an option's forms, all from the raw
  (unmasked, untempered) distribution, as the HF engine reads them: every form's first token
  is read at the generation's own first step (``logprob_token_ids``: exactly those tokens,
  whatever their rank); a constrained request's first step is masked by its grammar, so it
  comes from one unconstrained one-token request per prompt. A multi-token form's later tokens
  come from one-token requests on the prompt followed by the form's tokens so far, one per
  distinct form prefix, which read the prompt from the prefix cache. (``prompt_logprobs``
  would score a form in one request but recomputes the whole prompt: vLLM cannot read
  prompt log-probabilities through its prefix cache.)
- **Structured outputs**: a JSON schema or a forced tool's parameters go to vLLM's
  ``guidance`` backend (llguidance, the HF engine's grammar engine) with the HF engine's JSON
  layout (``cueaudit.inference.constrained.JSON_LAYOUT``, set in the schema's ``x-guidance``):
  a backend must not change the instrument, and vLLM's default layout lets a model spend its
  token budget on whitespace. A forced tool's call is the parsed output.
- **The engine** starts once per backend object (the runner answers every task of a model and
  seed with one), from the model block's ``vllm:`` settings (:class:`VLLMSettings`). On
  vLLM's CPU build the engine runs in the job's process (no spawned engine or worker), on the
  job's threads (vLLM otherwise keeps one core for a server it does not have here), with a
  KV cache of ``kv_cache_gib`` and chunked prefill off (a seeded request whose prefill is
  split stops the CPU engine: "CPU Generator does not use offset").

vLLM is imported only when a model with ``backend: vllm`` runs; request building is plain
Python so it is unit-tested without vLLM installed.

One module on purpose: building requests, the engine's settings and reading its outputs must
agree on one request layout; the layout is unit-tested without vLLM.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from cueaudit.errors import InputError
from cueaudit.inference.constrained import JSON_LAYOUT
from cueaudit.inference.core import (
    PLAIN_TEXT,
    AnswerSpec,
    Decoding,
    Generation,
    Request,
    forced_tool_calls,
    render_user_turn,
)
from cueaudit.inference.seeding import prompt_seed


@dataclass(frozen=True)
class VLLMRequest:
    """Everything vLLM needs for one prompt, before any vLLM object is built."""

    prompt_token_ids: list[int]
    sampling: dict[str, Any]
    #: Keyword arguments of vLLM's structured-outputs parameters (``{"json": schema}``).
    structured: dict[str, Any] | None = None


@dataclass
class _Pending:
    """A request on its way: its tokens and its first step's scored tokens, once known."""

    request: Request
    prompt_ids: list[int]
    first: dict[int, float] | None = None


#: The most token ids vLLM scores at one step (its ``MAX_LOGPROB_TOKEN_IDS``).
MAX_SCORED_TOKENS = 128
#: The structured-outputs engine: llguidance, as the HF engine's constrained decoding.
STRUCTURED_BACKEND = "guidance"


@dataclass(frozen=True)
class VLLMSettings:
    """A model's ``vllm:`` block (defaults: workflow/schemas/config.schema.yaml)."""

    tensor_parallel_size: int = 1
    #: Context length in tokens; None: the model's.
    max_model_len: int | None = None
    #: Share of each GPU's memory for weights and KV cache (CUDA only).
    gpu_memory_utilization: float = 0.9
    #: KV cache size on vLLM's CPU build, in GiB (its share of the machine's memory).
    kv_cache_gib: float = 2.0
    #: No CUDA graphs or torch.compile; None: eager on vLLM's CPU build (its compile cache
    #: does not load there, so every job compiled the model again), compiled on GPUs.
    enforce_eager: bool | None = None
    #: vLLM's batch-invariant kernels (VLLM_BATCH_INVARIANT): answers that do not depend on
    #: which prompts share a batch, at some speed.
    batch_invariant: bool = False
    #: vLLM's quantization method for pre-quantised weights (awq, gptq, fp8, ...); None: none.
    quantization: str | None = None
    #: Prompts handed to the engine at once; their answers reach the cache as a chunk ends.
    chunk_prompts: int = 256

    @classmethod
    def from_config(cls, block: Mapping[str, Any] | None) -> VLLMSettings:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(block or {}) - known)
        if unknown:
            raise InputError("config", f"unknown vllm settings {unknown} (known: {sorted(known)})")
        return cls(**dict(block or {}))


def engine_arguments(
    model_path: str,
    dtype: str,
    settings: VLLMSettings,
    *,
    cpu: bool,
    threads: int,
    bitsandbytes: bool = False,
) -> tuple[dict[str, Any], dict[str, str]]:
    """``vllm.LLM``'s keyword arguments and the environment it needs, for one engine.

    On the CPU build (``cpu``) the engine runs in this process with ``threads`` OpenMP
    threads, and its memory is the KV cache of ``kv_cache_gib``; on GPUs vLLM's own process
    layout and ``gpu_memory_utilization`` apply.
    """
    kwargs: dict[str, Any] = {
        "model": model_path,
        "dtype": dtype,
        "enable_prefix_caching": True,
        "tensor_parallel_size": settings.tensor_parallel_size,
        "enforce_eager": cpu if settings.enforce_eager is None else settings.enforce_eager,
        "max_logprobs": MAX_SCORED_TOKENS,
        "structured_outputs_config": {"backend": STRUCTURED_BACKEND},
    }
    if settings.max_model_len is not None:
        kwargs["max_model_len"] = settings.max_model_len
    if bitsandbytes:
        kwargs["quantization"] = "bitsandbytes"
    elif settings.quantization is not None:
        kwargs["quantization"] = settings.quantization
    environment: dict[str, str] = {}
    if settings.batch_invariant:
        environment["VLLM_BATCH_INVARIANT"] = "1"
    if cpu:
        kwargs["enable_chunked_prefill"] = False
        environment |= {
            "VLLM_CPU_KVCACHE_SPACE": str(max(1, math.ceil(settings.kv_cache_gib))),
            "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
            "OMP_NUM_THREADS": str(max(1, threads)),
        }
        if settings.tensor_parallel_size == 1:
            kwargs["distributed_executor_backend"] = "uni"
            environment["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    else:
        kwargs["gpu_memory_utilization"] = settings.gpu_memory_utilization
    return kwargs, environment


def output_schema(answer: AnswerSpec) -> dict[str, Any] | None:
    """The schema the output must match: a forced tool's parameters, else the JSON schema."""
    tool = answer.forced_tool
    return tool.parameters if tool is not None else answer.schema()


def guided_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema with the HF engine's JSON layout for llguidance (``x-guidance``)."""
    return {**schema, "x-guidance": {**JSON_LAYOUT, **schema.get("x-guidance", {})}}


def sampling_arguments(decoding: Decoding) -> dict[str, Any]:
    """The resolved sampling parameters as vLLM's ``SamplingParams`` arguments.

    Only applied ones are passed: vLLM's own defaults are the neutral values. (vLLM applies
    a model's generation config, ``generation_config="auto"``, only to requests built without
    sampling parameters, and then only the values that differ from transformers' defaults, so
    the model's defaults are resolved here, as for the HF engine: both sample alike.)
    Greedy decoding passes ``temperature=0``, vLLM's greedy; its top-k, top-p and min-p are
    None (``Decoding``: they cannot change a greedy answer), so none is passed.
    """
    arguments: dict[str, Any] = {}
    if decoding.temperature is not None:
        arguments["temperature"] = decoding.temperature
    if decoding.top_p is not None:
        arguments["top_p"] = decoding.top_p
    if decoding.top_k is not None:
        arguments["top_k"] = decoding.top_k if decoding.top_k > 0 else -1
    if decoding.min_p is not None:
        arguments["min_p"] = decoding.min_p
    if decoding.repetition_penalty is not None:
        arguments["repetition_penalty"] = decoding.repetition_penalty
    return arguments


#: The token ids of an option's surface form as it follows the generation prompt.
FormIds = Callable[[str], list[int]]


def scored_tokens(answer: AnswerSpec, form_ids: FormIds) -> list[int]:
    """The first-step tokens that score the answer's forms (each form's first token), in
    order, once each."""
    tokens = list(dict.fromkeys(form_ids(form)[0] for o in answer.options for form in o.forms))
    if len(tokens) > MAX_SCORED_TOKENS:
        raise InputError(
            "config",
            f"{len(tokens)} distinct first tokens of option forms; vLLM scores at most "
            f"{MAX_SCORED_TOKENS}",
            "options",
        )
    return tokens


def continuations(answer: AnswerSpec, form_ids: FormIds) -> dict[tuple[int, ...], list[int]]:
    """{tokens of a multi-token form so far: the tokens that may follow} over the answer's
    forms: each is one prefix-cached one-token request after the prompt."""
    asks: dict[tuple[int, ...], dict[int, None]] = {}
    for option in answer.options:
        for form in option.forms:
            ids = form_ids(form)
            for k in range(1, len(ids)):
                asks.setdefault(tuple(ids[:k]), {})[ids[k]] = None
    return {prefix: list(tokens) for prefix, tokens in asks.items()}


def form_logprob(
    ids: Sequence[int],
    first: Mapping[int, float],
    steps: Mapping[tuple[int, ...], Mapping[int, float]],
) -> float:
    """log P(form | prompt): its first token at the first step, then each next token after
    the form's tokens so far."""
    total = first[ids[0]]
    for k in range(1, len(ids)):
        total += steps[tuple(ids[:k])][ids[k]]
    return total


def build_requests(
    prompts: Iterable[tuple[Request, list[int]]], decoding: Decoding, form_ids: FormIds
) -> list[VLLMRequest]:
    """vLLM arguments of each (request, prompt token ids) to generate.

    An unconstrained request with options asks for its forms' first tokens' log-probabilities
    at its first step (``logprob_token_ids``); a constrained one is scored apart
    (:func:`scoring_request`), since its grammar masks that step.
    """
    built = []
    for request, ids in prompts:
        answer = request.answer
        schema = output_schema(answer)
        tokens = scored_tokens(answer, form_ids) if schema is None else []
        built.append(
            VLLMRequest(
                prompt_token_ids=list(ids),
                sampling={
                    "n": 1,
                    **sampling_arguments(decoding),
                    "max_tokens": decoding.max_new_tokens,
                    "seed": prompt_seed(request.seed, request.uid) % (2**63 - 1),
                    "logprob_token_ids": tokens or None,
                },
                structured={"json": guided_schema(schema)} if schema is not None else None,
            )
        )
    return built


def scoring_request(prompt_ids: Sequence[int], tokens: Sequence[int]) -> VLLMRequest:
    """A one-token unconstrained request whose first step scores ``tokens``."""
    return VLLMRequest(
        prompt_token_ids=list(prompt_ids),
        sampling={"n": 1, "max_tokens": 1, "temperature": 0.0, "logprob_token_ids": list(tokens)},
    )


def first_step_logprobs(step: Mapping[int, Any] | None) -> dict[int, float]:
    """{token id: logprob} of a generated step's scored tokens."""
    return {token: float(entry.logprob) for token, entry in (step or {}).items()}


def option_scores(answer: AnswerSpec, form_logprob: Callable[[str], float]) -> dict[str, float]:
    """{option key: log of the summed probability of its forms}."""
    scores = {}
    for option in answer.options:
        values = [form_logprob(form) for form in option.forms]
        top = max(values)
        scores[option.key()] = (
            top if top == -math.inf else top + math.log(sum(math.exp(v - top) for v in values))
        )
    return scores


def sampling_params(vllm: Any, built: VLLMRequest) -> Any:
    """vLLM's SamplingParams of a built request, with structured outputs where asked."""
    kwargs = {k: v for k, v in built.sampling.items() if v is not None}
    if built.structured is not None:
        params = vllm.sampling_params
        if hasattr(params, "StructuredOutputsParams"):
            kwargs["structured_outputs"] = params.StructuredOutputsParams(**built.structured)
        else:  # vLLM before 0.11
            kwargs["guided_decoding"] = params.GuidedDecodingParams(**built.structured)
    return vllm.SamplingParams(**kwargs)


def _import_vllm() -> Any:
    try:
        import vllm
        import vllm.sampling_params
    except ImportError as error:
        raise InputError(
            "config",
            "backend 'vllm' needs vLLM: on a CUDA machine pip install 'cueaudit[vllm]'; on a "
            "CPU, vLLM's CPU build in its own environment (bash scripts/install.sh --vllm)",
            "backend",
        ) from error
    return vllm


def _threads() -> int:
    try:
        import torch
    except ImportError:
        return os.cpu_count() or 1
    return int(torch.get_num_threads())


class VLLMBackend:
    name = "vllm"
    scores_options = True
    flush_every_batch = False

    def __init__(
        self,
        model_path: str,
        model_id: str,
        dtype: str = "auto",
        quantization: str = "none",
        settings: VLLMSettings | None = None,
        sampling_defaults: Mapping[str, Any] | None = None,
    ) -> None:
        if quantization == "8bit":
            raise InputError(
                "config",
                "vLLM cannot load bitsandbytes 8-bit weights in flight; use the hf backend for "
                "8-bit (the paper's setting) or quantization: none",
                "quantization",
            )
        from transformers import AutoTokenizer

        self.model_path, self.model_id = model_path, model_id
        self.dtype, self.quantization = dtype, quantization
        self.settings = settings or VLLMSettings()
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self._llm: Any = None
        self._form_ids: dict[str, list[int]] = {}
        self._sampling_defaults = dict(sampling_defaults) if sampling_defaults else None
        self.stats: dict[str, float] = {"engine_starts": 0, "requests": 0}

    @property
    def sampling_defaults(self) -> dict[str, Any]:
        """The model's own sampling parameters, resolved as the HF engine resolves them."""
        if self._sampling_defaults is None:
            from cueaudit.inference.generation_config import generation_defaults

            self._sampling_defaults = generation_defaults(self.model_path)["sampling"]
        return self._sampling_defaults

    @classmethod
    def from_spec(
        cls, manifest: Mapping[str, Any], spec: Mapping[str, Any], state_dir: Path | None = None
    ) -> VLLMBackend:
        """The backend of a prepared model (its manifest) and the config's model block.

        ``state_dir`` is accepted for the runner's common signature; vLLM keeps no state here.
        """
        return cls(
            str(manifest["resolved_path"]),
            manifest["model_id"],
            spec.get("dtype", "auto"),
            spec.get("quantization", "none"),
            VLLMSettings.from_config(spec.get("vllm")),
            (manifest.get("generation_config") or {}).get("sampling"),
        )

    def identity(self) -> dict[str, Any]:
        identity = {
            "backend": self.name,
            "model": self.model_id,
            "dtype": self.dtype,
            "quantization": self.quantization,
        }
        if self.settings.quantization is not None:  # other weights, other answers
            identity["vllm_quantization"] = self.settings.quantization
        return identity

    def render(self, text: str, answer: AnswerSpec = PLAIN_TEXT) -> str:
        return render_user_turn(self.tokenizer, text, answer.tools)

    def prompt_ids(self, request: Request) -> list[int]:
        rendered = self.render(request.text, request.answer)
        return list(self.tokenizer(rendered, add_special_tokens=False)["input_ids"])

    def form_ids(self, form: str) -> list[int]:
        if form not in self._form_ids:
            self._form_ids[form] = list(self.tokenizer.encode(form, add_special_tokens=False))
        return self._form_ids[form]

    def _engine(self) -> tuple[Any, Any]:
        vllm = _import_vllm()
        if self._llm is None:
            from vllm.platforms import current_platform

            kwargs, environment = engine_arguments(
                self.model_path,
                self.dtype,
                self.settings,
                cpu=current_platform.is_cpu(),
                threads=_threads(),
                bitsandbytes=self.quantization == "4bit",
            )
            os.environ.update(environment)
            self._llm = vllm.LLM(**kwargs)
            self.stats["engine_starts"] = self.stats.get("engine_starts", 0) + 1
        return vllm, self._llm

    def _run(self, built: list[VLLMRequest]) -> list[Any]:
        if not built:
            return []
        vllm, llm = self._engine()
        self.stats["requests"] = self.stats.get("requests", 0) + len(built)
        return list(
            llm.generate(
                [{"prompt_token_ids": b.prompt_token_ids} for b in built],
                [sampling_params(vllm, b) for b in built],
                use_tqdm=False,
            )
        )

    def _fill_scores(self, pending: list[_Pending]) -> list[dict[str, float] | None]:
        """Each request's option scores: the first step where the generation did not give it
        (one unconstrained request per prompt), then the later tokens of multi-token forms
        (one request per prompt and form prefix, reading the prompt from the prefix cache)."""
        scored = [p for p in pending if p.request.answer.options]
        todo = [p for p in scored if p.first is None]
        built = [scoring_request(p.prompt_ids, scored_tokens(p.request.answer, self.form_ids))
                 for p in todo]  # fmt: skip
        for p, output in zip(todo, self._run(built), strict=True):
            p.first = first_step_logprobs((output.outputs[0].logprobs or [None])[0])
        asks = [
            (p, prefix, tokens)
            for p in scored
            for prefix, tokens in continuations(p.request.answer, self.form_ids).items()
        ]
        built = [scoring_request([*p.prompt_ids, *prefix], tokens) for p, prefix, tokens in asks]
        steps: dict[int, dict[tuple[int, ...], dict[int, float]]] = {}
        for (p, prefix, _), output in zip(asks, self._run(built), strict=True):
            step = first_step_logprobs((output.outputs[0].logprobs or [None])[0])
            steps.setdefault(id(p), {})[prefix] = step
        return [
            option_scores(
                p.request.answer,
                lambda form, p=p: form_logprob(
                    self.form_ids(form), p.first or {}, steps.get(id(p), {})
                ),
            )
            if p.request.answer.options
            else None
            for p in pending
        ]

    def _chunks(self, requests: Iterable[Request]) -> Iterator[list[Request]]:
        todo = list(requests)
        size = max(1, self.settings.chunk_prompts)
        for start in range(0, len(todo), size):
            yield todo[start : start + size]

    def generate(
        self, requests: Iterable[Request], decoding: Decoding
    ) -> Iterator[list[tuple[Request, Generation]]]:
        for chunk in self._chunks(requests):
            ids = [self.prompt_ids(r) for r in chunk]
            built = build_requests(zip(chunk, ids, strict=True), decoding, self.form_ids)
            outputs = self._run(built)
            pending = []
            for request, prompt, b, output in zip(chunk, ids, built, outputs, strict=True):
                steps = output.outputs[0].logprobs
                scored = b.sampling["logprob_token_ids"] is not None and steps
                first = first_step_logprobs(steps[0]) if scored else None
                pending.append(_Pending(request, prompt, first))
            scores = self._fill_scores(pending)
            results = []
            for request, output, score in zip(chunk, outputs, scores, strict=True):
                first = output.outputs[0]
                results.append(
                    (
                        request,
                        Generation(
                            completion=first.text,
                            prompt_tokens=len(output.prompt_token_ids),
                            completion_tokens=len(first.token_ids),
                            finish_reason=str(first.finish_reason),
                            option_logprobs=score,
                            tool_calls=forced_tool_calls(request.answer, first.text),
                            constrained=request.answer.constrained,
                        ),
                    )
                )
            yield results

    def score(
        self, requests: Iterable[Request]
    ) -> Iterator[list[tuple[Request, dict[str, float]]]]:
        """Option scores of answers generated before: one-token scoring requests."""
        for chunk in self._chunks(requests):
            pending = [_Pending(r, self.prompt_ids(r)) for r in chunk]
            scores = self._fill_scores(pending)
            yield [(r, s or {}) for r, s in zip(chunk, scores, strict=True)]
