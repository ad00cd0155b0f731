"""vLLM backend (optional extra ``cueaudit[vllm]``, CUDA only): offline ``LLM.generate``.

vLLM schedules the requests itself (continuous batching) and reuses shared prefixes through
its prefix cache (``enable_prefix_caching``), so prompts are handed over all at once, as token
ids of the chat-rendered prompt (the HF engine's tokens: no second BOS). Each prompt carries
its own sampling seed derived from (run seed, prompt_uid), as in the HF engine.

- **Option scores**, log P(form | prompt) summed over an option's forms: a single-token form
  is read from the first generated step's top logprobs (``logprobs``); a multi-token form, a
  single-token one outside the top logprobs, and every form of a constrained request (whose
  first step is already masked) from ``prompt_logprobs`` of a one-token request on the
  prompt's tokens followed by the form's.
- **Structured outputs**: a JSON schema or a forced tool's parameters go to vLLM's structured
  outputs (``StructuredOutputsParams(json=...)``; ``GuidedDecodingParams`` before vLLM 0.11).
  A forced tool's call is the parsed output.

vLLM is imported only when a model with ``backend: vllm`` runs; request building is plain
Python so it is unit-tested without vLLM installed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cueaudit.errors import InputError
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

#: Top logprobs asked for at the first step (vLLM's default ``max_logprobs``).
TOP_LOGPROBS = 20


@dataclass(frozen=True)
class VLLMRequest:
    """Everything vLLM needs for one prompt, before any vLLM object is built."""

    prompt_token_ids: list[int]
    sampling: dict[str, Any]
    #: Keyword arguments of vLLM's structured-outputs parameters (``{"json": schema}``).
    structured: dict[str, Any] | None = None


@dataclass
class _Pending:
    """A request on its way: its tokens and the log-probabilities of its forms so far."""

    request: Request
    prompt_ids: list[int]
    forms: dict[str, float | None] = field(default_factory=dict)


def output_schema(answer: AnswerSpec) -> dict[str, Any] | None:
    """The schema the output must match: a forced tool's parameters, else the JSON schema."""
    tool = answer.forced_tool
    return tool.parameters if tool is not None else answer.schema()


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


def build_requests(
    prompts: Iterable[tuple[Request, list[int]]],
    decoding: Decoding,
    top_logprobs: int = TOP_LOGPROBS,
) -> list[VLLMRequest]:
    """vLLM arguments of each (request, prompt token ids) to generate.

    First-step logprobs are asked for only where they score options: an unconstrained
    request with options.
    """
    built = []
    for request, ids in prompts:
        answer = request.answer
        schema = output_schema(answer)
        wants_logprobs = bool(answer.options) and schema is None
        built.append(
            VLLMRequest(
                prompt_token_ids=list(ids),
                sampling={
                    "n": 1,
                    **sampling_arguments(decoding),
                    "max_tokens": decoding.max_new_tokens,
                    "seed": prompt_seed(request.seed, request.uid) % (2**63 - 1),
                    "logprobs": top_logprobs if wants_logprobs else None,
                },
                structured={"json": schema} if schema is not None else None,
            )
        )
    return built


def first_step_request(prompt_ids: Sequence[int], top_logprobs: int = TOP_LOGPROBS) -> VLLMRequest:
    """A one-token unconstrained request whose first step's top logprobs score single tokens."""
    return VLLMRequest(
        prompt_token_ids=list(prompt_ids),
        sampling={"n": 1, "max_tokens": 1, "temperature": 0.0, "logprobs": top_logprobs},
    )


def form_request(prompt_ids: Sequence[int], form_ids: Sequence[int]) -> VLLMRequest:
    """A one-token request whose prompt logprobs give log P(form | prompt)."""
    return VLLMRequest(
        prompt_token_ids=[*prompt_ids, *form_ids],
        sampling={"n": 1, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 1},
    )


def continuation_logprob(
    prompt_logprobs: Sequence[Mapping[int, Any] | None], prompt_length: int, form_ids: Sequence[int]
) -> float:
    """Sum of the form's tokens' logprobs in the prompt logprobs of prompt + form."""
    total = 0.0
    for k, token in enumerate(form_ids):
        step = prompt_logprobs[prompt_length + k]
        if step is None or token not in step:
            raise RuntimeError(f"vLLM returned no prompt logprob for token {token}")
        total += float(step[token].logprob)
    return total


