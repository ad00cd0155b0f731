"""SAE→AAVE translators behind one interface: ``openai``, ``hf`` and ``rule_based``.

Each translator has a ``name``, a ``model`` and a ``template_hash`` (what the cache keys on)
and translates a batch of sentences into ``(output, rules fired)`` pairs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Protocol

from cueaudit.cues.dialect.rules import RuleBasedAAVE
from cueaudit.errors import InputError

log = logging.getLogger(__name__)

#: The translation prompt of the paper's Appendix A.2, verbatim; ``{text}`` is the sentence.
AAVE_PROMPT: Final = (
    "You are a linguistic translator. Translate the following sentence from Standard American "
    "English to African American Vernacular English (AAVE). Translate it *literally* — do not "
    "add, remove, or rephrase content. Do not change meaning, punctuation, or structure beyond "
    "what is needed for a direct AAVE equivalent.\n\nInput: {text}\nAAVE:"
)
DEFAULT_OPENAI_MODEL: Final = "gpt-5-nano"
TRANSLATORS: Final = ("rule_based", "openai", "hf")

Translated = tuple[str, tuple[str, ...]]


class Translator(Protocol):
    name: str
    model: str

    @property
    def template_hash(self) -> str: ...

    def translate_batch(self, sentences: Sequence[str]) -> list[Translated]: ...


def prompt_hash(template: str) -> str:
    return hashlib.sha256(template.encode("utf-8")).hexdigest()[:16]


def clean_output(text: str) -> str:
    """First non-empty line of a model's answer, without an echoed ``AAVE:`` label or quotes."""
    for line in text.strip().splitlines():
        line = line.strip()
        if line:
            for label in ("AAVE:", "Output:", "Translation:"):
                if line.startswith(label):
                    line = line[len(label) :].strip()
            if len(line) > 1 and line[0] == line[-1] and line[0] in '"“':
                line = line[1:-1]
            return line
    return ""


class RuleBasedTranslator:
    """The offline rule set of :mod:`cueaudit.cues.dialect.rules`."""

    name = "rule_based"

    def __init__(self, seed: int = 0, probabilities: Mapping[str, float] | None = None) -> None:
        self._rules = RuleBasedAAVE(seed, probabilities)
        self.model = self._rules.model

    @property
    def template_hash(self) -> str:
        return self._rules.template_hash

    def translate_batch(self, sentences: Sequence[str]) -> list[Translated]:
        return [(r.text, r.rules) for r in map(self._rules.translate, sentences)]


Post = Callable[[str, Mapping[str, str], bytes], bytes]


def _http_post(url: str, headers: Mapping[str, str], body: bytes) -> bytes:
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
    with urllib.request.urlopen(request, timeout=120) as response:
        return bytes(response.read())


class OpenAITranslator:
    """The paper's set-up: the Appendix A.2 prompt sent to an OpenAI(-compatible) chat API.

    Default hyperparameters (none are sent). ``post`` replaces the HTTP call (tests).
    """

    name = "openai"

    def __init__(
        self,
        model: str = DEFAULT_OPENAI_MODEL,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key_env: str = "OPENAI_API_KEY",
        max_retries: int = 3,
        post: Post | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.max_retries = max_retries
        self._post = post or _http_post

    @property
    def template_hash(self) -> str:
        return prompt_hash(AAVE_PROMPT)

    def request_body(self, sentence: str) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": AAVE_PROMPT.format(text=sentence)}],
        }

    def translate_batch(self, sentences: Sequence[str]) -> list[Translated]:
        key = os.environ.get(self.api_key_env)
        if sentences and not key:
            raise InputError(
                "cues.dialect", f"environment variable {self.api_key_env} is not set", "openai"
            )
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        out: list[Translated] = []
        for sentence in sentences:
            body = json.dumps(self.request_body(sentence)).encode("utf-8")
            for attempt in range(self.max_retries + 1):
                try:
                    raw = self._post(f"{self.base_url}/chat/completions", headers, body)
                    break
                except OSError as exc:
                    if attempt == self.max_retries:
                        raise
                    log.warning("translation request failed (%s); retrying", exc)
                    time.sleep(2**attempt)
            content = json.loads(raw)["choices"][0]["message"]["content"] or ""
            out.append((clean_output(content), ()))
        return out


class HFTranslator:
    """A local chat model (transformers) given the Appendix A.2 prompt; greedy decoding."""

    name = "hf"

    def __init__(self, model_path: str | Path, *, max_new_tokens: int = 96) -> None:
        self.path = Path(model_path)
        if not self.path.is_dir():
            raise InputError(str(self.path), "local model folder not found", "cues.dialect.model")
        self.model = self.path.name
        self.max_new_tokens = max_new_tokens
        self._loaded: tuple[Any, Any] | None = None

    @property
    def template_hash(self) -> str:
        return prompt_hash(f"{AAVE_PROMPT}\x1fgreedy\x1f{self.max_new_tokens}")

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(self.path)
            model = AutoModelForCausalLM.from_pretrained(self.path)
            model.eval()
            self._loaded = (tokenizer, model)
        return self._loaded

    def translate_batch(self, sentences: Sequence[str]) -> list[Translated]:
        if not sentences:
            return []
        import torch

        tokenizer, model = self._load()
        out: list[Translated] = []
        for sentence in sentences:
            messages = [{"role": "user", "content": AAVE_PROMPT.format(text=sentence)}]
            ids = tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
            with torch.no_grad():
                generated = model.generate(
                    **ids,
                    max_new_tokens=self.max_new_tokens,
                    do_sample=False,
                    pad_token_id=tokenizer.eos_token_id,
                )
            new = generated[0, ids["input_ids"].shape[1] :]
            out.append((clean_output(tokenizer.decode(new, skip_special_tokens=True)), ()))
        return out


def make_translator(spec: Mapping[str, Any]) -> Translator:
    """Build the translator a ``cues.dialect`` config block names."""
    kind = spec.get("translator", "rule_based")
    if kind == "rule_based":
        return RuleBasedTranslator(int(spec.get("seed", 0)), spec.get("rule_probabilities"))
    if kind == "openai":
        openai = spec.get("openai") or {}
        return OpenAITranslator(
            spec.get("model") or DEFAULT_OPENAI_MODEL,
            base_url=openai.get("base_url", "https://api.openai.com/v1"),
            api_key_env=openai.get("api_key_env", "OPENAI_API_KEY"),
            max_retries=int(openai.get("max_retries", 3)),
        )
    if kind == "hf":
        if not spec.get("model"):
            raise InputError(
                "config", "the hf translator needs a local model folder", "cues.dialect.model"
            )
        return HFTranslator(spec["model"], max_new_tokens=int(spec.get("max_new_tokens", 96)))
    raise InputError(
        "config",
        f"unknown translator {kind!r}; one of {list(TRANSLATORS)}",
        "cues.dialect.translator",
    )
