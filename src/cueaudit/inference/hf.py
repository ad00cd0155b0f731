"""Hugging Face transformers backend: batched chat generation on CPU or GPU."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from cueaudit.errors import InputError
from cueaudit.models import offline_hub

log = logging.getLogger(__name__)

AFFIRMATIVE = ("Yes", "yes", "YES")
NEGATIVE = ("No", "no", "NO")


@dataclass(frozen=True)
class Decoding:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 50
    max_new_tokens: int = 16


@dataclass(frozen=True)
class Generation:
    completion: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    p_yes: float
    p_no: float


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(
            "config", f"device '{device}' requested but no CUDA GPU is visible", "device"
        )
    return device


def batch_seed(seed: int, keys: Sequence[str]) -> int:
    """Sampling seed of one batch, a function of the run seed and the prompts in it."""
    digest = hashlib.sha256(f"{seed}\x1f{'|'.join(keys)}".encode()).hexdigest()
    return int(digest[:15], 16)


class HFGenerator:
    """A causal language model with its chat template, ready for batched sampling."""

    def __init__(self, model_path: str, dtype: str = "float32", device: str = "auto") -> None:
        offline_hub()
        self.device = resolve_device(device)
        torch_dtype: Any = "auto" if dtype == "auto" else getattr(torch, dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch_dtype)
        self.model.to(self.device).eval()
        self.yes_ids = self._first_token_ids(AFFIRMATIVE)
        self.no_ids = self._first_token_ids(NEGATIVE)

    def _first_token_ids(self, words: Sequence[str]) -> list[int]:
        ids = {self.tokenizer.encode(w, add_special_tokens=False)[0] for w in words}
        return sorted(ids)

    def chat_text(self, prompt: str) -> str:
        messages = [{"role": "user", "content": prompt}]
        text: str = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        return text

    def token_lengths(self, prompts: Sequence[str]) -> list[int]:
        encoded = self.tokenizer([self.chat_text(p) for p in prompts], add_special_tokens=False)
        return [len(ids) for ids in encoded["input_ids"]]

    @torch.inference_mode()
    def generate(self, prompts: Sequence[str], decoding: Decoding, seed: int) -> list[Generation]:
        texts = [self.chat_text(p) for p in prompts]
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        enc = enc.to(self.device)
        torch.manual_seed(seed)
        out = self.model.generate(
            **enc,
            do_sample=True,
            temperature=decoding.temperature,
            top_p=decoding.top_p,
            top_k=decoding.top_k,
            max_new_tokens=decoding.max_new_tokens,
            pad_token_id=self.tokenizer.pad_token_id,
            return_dict_in_generate=True,
            output_logits=True,
        )
        first_step = torch.softmax(out.logits[0].float(), dim=-1)
        p_yes = first_step[:, self.yes_ids].sum(dim=-1).tolist()
        p_no = first_step[:, self.no_ids].sum(dim=-1).tolist()
        prompt_lengths = enc["attention_mask"].sum(dim=-1).tolist()
        new_tokens = out.sequences[:, enc["input_ids"].shape[1] :].tolist()
        return [
            self._result(tokens, n_prompt, yes, no)
            for tokens, n_prompt, yes, no in zip(
                new_tokens, prompt_lengths, p_yes, p_no, strict=True
            )
        ]

    def _result(self, tokens: list[int], n_prompt: int, p_yes: float, p_no: float) -> Generation:
        eos = self.tokenizer.eos_token_id
        stops = {eos} if isinstance(eos, int) else set(eos or [])
        end = next((i for i, t in enumerate(tokens) if t in stops), None)
        kept = tokens if end is None else tokens[:end]
        return Generation(
            completion=self.tokenizer.decode(kept, skip_special_tokens=True),
            prompt_tokens=int(n_prompt),
            completion_tokens=len(kept) + (0 if end is None else 1),
            finish_reason="length" if end is None else "stop",
            p_yes=float(p_yes),
            p_no=float(p_no),
        )
