"""Loading a model for the HF engine: device, quantization, and the token budget it sizes."""

from __future__ import annotations

import logging
from typing import Any

import torch

from cueaudit.errors import InputError

log = logging.getLogger(__name__)

QUANTIZATIONS = ("none", "8bit", "4bit")
#: What the key/value caches of one CPU batch may take (``token_budget: auto``).
CPU_CACHE_BYTES = 2 * 1024**3


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(
            "config", f"device '{device}' requested but no CUDA GPU is visible", "device"
        )
    return device


def check_quantization(quantization: str, device: str) -> None:
    """8-bit and 4-bit weights need bitsandbytes on CUDA; never fall back silently."""
    if quantization not in QUANTIZATIONS:
        raise InputError("config", f"unknown quantization '{quantization}'", "quantization")
    if quantization != "none" and not device.startswith("cuda"):
        raise InputError(
            "config",
            f"quantization '{quantization}' loads weights through bitsandbytes, which needs a "
            f"CUDA GPU, but this job runs on '{device}'. Set quantization: none (the model then "
            "runs in its configured dtype) or run the job on a GPU node",
            "quantization",
        )


def load_kwargs(
    dtype: str, quantization: str, attn_implementation: str | None, device: str
) -> dict[str, Any]:
    """``AutoModelForCausalLM.from_pretrained``'s arguments (a quantized model is placed on
    ``device`` as it loads; the others are moved there after)."""
    torch_dtype: Any = "auto" if dtype == "auto" else getattr(torch, dtype)
    kwargs: dict[str, Any] = {"dtype": torch_dtype}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    if quantization != "none":
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = (
            BitsAndBytesConfig(load_in_8bit=True)
            if quantization == "8bit"
            else BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_quant_type="nf4",
                bnb_4bit_compute_dtype=torch.bfloat16,
            )
        )
        kwargs["device_map"] = {"": device}
    return kwargs


def slot_bytes(model: Any) -> int:
    """Bytes of one key/value slot over all layers, in the model's dtype."""
    cfg = model.config
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return 2 * cfg.num_hidden_layers * heads * head_dim * model.dtype.itemsize


def initial_budget(model: Any, device: str, token_budget: int | str) -> int:
    """The key/value slots of one batch: ``token_budget``, or for ``"auto"`` what fits."""
    if token_budget != "auto":
        return int(token_budget)
    per_slot = slot_bytes(model)
    if not device.startswith("cuda"):
        # Key/value caches of at most 2 GiB: decoding steps cost a pass over the weights
        # whatever the rows, so wide batches matter (16,384 slots held SmolLM2's dialog
        # prompts to 26 rows); the clamp keeps large models' batches in a CPU job's memory.
        return min(max(CPU_CACHE_BYTES // per_slot, 4096), 65536)
    # Key/value slots that fit in 70% of free memory; OOM back-off corrects an overshoot.
    free, _ = torch.cuda.mem_get_info(torch.device(device))
    budget = int(0.7 * free / (per_slot * 1.5))
    log.info("CUDA token budget probe: %d key/value slots", budget)
    return max(budget, 256)