def first_step_logprobs(step: Mapping[int, Any] | None) -> dict[int, float]:
    """{token id: logprob} of a generated step's top logprobs."""
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
    kwargs = dict(built.sampling)
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
            "backend 'vllm' needs the vllm package on a CUDA machine: pip install 'cueaudit[vllm]'",
            "backend",
        ) from error
    return vllm


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
        gpu_memory_utilization: float = 0.9,
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
        self.gpu_memory_utilization = gpu_memory_utilization
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self._llm: Any = None
        self._sampling_defaults = dict(sampling_defaults) if sampling_defaults else None

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
            spec.get("gpu_memory_utilization", 0.9),
            (manifest.get("generation_config") or {}).get("sampling"),
        )

    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model": self.model_id,
            "dtype": self.dtype,
            "quantization": self.quantization,
        }

    def render(self, text: str, answer: AnswerSpec = PLAIN_TEXT) -> str:
        return render_user_turn(self.tokenizer, text, answer.tools)

    def prompt_ids(self, request: Request) -> list[int]:
        rendered = self.render(request.text, request.answer)
        return list(self.tokenizer(rendered, add_special_tokens=False)["input_ids"])

    def form_ids(self, form: str) -> list[int]:
        return list(self.tokenizer.encode(form, add_special_tokens=False))

    def _engine(self) -> tuple[Any, Any]:
        vllm = _import_vllm()
        if self._llm is None:
            kwargs: dict[str, Any] = {
                "model": self.model_path,
                "dtype": self.dtype,
                "enable_prefix_caching": True,
                "gpu_memory_utilization": self.gpu_memory_utilization,
            }
            if self.quantization == "4bit":
                kwargs["quantization"] = "bitsandbytes"
            self._llm = vllm.LLM(**kwargs)
        return vllm, self._llm

    def _run(self, built: list[VLLMRequest]) -> list[Any]:
        vllm, llm = self._engine()
        if not built:
            return []
        return list(
            llm.generate(
                [{"prompt_token_ids": b.prompt_token_ids} for b in built],
                [sampling_params(vllm, b) for b in built],
            )
        )

    def _fill_scores(self, pending: list[_Pending]) -> list[dict[str, float] | None]:
        """Score the forms the first step did not give, through prompt logprobs."""
        todo = [(p, form) for p in pending for form, value in p.forms.items() if value is None]
        built = [form_request(p.prompt_ids, self.form_ids(form)) for p, form in todo]
        for (p, form), output in zip(todo, self._run(built), strict=True):
            p.forms[form] = continuation_logprob(
                output.prompt_logprobs, len(p.prompt_ids), self.form_ids(form)
            )
        return [
            option_scores(p.request.answer, lambda form, p=p: float(p.forms[form]))
            if p.request.answer.options
            else None
            for p in pending
        ]

    def _pending(
        self, request: Request, ids: list[int], first: Mapping[int, Any] | None
    ) -> _Pending:
        """A request with its single-token forms read from the first step, where given."""
        pending = _Pending(request, ids)
        top = first_step_logprobs(first)
        for option in request.answer.options:
            for form in option.forms:
                form_ids = self.form_ids(form)
                pending.forms[form] = top.get(form_ids[0]) if len(form_ids) == 1 else None
        return pending

    def generate(
        self, requests: Iterable[Request], decoding: Decoding
    ) -> Iterator[list[tuple[Request, Generation]]]:
        todo = list(requests)
        ids = [self.prompt_ids(r) for r in todo]
        built = build_requests(zip(todo, ids, strict=True), decoding)
        outputs = self._run(built)
        pending = []
        for request, prompt, b, output in zip(todo, ids, built, outputs, strict=True):
            steps = output.outputs[0].logprobs
            first = steps[0] if b.sampling["logprobs"] is not None and steps else None
            pending.append(self._pending(request, prompt, first))
        scores = self._fill_scores(pending)
        results = []
        for request, output, score in zip(todo, outputs, scores, strict=True):
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
        """Option scores from one-token requests: first-step top logprobs, then prompt logprobs."""
        todo = list(requests)
        ids = [self.prompt_ids(r) for r in todo]
        outputs = self._run([first_step_request(prompt) for prompt in ids])
        pending = [
            self._pending(r, prompt, (o.outputs[0].logprobs or [None])[0])
            for r, prompt, o in zip(todo, ids, outputs, strict=True)
        ]
        scores = self._fill_scores(pending)
        yield [(r, s or {}) for r, s in zip(todo, scores, strict=True)]
