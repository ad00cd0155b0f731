"""vLLM backend (optional extra ``cueaudit[vllm]``, CUDA only): offline ``LLM.generate``.

vLLM schedules the requests itself (continuous batching) and reuses shared prefixes through
its prefix cache (``enable_prefix_caching``), so prompts are handed over all at once. Each
prompt carries its own sampling seed derived from (run seed, prompt_uid), as in the HF engine,
and its first-step logprobs give P(Yes) and P(No). The output rows follow the same schema.

vLLM is imported only when a model with ``backend: vllm`` runs; request building is plain
Python so it is unit-tested without vLLM installed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cueaudit.errors import InputError
from cueaudit.inference.core import Decoding, Generation, Request, render_user_turn
from cueaudit.inference.sampling import prompt_seed

AFFIRMATIVE = {"yes"}
NEGATIVE = {"no"}


@dataclass(frozen=True)
class VLLMRequest:
    """Everything vLLM needs for one prompt, before any vLLM object is built."""

    prompt: str
    sampling: dict[str, Any]


def build_requests(
    prompts: Iterable[tuple[Request, str]], decoding: Decoding, top_logprobs: int = 20
) -> list[VLLMRequest]:
    """vLLM SamplingParams arguments of each (request, chat-rendered prompt)."""
    return [
        VLLMRequest(
            prompt=rendered,
            sampling={
                "n": 1,
                "temperature": decoding.temperature,
                "top_p": decoding.top_p,
                "top_k": decoding.top_k if decoding.top_k > 0 else -1,
                "max_tokens": decoding.max_new_tokens,
                "seed": prompt_seed(request.seed, request.uid) % (2**63 - 1),
                "logprobs": top_logprobs,
            },
        )
        for request, rendered in prompts
    ]


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as error:
        raise InputError(
            "config",
            "backend 'vllm' needs the vllm package on a CUDA machine: pip install 'cueaudit[vllm]'",
            "backend",
        ) from error
    return vllm


class VLLMBackend:
    name = "vllm"

    def __init__(
        self,
        model_path: str,
        model_id: str,
        dtype: str = "auto",
        quantization: str = "none",
        gpu_memory_utilization: float = 0.9,
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

    @classmethod
    def from_spec(cls, path: str, spec: Mapping[str, Any], model_id: str) -> VLLMBackend:
        return cls(path, model_id, spec.get("dtype", "auto"), spec.get("quantization", "none"))

    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model": self.model_id,
            "dtype": self.dtype,
            "quantization": self.quantization,
        }

    def render(self, text: str) -> str:
        return render_user_turn(self.tokenizer, text)

    def generate(
        self, requests: Iterable[Request], decoding: Decoding
    ) -> Iterator[list[tuple[Request, Generation]]]:
        vllm = _import_vllm()
        todo = list(requests)
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
        built = build_requests(((r, self.render(r.text)) for r in todo), decoding)
        outputs = self._llm.generate(
            [b.prompt for b in built],
            [vllm.SamplingParams(**b.sampling) for b in built],
        )
        results = []
        for request, output in zip(todo, outputs, strict=True):
            first = output.outputs[0]
            p_yes = p_no = None
            if first.logprobs:
                step = first.logprobs[0].values()
                top = [(t.decoded_token.strip().lower(), t.logprob) for t in step]
                p_yes = sum(math.exp(lp) for tok, lp in top if tok in AFFIRMATIVE)
                p_no = sum(math.exp(lp) for tok, lp in top if tok in NEGATIVE)
            results.append(
                (
                    request,
                    Generation(
                        completion=first.text,
                        prompt_tokens=len(output.prompt_token_ids),
                        completion_tokens=len(first.token_ids),
                        finish_reason=str(first.finish_reason),
                        p_yes=p_yes,
                        p_no=p_no,
                    ),
                )
            )
        yield results
