"""Hugging Face transformers engine: shared-prefix, length-bucketed, per-prompt-seeded decoding.

How a shard is computed:

1. Every prompt is rendered with the chat template and tokenised once.
2. The token prefix shared by all prompts (the chat-template header) is run through the model
   once; prompts of a group (one cue value, e.g. one dialog history hundreds of tokens long)
   whose shared prefix extends it by at least ``prefix_min_tokens`` get that extension run
   once more, on top of the header's key/value cache. Only the suffixes are then prefilled
   (cueaudit.inference.hf_prefill).
3. Prefixes of similar length are held together in a window (their caches within half the
   token budget), so rows of many small groups share batches: each row's cache is its own
   prefix's key/values, left-padded to the batch's longest prefix. A window's suffixes are
   sorted by length and cut into batches under the token budget (rows × (longest prefix +
   longest suffix + max_new_tokens) key/value slots), not a fixed batch size
   (cueaudit.inference.hf_batching). On CPU the budget's caches take at most 2 GiB; on CUDA
   an out-of-memory error halves the budget and retries the batch.
4. Decoding is a plain loop over the model's forward pass with the key/value cache
   (cueaudit.inference.hf_decoding, cueaudit.inference.hf_forward). Each row draws its tokens
   from its own random stream (cueaudit.inference.sampling), so outputs do not depend on the
   batch; rows that reach end of sequence leave the batch at once. The sampling parameters
   are transformers' (the repetition penalty, then temperature, top-k, top-p and min-p, in
   its order), resolved from the model's generation config unless the config sets them
   (:attr:`HFEngine.sampling_defaults`, cueaudit.inference.core.Decoding.from_config).
   Temperature 0 is greedy decoding: each row takes its argmax (transformers' ``do_sample``
   false); option scores are the same either way.
5. Option scores (``AnswerSpec.options``) come from the same prefill
   (cueaudit.inference.hf_options): a single-token form's log-probability from the first
   decoding step's logits, a multi-token form's by feeding every such form side by side (a
   4D mask keeps them apart) on the batch's own cache in one pass, which is then cut back
   before decoding goes on. :meth:`HFEngine.score` runs the prefill alone.
6. A request with a JSON schema (or a forced tool) decodes under a grammar
   (cueaudit.inference.constrained): its row's disallowed tokens are masked before the
   sampling filters, and the row stops when the grammar is complete. Constrained and free
   rows share batches.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from cueaudit.errors import InputError
from cueaudit.inference.constrained import Grammars, GuidanceGrammars, Matcher
from cueaudit.inference.core import (
    PLAIN_TEXT,
    AnswerSpec,
    Decoding,
    Generation,
    Request,
    forced_tool_calls,
    render_user_turn,
)
from cueaudit.inference.generation_config import generation_defaults, offline_hub
from cueaudit.inference.hf_batching import Prefix, Row, Window, cut_batches, plan_windows
from cueaudit.inference.hf_decoding import decode
from cueaudit.inference.hf_forward import EngineStats, Forward
from cueaudit.inference.hf_loading import (
    check_quantization,
    initial_budget,
    load_kwargs,
    resolve_device,
)
from cueaudit.inference.hf_options import option_scores
from cueaudit.inference.hf_prefill import prefill, stack_prefixes
from cueaudit.inference.sampling import SAMPLER_VERSION

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class HFEngine:
    """A causal language model with its chat template, decoding with shared prefixes."""

    name = "hf"
    scores_options = True
    flush_every_batch = False

    def __init__(
        self,
        model_path: str,
        *,
        model_id: str | None = None,
        dtype: str = "float32",
        device: str = "auto",
        quantization: str = "none",
        compile: bool = False,
        attn_implementation: str | None = None,
        token_budget: int | str = "auto",
        max_batch_size: int = 64,
        prefix_min_tokens: int = 32,
        sampling_defaults: Mapping[str, Any] | None = None,
    ) -> None:
        offline_hub()
        self.device = resolve_device(device)
        check_quantization(quantization, self.device)
        self.model_id = model_id or model_path
        self.dtype, self.quantization = dtype, quantization
        self.max_batch_size = max_batch_size
        self.prefix_min_tokens = prefix_min_tokens
        self._sampling_defaults = dict(sampling_defaults) if sampling_defaults else None
        self.model_path, self._compile = model_path, compile
        self._load_kwargs = load_kwargs(dtype, quantization, attn_implementation, self.device)
        self._requested_budget = token_budget
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id
        self._form_ids: dict[str, list[int]] = {}
        self._grammars: Grammars | None = None
        self._model: Any = None
        self._forward: Forward | None = None
        self.token_budget = 0
        self.stop_ids: set[int] = set()
        self.stats = EngineStats()

    @classmethod
    def from_spec(
        cls, manifest: Mapping[str, Any], spec: Mapping[str, Any], state_dir: Path | None = None
    ) -> HFEngine:
        """The engine of a prepared model (its manifest) and the config's model block.

        ``state_dir`` is accepted for the runner's common signature; this engine keeps no state
        between runs.
        """
        return cls(
            str(manifest["resolved_path"]),
            model_id=manifest["model_id"],
            dtype=spec.get("dtype", "float32"),
            device=spec.get("device", "auto"),
            quantization=spec.get("quantization", "none"),
            compile=spec.get("compile", False),
            attn_implementation=spec.get("attn_implementation"),
            token_budget=spec.get("token_budget", "auto"),
            max_batch_size=spec.get("batch_size", 64),
            prefix_min_tokens=spec.get("prefix_min_tokens", 32),
            sampling_defaults=(manifest.get("generation_config") or {}).get("sampling"),
        )

    @property
    def sampling_defaults(self) -> dict[str, Any]:
        """The model's own sampling parameters (its generation config, framework defaults
        where it sets none), which the config's ``decoding`` block overrides key by key."""
        if self._sampling_defaults is None:
            self._sampling_defaults = generation_defaults(self.model_path)["sampling"]
        return self._sampling_defaults

    @property
    def model(self) -> Any:
        """The model, loaded on first use (a shard answered from the cache never loads it)."""
        if self._model is None:
            model = AutoModelForCausalLM.from_pretrained(self.model_path, **self._load_kwargs)
            if self.quantization == "none":
                model.to(self.device)
            self._model = model.eval()
            self._forward = Forward(model, self.device, self.pad_id, self._compile)
            self.stop_ids = self._stop_ids()
            self.token_budget = initial_budget(model, self.device, self._requested_budget)
        return self._model

    @property
    def forward(self) -> Forward:
        """The model's forward pass over key/value caches (loads the model)."""
        _ = self.model
        assert self._forward is not None
        return self._forward

    # -- set-up -----------------------------------------------------------------------------

    def _stop_ids(self) -> set[int]:
        stops: set[int] = set()
        for source in (self.tokenizer.eos_token_id, self.model.generation_config.eos_token_id):
            if isinstance(source, int):
                stops.add(source)
            elif source:
                stops.update(source)
        return stops

    def form_ids(self, form: str) -> list[int]:
        """The tokens of an option's surface form as it follows the generation prompt."""
        ids = self._form_ids.get(form)
        if ids is None:
            ids = list(self.tokenizer.encode(form, add_special_tokens=False))
            if not ids:
                raise InputError("config", f"option form {form!r} has no tokens", "options")
            self._form_ids[form] = ids
        return ids

    @property
    def grammars(self) -> Grammars:
        """The grammar compiler of constrained requests, built on first use."""
        if self._grammars is None:
            head = self.model.get_output_embeddings()
            vocab = int(getattr(head, "out_features", None) or head.weight.shape[0])
            self._grammars = GuidanceGrammars(self.tokenizer, vocab, sorted(self.stop_ids))
        return self._grammars

    @grammars.setter
    def grammars(self, grammars: Grammars) -> None:
        self._grammars = grammars

    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model": self.model_id,
            "dtype": self.dtype,
            "quantization": self.quantization,
            "sampler": SAMPLER_VERSION,
        }

    def render(self, text: str, answer: AnswerSpec = PLAIN_TEXT) -> str:
        return render_user_turn(self.tokenizer, text, answer.tools)

    # -- running ----------------------------------------------------------------------------

    def plan(self, requests: Sequence[Request], decoding: Decoding) -> tuple[Prefix, list[Window]]:
        """Tokenise the requests; return the chat header and windows of shared prefixes
        (cueaudit.inference.hf_batching.plan_windows)."""
        if not requests:
            return Prefix([]), []
        _ = self.model  # sets the token budget
        texts = [self.render(r.text, r.answer) for r in requests]
        encoded = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        return plan_windows(
            requests,
            [list(ids) for ids in encoded],
            decoding.max_new_tokens,
            self.prefix_min_tokens,
            self.token_budget,
        )

    def generate(
        self, requests: Iterable[Request], decoding: Decoding
    ) -> Iterator[list[tuple[Request, Generation]]]:
        yield from self._answer(
            list(requests), decoding, lambda window, rows: self._run_batch(window, rows, decoding)
        )

    def score(
        self, requests: Iterable[Request]
    ) -> Iterator[list[tuple[Request, dict[str, float]]]]:
        """Option log-probabilities from a prefill of each prompt, with nothing sampled."""
        todo = list(requests)
        longest = max(
            (len(self.form_ids(f)) for r in todo for o in r.answer.options for f in o.forms),
            default=1,
        )
        # Batches are cut as if the longest form were generated: its tokens take cache slots.
        yield from self._answer(todo, Decoding(max_new_tokens=longest), self._score_batch)

    def _answer(
        self,
        requests: list[Request],
        decoding: Decoding,
        run: Callable[[Window, list[Row]], list[_T]],
    ) -> Iterator[list[_T]]:
        """Run the planned batches window by window; on CUDA OOM halve the budget and retry."""
        header, windows = self.plan(requests, decoding)
        for window in windows:
            stack_prefixes(self.forward, window, header, self.stats)
            pending = cut_batches(
                window, decoding.max_new_tokens, self.token_budget, self.max_batch_size
            )
            while pending:
                batch = pending.pop(0)
                try:
                    results = run(window, batch)
                except torch.cuda.OutOfMemoryError:
                    if len(batch) == 1:
                        raise
                    self._back_off(len(batch))
                    half = len(batch) // 2
                    pending[:0] = [batch[:half], batch[half:]]
                    continue
                yield results
            window.layers = None  # release the window's caches before the next

    def _back_off(self, rows: int) -> None:
        torch.cuda.empty_cache()
        self.token_budget = max(1, self.token_budget // 2)
        self.stats.oom_backoffs += 1
        log.warning("out of memory at %d rows: token budget now %d", rows, self.token_budget)

    def _matcher(self, answer: AnswerSpec) -> Matcher | None:
        """The grammar of a constrained request: a forced tool's arguments, else its schema."""
        tool = answer.forced_tool
        schema = tool.parameters_json if tool is not None else answer.json_schema
        return self.grammars.matcher(schema) if schema is not None else None

    @torch.inference_mode()
    def _run_batch(
        self, window: Window, rows: list[Row], decoding: Decoding
    ) -> list[tuple[Request, Generation]]:
        tick = time.perf_counter()
        forward = self.forward
        state = prefill(forward, window, rows, decoding.max_new_tokens, self.stats)
        scores = option_scores(forward, rows, state, self.form_ids, self.token_budget, self.stats)
        matchers = [self._matcher(row.request.answer) for row in rows]
        tokens, stopped = decode(
            forward, rows, state, decoding, matchers, self.stop_ids, self.stats
        )
        per_prompt = (time.perf_counter() - tick) / len(rows)
        return [
            (row.request, self._result(row, tokens[i], stopped[i], scores[i], per_prompt))
            for i, row in enumerate(rows)
        ]

    @torch.inference_mode()
    def _score_batch(
        self, window: Window, rows: list[Row]
    ) -> list[tuple[Request, dict[str, float]]]:
        forward = self.forward
        state = prefill(forward, window, rows, 0, self.stats)
        scores = option_scores(forward, rows, state, self.form_ids, self.token_budget, self.stats)
        return [(row.request, s or {}) for row, s in zip(rows, scores, strict=True)]

    def _result(
        self,
        row: Row,
        tokens: list[int],
        stopped: bool,
        scores: dict[str, float] | None,
        seconds: float,
    ) -> Generation:
        answer = row.request.answer
        kept = tokens[:-1] if tokens and tokens[-1] in self.stop_ids else tokens
        completion = self.tokenizer.decode(kept, skip_special_tokens=True)
        return Generation(
            completion=completion,
            prompt_tokens=len(row.ids),
            completion_tokens=len(tokens),
            finish_reason="stop" if stopped else "length",
            option_logprobs=scores,
            tool_calls=forced_tool_calls(answer, completion),
            constrained=answer.constrained,
            seconds=seconds,
        )
