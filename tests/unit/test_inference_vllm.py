"""vLLM backend: request building without vLLM installed; a clear error without it."""

from __future__ import annotations

import importlib.util

import pytest

from cueaudit.errors import InputError
from cueaudit.inference.core import Decoding, Request
from cueaudit.inference.sampling import prompt_seed
from cueaudit.inference.vllm_backend import VLLMBackend, _import_vllm, build_requests


def test_requests_carry_per_prompt_seeds_and_task_budget() -> None:
    reqs = [Request("u1", "a", 0), Request("u2", "b", 0), Request("u1", "a", 1)]
    built = build_requests(((r, f"<{r.text}>") for r in reqs), Decoding(max_new_tokens=8))
    assert [b.prompt for b in built] == ["<a>", "<b>", "<a>"]
    first = built[0].sampling
    assert first["max_tokens"] == 8 and first["temperature"] == 1.0 and first["top_k"] == 50
    assert first["seed"] == prompt_seed(0, "u1") % (2**63 - 1)
    assert len({b.sampling["seed"] for b in built}) == 3
    no_top_k = build_requests([(reqs[0], "x")], Decoding(top_k=0))[0].sampling
    assert no_top_k["top_k"] == -1


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_missing_vllm_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="pip install 'cueaudit\\[vllm\\]'"):
        _import_vllm()


def test_vllm_refuses_bitsandbytes_8bit() -> None:
    with pytest.raises(InputError, match="8-bit"):
        VLLMBackend("unused", "id", quantization="8bit")
