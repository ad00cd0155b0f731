"""Hugging Face transformers engine: shared-prefix, length-bucketed, per-prompt-seeded decoding.

How a shard is computed:

1. Every prompt is rendered with the chat template and tokenised once.
2. The token prefix shared by all prompts (the chat-template header) is run through the model
   once; prompts of a group (one cue value, e.g. one dialog history hundreds of tokens long)
   whose shared prefix extends it by at least ``prefix_min_tokens`` get that extension run
   once more, on top of the header's key/value cache. Only the suffixes are then prefilled.
3. Prefixes of similar length are held together in a window (their caches within half the
   token budget), so rows of many small groups share batches: each row's cache is its own
   prefix's key/values, left-padded to the batch's longest prefix. A window's suffixes are
   sorted by length and cut into batches under the token budget (rows × (longest prefix +
   longest suffix + max_new_tokens) key/value slots), not a fixed batch size. On CPU the
   budget's caches take at most 2 GiB; on CUDA an out-of-memory error halves the budget and
   retries the batch.
4. Decoding is a plain loop over the model's forward pass with the key/value cache. Each row
   draws its tokens from its own random stream (cueaudit.inference.sampling), so outputs do not
   depend on the batch; rows that reach end of sequence leave the batch at once. The sampling
   parameters are transformers' (temperature, top-k, top-p, min-p, repetition penalty, in
   its order), resolved from the model's generation config unless the config sets them
   (:attr:`HFEngine.sampling_defaults`, cueaudit.inference.core.Decoding.from_config).
5. Option scores (``AnswerSpec.options``) come from the same prefill: a single-token form's
   log-probability from the first decoding step's logits, a multi-token form's by feeding
   every such form side by side (a 4D mask keeps them apart) on the batch's own cache in one
   pass, which is then cut back before decoding goes on. :meth:`HFEngine.score` runs the
   prefill alone.
6. A request with a JSON schema (or a forced tool) decodes under a grammar
   (cueaudit.inference.constrained): its row's disallowed tokens are masked before the
   sampling filters, and the row stops when the grammar is complete. Constrained and free
   rows share batches.
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache
from transformers.cache_utils import DynamicLayer

from cueaudit.errors import InputError
from cueaudit.inference.constrained import Grammars, GuidanceGrammars, Matcher, mask_logits
from cueaudit.inference.core import (
    PLAIN_TEXT,
    AnswerSpec,
    Decoding,
    Generation,
    Request,
    ToolCall,
    render_user_turn,
)
from cueaudit.inference.sampling import (
    SAMPLER_VERSION,
    SamplingParams,
    filtered_probs,
    penalise_repeats,
    sample_tokens,
)
from cueaudit.inference.seeding import prompt_uniforms
from cueaudit.models import generation_defaults, offline_hub

log = logging.getLogger(__name__)
_T = TypeVar("_T")

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


@dataclass
class EngineStats:
    """Work actually done, for the log line and the benchmark."""

    prompts: int = 0
    batches: int = 0
    prefix_tokens: int = 0  # shared prefixes computed once
    suffix_tokens: int = 0  # real suffix tokens prefilled
    padded_suffix_tokens: int = 0  # suffix slots prefilled including left padding
    decode_steps: int = 0
    oom_backoffs: int = 0
    budgets: list[int] = field(default_factory=list)
    form_tokens: int = 0  # tokens of multi-token option forms fed on copied caches

    @property
    def prefill_tokens(self) -> int:
        return self.prefix_tokens + self.padded_suffix_tokens


@dataclass
class _Prefix:
    """A token prefix shared by some prompts; its key/value cache is computed once."""

    ids: list[int]
    #: Per layer (keys, values) of shape [1, heads, len(ids), head_dim] once computed.
    layers: list[tuple[torch.Tensor, torch.Tensor]] | None = None


@dataclass
class _Row:
    request: Request
    ids: list[int]
    uniforms: torch.Tensor
    prefix: _Prefix

    @property
    def suffix_length(self) -> int:
        return len(self.ids) - len(self.prefix.ids)


@dataclass
class _Window:
    """Prefixes whose caches are held together, and the rows decoded on top of them."""

    prefixes: list[_Prefix]
    rows: list[_Row]
    #: Per layer (keys, values) of all prefixes, left-padded to the longest: [prefixes, ...].
    layers: list[tuple[torch.Tensor, torch.Tensor]] | None = None

    @property
    def width(self) -> int:
        return max(len(prefix.ids) for prefix in self.prefixes)


@dataclass
class _Prefill:
    """A batch right after its prompts were prefilled."""

    logits: torch.Tensor  # [rows, vocab] float64: the first decoding step's logits
    cache: Any  # the batch's key/value cache, which decoding extends
    mask: torch.Tensor  # [rows, cached slots] attention mask (CPU)
    next_pos: torch.Tensor  # [rows] position of each row's first new token


class _AppendLayer(DynamicLayer):
    """A key/value layer in a buffer sized for the whole decode: each step writes in place.

    transformers' DynamicLayer concatenates the cache with every new token, copying all of it
    at each decoding step (measured: 40% of a CPU decoding step at 22 rows × 550 slots).
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> None:
        super().__init__()
        rows, heads, length, dim = keys.shape
        self._keys = keys.new_empty((rows, heads, max(capacity, length), dim))
        self._values = values.new_empty((rows, heads, max(capacity, length), values.shape[-1]))
        self._keys[:, :, :length] = keys
        self._values[:, :, :length] = values
        self.length = length
        self.device = keys.device
        self.is_initialized = True
        self._expose()

    def _expose(self) -> None:
        self.keys = self._keys[:, :, : self.length]
        self.values = self._values[:, :, : self.length]

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + key_states.shape[-2]
        if end > self._keys.shape[-2]:
            grow = end - self._keys.shape[-2] + self._keys.shape[-2] // 2
            self._keys = torch.nn.functional.pad(self._keys, (0, 0, 0, grow))
            self._values = torch.nn.functional.pad(self._values, (0, 0, 0, grow))
        self._keys[:, :, self.length : end] = key_states
        self._values[:, :, self.length : end] = value_states
        self.length = end
        self._expose()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def truncate(self, max_length: int) -> None:
        """Forget every slot from ``max_length`` on (the buffer is kept and overwritten)."""
        self.length = min(self.length, max_length)
        self._expose()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._keys = self._keys[indices]
        self._values = self._values[indices]
        self._expose()


def common_prefix_length(sequences: Sequence[Sequence[int]]) -> int:
    if not sequences:
        return 0
    first = sequences[0]
    n = min(len(s) for s in sequences)
    for seq in sequences[1:]:
        i = 0
        while i < n and seq[i] == first[i]:
            i += 1
        n = i
    return n


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
            kwargs["device_map"] = {"": self.device}
        self.model_path, self._load_kwargs, self._compile = model_path, kwargs, compile
        self._requested_budget = token_budget
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id
        self._form_ids: dict[str, list[int]] = {}
        self._grammars: Grammars | None = None
        self._model: Any = None
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
            self._forward = model.forward
            if self._compile:
                self._forward = torch.compile(model.forward, dynamic=True)
            params = inspect.signature(model.forward).parameters
            self._cache_arg = "cache" if "cache" in params else "past_key_values"
            # Sliding-window and other special cache layers keep transformers' own update.
            self._append_in_place = all(
                type(layer) is DynamicLayer for layer in DynamicCache(config=model.config).layers
            )
            self.stop_ids = self._stop_ids()
            self.token_budget = self._initial_budget(self._requested_budget)
        return self._model

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

    def _initial_budget(self, token_budget: int | str) -> int:
        if token_budget != "auto":
            return int(token_budget)
        per_slot = self._slot_bytes()
        if not self.device.startswith("cuda"):
            # Key/value caches of at most 2 GiB: decoding steps cost a pass over the weights
            # whatever the rows, so wide batches matter (16,384 slots held SmolLM2's dialog
            # prompts to 26 rows); the clamp keeps large models' batches in a CPU job's memory.
            return min(max(CPU_CACHE_BYTES // per_slot, 4096), 65536)
        # Key/value slots that fit in 70% of free memory; OOM back-off corrects an overshoot.
        free, _ = torch.cuda.mem_get_info(torch.device(self.device))
        budget = int(0.7 * free / (per_slot * 1.5))
        log.info("CUDA token budget probe: %d key/value slots", budget)
        return max(budget, 256)

    def _slot_bytes(self) -> int:
        """Bytes of one key/value slot over all layers, in the model's dtype."""
        cfg = self.model.config
        heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        return 2 * cfg.num_hidden_layers * heads * head_dim * self.model.dtype.itemsize

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

    # -- planning ---------------------------------------------------------------------------

    def plan(
        self, requests: Sequence[Request], decoding: Decoding
    ) -> tuple[_Prefix, list[_Window]]:
        """Tokenise the requests; return the chat header and windows of shared prefixes.

        Each row starts from one prefix: its group's (one cue value, e.g. a dialog history)
        when that extends the chat header by at least ``prefix_min_tokens``, else the header.
        Prefixes of similar length (at most twice the window's shortest) are gathered into one
        window while their padded caches fit in half the token budget, so the rows of many
        small groups are decoded in the same batches while only a bounded number of prefix
        caches is held.
        """
        if not requests:
            return _Prefix([]), []
        _ = self.model  # sets the token budget
        texts = [self.render(r.text, r.answer) for r in requests]
        encoded = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        ids_of = [list(ids) for ids in encoded]
        # Every row keeps at least one token out of any prefix, so it has logits to sample.
        shortest = min(len(ids) for ids in ids_of)
        header = _Prefix(ids_of[0][: min(common_prefix_length(ids_of), shortest - 1)])
        by_group: dict[str, list[int]] = {}
        for i, request in enumerate(requests):
            by_group.setdefault(request.group, []).append(i)
        prefix_of: list[_Prefix] = [header] * len(requests)
        for group in sorted(by_group):
            members = by_group[group]
            shared = common_prefix_length([ids_of[i] for i in members])
            shared = min(shared, min(len(ids_of[i]) for i in members) - 1)
            if group and len(members) > 1 and shared - len(header.ids) >= self.prefix_min_tokens:
                prefix = _Prefix(ids_of[members[0]][:shared])
                for i in members:
                    prefix_of[i] = prefix
        rows = [
            _Row(
                r,
                ids,
                torch.from_numpy(prompt_uniforms(r.seed, r.uid, decoding.max_new_tokens)),
                prefix,
            )
            for r, ids, prefix in zip(requests, ids_of, prefix_of, strict=True)
        ]
        rows_of: dict[int, list[_Row]] = {}
        prefixes: dict[int, _Prefix] = {}
        for row in rows:
            rows_of.setdefault(id(row.prefix), []).append(row)
            prefixes[id(row.prefix)] = row.prefix
        ordered = sorted(
            prefixes.values(), key=lambda pf: (len(pf.ids), rows_of[id(pf)][0].request.uid)
        )
        # A window's stacked caches (prefixes × its longest prefix) take at most half the
        # token budget, so they and a full batch fit in the memory the budget was sized for.
        held_slots = max(self.token_budget // 2, 1)
        windows: list[_Window] = []
        for prefix in ordered:  # ascending: each prefix is its window's longest so far
            if (
                not windows
                or len(prefix.ids) > 2 * len(windows[-1].prefixes[0].ids)
                or (len(windows[-1].prefixes) + 1) * len(prefix.ids) > held_slots
            ):
                windows.append(_Window([], []))
            windows[-1].prefixes.append(prefix)
            windows[-1].rows.extend(rows_of[id(prefix)])
        return header, windows

    def batches(self, window: _Window, max_new_tokens: int, budget: int) -> list[list[_Row]]:
        """Suffix-length-sorted batches whose key/value slots stay under ``budget``.

        A batch's slots are rows × (longest prefix + longest suffix + ``max_new_tokens``):
        shorter prefixes and suffixes are left-padded.
        """
        ordered = sorted(
            window.rows, key=lambda r: (r.suffix_length, len(r.prefix.ids), r.request.uid)
        )
        out: list[list[_Row]] = []
        current: list[_Row] = []
        longest_prefix = longest_suffix = 0
        for row in ordered:
            prefix = max(longest_prefix, len(row.prefix.ids))
            suffix = max(longest_suffix, row.suffix_length)
            width = prefix + suffix + max_new_tokens
            if current and (
                (len(current) + 1) * width > budget or len(current) >= self.max_batch_size
            ):
                out.append(current)
                current = []
                prefix, suffix = len(row.prefix.ids), row.suffix_length
            current.append(row)
            longest_prefix, longest_suffix = prefix, suffix
        if current:
            out.append(current)
        return out

    # -- running ----------------------------------------------------------------------------

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
        run: Callable[[_Window, list[_Row]], list[_T]],
    ) -> Iterator[list[_T]]:
        """Run the planned batches window by window; on CUDA OOM halve the budget and retry."""
        header, windows = self.plan(requests, decoding)
        if windows:
            self._compute_prefix(header, None)
        for window in windows:
            self._stack_prefixes(window, header)
            pending = self.batches(window, decoding.max_new_tokens, self.token_budget)
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

    def _call(self, **kwargs: Any) -> Any:
        cache = kwargs.pop("cache", None)
        if cache is not None:
            kwargs[self._cache_arg] = cache
        return self._forward(use_cache=True, **kwargs)

    @staticmethod
    def _out_cache(out: Any) -> Any:
        return getattr(out, "cache", None) or out.past_key_values

    def _new_cache(self, layers: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> Any:
        return DynamicCache(ddp_cache_data=layers, config=self.model.config)

    @torch.inference_mode()
    def _compute_prefix(self, prefix: _Prefix, base: _Prefix | None) -> None:
        """Fill ``prefix.layers`` (batch 1), extending ``base``'s cache if given."""
        if prefix.layers is not None:
            return
        start, cache = 0, None
        if base is not None and base.layers:
            start, cache = len(base.ids), self._new_cache(base.layers)
        if len(prefix.ids) == start:
            prefix.layers = list(base.layers) if base is not None and base.layers else []
            return
        ids = torch.tensor([prefix.ids[start:]], device=self.device)
        positions = torch.arange(start, len(prefix.ids), device=self.device).unsqueeze(0)
        mask = torch.ones((1, len(prefix.ids)), dtype=torch.long, device=self.device)
        out = self._call(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            cache=cache,
            logits_to_keep=1,
        )
        self.stats.prefix_tokens += len(prefix.ids) - start
        prefix.layers = [(layer.keys, layer.values) for layer in self._out_cache(out).layers]

    def _stack_prefixes(self, window: _Window, header: _Prefix) -> None:
        """Compute the window's prefixes and stack their caches, left-padded to its longest."""
        for prefix in window.prefixes:
            self._compute_prefix(prefix, header)
        width = window.width
        if width == 0:
            return
        stacked = []
        for layer in range(len(window.prefixes[0].layers or [])):
            pair = []
            for kind in (0, 1):
                parts = []
                for prefix in window.prefixes:
                    tensor = (prefix.layers or [])[layer][kind]
                    pad = width - tensor.shape[-2]
                    parts.append(torch.nn.functional.pad(tensor, (0, 0, pad, 0)) if pad else tensor)
                pair.append(torch.cat(parts) if len(parts) > 1 else parts[0])
            stacked.append((pair[0], pair[1]))
        window.layers = stacked
        for prefix in window.prefixes:
            if prefix is not header:
                prefix.layers = None  # the stacked copy is kept instead

    def _batch_cache(self, window: _Window, rows: list[_Row], width: int, capacity: int) -> Any:
        """Each row's prefix key/values, left-padded to ``width`` slots, as one cache.

        ``capacity`` is the number of slots the batch will fill (prefix, suffix and new tokens).
        """
        if width == 0 or not window.layers:
            return None
        slot = {id(prefix): i for i, prefix in enumerate(window.prefixes)}
        index = torch.tensor([slot[id(row.prefix)] for row in rows], device=self.device)
        start = window.width - width
        layers = [
            (keys[:, :, start:].index_select(0, index), values[:, :, start:].index_select(0, index))
            for keys, values in window.layers
        ]
        if not self._append_in_place:
            return self._new_cache(layers)
        cache = self._new_cache([])
        cache.layers = [_AppendLayer(k, v, capacity) for k, v in layers]
        return cache

    @torch.inference_mode()
    def _prefill(self, window: _Window, rows: list[_Row], new_tokens: int) -> _Prefill:
        """Prefill the rows' suffixes on their prefixes' caches (left-padded to one width)."""
        n = len(rows)
        prefix_lengths = [len(row.prefix.ids) for row in rows]
        p = max(prefix_lengths)
        suffixes = [row.ids[len(row.prefix.ids) :] for row in rows]
        width = max(len(s) for s in suffixes)
        input_ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        prefix_mask = torch.zeros((n, p), dtype=torch.long)
        suffix_mask = torch.zeros((n, width), dtype=torch.long)
        for i, (suffix, length) in enumerate(zip(suffixes, prefix_lengths, strict=True)):
            input_ids[i, width - len(suffix) :] = torch.tensor(suffix)
            suffix_mask[i, width - len(suffix) :] = 1
            prefix_mask[i, p - length :] = 1
        starts = torch.tensor(prefix_lengths).unsqueeze(1)
        positions = torch.maximum(starts + suffix_mask.cumsum(-1) - 1, starts)
        mask = torch.cat([prefix_mask, suffix_mask], dim=1)
        cache = self._batch_cache(window, rows, p, p + width + new_tokens)
        dev = self.device
        out = self._call(
            input_ids=input_ids.to(dev),
            attention_mask=mask.to(dev),
            position_ids=positions.to(dev),
            cache=cache,
            logits_to_keep=1,
        )
        self.stats.suffix_tokens += sum(len(s) for s in suffixes)
        self.stats.padded_suffix_tokens += n * width
        self.stats.batches += 1
        self.stats.prompts += n
        next_pos = torch.tensor([len(row.ids) for row in rows])
        return _Prefill(out.logits[:, -1, :].double(), self._out_cache(out), mask, next_pos)

    def _option_scores(self, rows: list[_Row], state: _Prefill) -> list[dict[str, float] | None]:
        """Per row, {option key: log of the summed probability of its forms} (None: no options).

        Must run before decoding: multi-token forms are fed on copies of the prefilled cache.
        """
        if not any(row.request.answer.options for row in rows):
            return [None] * len(rows)
        first = torch.log_softmax(state.logits, dim=-1).cpu()
        logprob: dict[tuple[int, str], float] = {}
        longer: list[tuple[int, str]] = []
        for i, row in enumerate(rows):
            forms = dict.fromkeys(f for o in row.request.answer.options for f in o.forms)
            for form in forms:
                ids = self.form_ids(form)
                if len(ids) == 1:
                    logprob[(i, form)] = float(first[i, ids[0]])
                else:
                    longer.append((i, form))
        logprob.update(self._continuation_logprobs(longer, first, state))
        return [
            {
                o.key(): _logsumexp([logprob[(i, f)] for f in o.forms])
                for o in row.request.answer.options
            }
            if row.request.answer.options
            else None
            for i, row in enumerate(rows)
        ]

    def _continuation_logprobs(
        self, pairs: list[tuple[int, str]], first: torch.Tensor, state: _Prefill
    ) -> dict[tuple[int, str], float]:
        """log P(form | prompt) of (row, multi-token form) pairs, from copies of row caches.

        The form's first token is read from the first decoding step; the rest by feeding the
        form, right-padded, on a copy (``index_select``) of its row's cache, which decoding
        later extends in place.
        """
        scores: dict[tuple[int, str], float] = {}
        if not pairs:
            return scores
        if state.cache is not None and all(
            isinstance(layer, _AppendLayer) for layer in state.cache.layers
        ):
            return self._continuation_logprobs_in_place(pairs, first, state)
        dev = self.device
        longest = max(len(self.form_ids(form)) for _, form in pairs)
        chunk = max(1, self.token_budget // (state.mask.shape[1] + longest))
        for start in range(0, len(pairs), chunk):
            part = pairs[start : start + chunk]
            forms = [self.form_ids(form) for _, form in part]
            width = max(len(ids) for ids in forms) - 1
            feed = torch.full((len(part), width), self.pad_id, dtype=torch.long)
            targets = torch.zeros((len(part), width), dtype=torch.long)
            feed_mask = torch.zeros((len(part), width), dtype=torch.long)
            for j, ids in enumerate(forms):
                feed[j, : len(ids) - 1] = torch.tensor(ids[:-1])
                targets[j, : len(ids) - 1] = torch.tensor(ids[1:])
                feed_mask[j, : len(ids) - 1] = 1
            index = torch.tensor([i for i, _ in part])
            out = self._call(
                input_ids=feed.to(dev),
                attention_mask=torch.cat([state.mask[index], feed_mask], dim=1).to(dev),
                position_ids=(state.next_pos[index].unsqueeze(1) + torch.arange(width)).to(dev),
                cache=self._copy_rows(state.cache, index.to(dev)),
            )
            logits = out.logits.float()
            picked = logits.gather(-1, targets.to(dev).unsqueeze(-1)).squeeze(-1)
            steps = (picked - logits.logsumexp(-1)).double().cpu() * feed_mask
            self.stats.form_tokens += int(feed_mask.sum())
            for j, ((i, form), ids) in enumerate(zip(part, forms, strict=True)):
                scores[(i, form)] = float(first[i, ids[0]]) + float(steps[j].sum())
        return scores

    def _continuation_logprobs_in_place(
        self, pairs: list[tuple[int, str]], first: torch.Tensor, state: _Prefill
    ) -> dict[tuple[int, str], float]:
        """As :meth:`_continuation_logprobs`, in one forward pass and without copying caches.

        Every distinct multi-token form is fed to every row at once, side by side after the
        prompt, on the batch's own cache: a 4D mask lets each form's tokens see the row's
        prompt and the form's earlier tokens only. The cache is then cut back to the prompt
        (decoding overwrites those slots). A copy of the whole cache per (row, form) pair took
        a quarter of a race-prediction shard's time; this pass takes about 7%.
        """
        dev = self.device
        forms = list(dict.fromkeys(form for _, form in pairs))
        feeds = [self.form_ids(form)[:-1] for form in forms]
        starts = [sum(len(f) for f in feeds[:k]) for k in range(len(feeds))]
        width = sum(len(f) for f in feeds)
        n, cached = state.mask.shape
        # Which fed token may see which: a form's own earlier tokens (and itself).
        segment = torch.tensor([k for k, f in enumerate(feeds) for _ in f])
        offset = torch.tensor([j for f in feeds for j in range(len(f))])
        own = (segment[:, None] == segment[None, :]) & (offset[None, :] <= offset[:, None])
        visible = torch.cat(
            [state.mask.bool()[:, None, :].expand(n, width, cached), own.expand(n, width, width)],
            dim=2,
        )
        dtype = self.model.dtype
        mask = torch.zeros(visible.shape, dtype=dtype).masked_fill_(
            ~visible, torch.finfo(dtype).min
        )
        out = self._call(
            input_ids=torch.tensor([[t for f in feeds for t in f]] * n, device=dev),
            attention_mask=mask.unsqueeze(1).to(dev),
            position_ids=(state.next_pos.unsqueeze(1) + offset).to(dev),
            cache=state.cache,
        )
        for layer in state.cache.layers:
            layer.truncate(cached)
        # Each fed token's log-probability of the form's next token (only [rows, fed] leaves
        # the device, not the vocabulary-wide logits).
        targets = torch.tensor([t for form in forms for t in self.form_ids(form)[1:]], device=dev)
        logits = out.logits.float()
        picked = logits.gather(-1, targets.expand(n, width).unsqueeze(-1)).squeeze(-1)
        steps = (picked - logits.logsumexp(-1)).double().cpu()
        self.stats.form_tokens += sum(len(self.form_ids(form)) - 1 for _, form in pairs)
        scores: dict[tuple[int, str], float] = {}
        for i, form in pairs:
            at, length = starts[forms.index(form)], len(self.form_ids(form)) - 1
            scores[(i, form)] = float(first[i, self.form_ids(form)[0]]) + float(
                steps[i, at : at + length].sum()
            )
        return scores

    def _copy_rows(self, cache: Any, index: torch.Tensor) -> Any:
        return self._new_cache(
            [
                (layer.keys.index_select(0, index), layer.values.index_select(0, index))
                for layer in cache.layers
            ]
        )

    def _matcher(self, answer: AnswerSpec) -> Matcher | None:
        """The grammar of a constrained request: a forced tool's arguments, else its schema."""
        tool = answer.forced_tool
        schema = tool.parameters_json if tool is not None else answer.json_schema
        return self.grammars.matcher(schema) if schema is not None else None

    @torch.inference_mode()
    def _run_batch(
        self, window: _Window, rows: list[_Row], decoding: Decoding
    ) -> list[tuple[Request, Generation]]:
        tick = time.perf_counter()
        state = self._prefill(window, rows, decoding.max_new_tokens)
        scores = self._option_scores(rows, state)
        tokens, stopped = self._decode(rows, state, decoding)
        per_prompt = (time.perf_counter() - tick) / len(rows)
        return [
            (row.request, self._result(row, tokens[i], stopped[i], scores[i], per_prompt))
            for i, row in enumerate(rows)
        ]

    @torch.inference_mode()
    def _score_batch(
        self, window: _Window, rows: list[_Row]
    ) -> list[tuple[Request, dict[str, float]]]:
        scores = self._option_scores(rows, self._prefill(window, rows, 0))
        return [(row.request, s or {}) for row, s in zip(rows, scores, strict=True)]

    def _decode(
        self, rows: list[_Row], state: _Prefill, decoding: Decoding
    ) -> tuple[list[list[int]], list[bool]]:
        """Sample each row's tokens from its own uniforms; a row leaves the batch when it ends.

        A row ends on a stop token or when its grammar is complete.
        """
        n = len(rows)
        matchers = [self._matcher(row.request.answer) for row in rows]
        logits, cache, mask, next_pos = state.logits, state.cache, state.mask, state.next_pos
        params = SamplingParams(
            decoding.temperature,
            decoding.top_p,
            decoding.top_k,
            decoding.min_p,
            decoding.repetition_penalty,
        )
        uniforms = torch.stack([row.uniforms for row in rows])
        active = list(range(n))
        tokens: list[list[int]] = [[] for _ in range(n)]
        stopped = [False] * n
        dev = self.device
        seen = self._seen_tokens(rows, logits) if params.penalises_repeats else None
        for step in range(decoding.max_new_tokens):
            self.stats.decode_steps += 1
            if seen is not None:
                logits = penalise_repeats(logits, seen[active], params.repetition_penalty)
            mask_logits(logits, [matchers[i] for i in active])
            probs = filtered_probs(logits, params)
            drawn = sample_tokens(probs, uniforms[active, step].to(probs.device)).tolist()
            if seen is not None:
                at = seen.device
                seen[torch.tensor(active, device=at), torch.tensor(drawn, device=at)] = True
            keep: list[int] = []
            for j, (i, token) in enumerate(zip(active, drawn, strict=True)):
                tokens[i].append(token)
                matcher = matchers[i]
                if matcher is not None:
                    matcher.accept(token)
                if token in self.stop_ids or (matcher is not None and matcher.done):
                    stopped[i] = True
                else:
                    keep.append(j)
            if step == decoding.max_new_tokens - 1 or not keep:
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, device=dev)
                cache.batch_select_indices(index)
                mask = mask[keep]
                next_pos = next_pos[keep]
            active = [active[j] for j in keep]
            feed = torch.tensor([[tokens[i][-1]] for i in active], device=dev)
            mask = torch.cat([mask, torch.ones((len(active), 1), dtype=torch.long)], dim=1)
            out = self._call(
                input_ids=feed,
                attention_mask=mask.to(dev),
                position_ids=next_pos.unsqueeze(1).to(dev),
                cache=cache,
                logits_to_keep=1,
            )
            next_pos = next_pos + 1
            cache = self._out_cache(out)
            logits = out.logits[:, -1, :].double()
        return tokens, stopped

    @staticmethod
    def _seen_tokens(rows: list[_Row], logits: torch.Tensor) -> torch.Tensor:
        """[rows, vocab] mask of each row's prompt tokens, for the repetition penalty."""
        seen = torch.zeros(logits.shape, dtype=torch.bool, device=logits.device)
        for i, row in enumerate(rows):
            seen[i, torch.tensor(row.ids, device=logits.device)] = True
        return seen

    def _result(
        self,
        row: _Row,
        tokens: list[int],
        stopped: bool,
        scores: dict[str, float] | None,
        seconds: float,
    ) -> Generation:
        answer = row.request.answer
        kept = tokens[:-1] if tokens and tokens[-1] in self.stop_ids else tokens
        completion = self.tokenizer.decode(kept, skip_special_tokens=True)
        tool = answer.forced_tool
        return Generation(
            completion=completion,
            prompt_tokens=len(row.ids),
            completion_tokens=len(tokens),
            finish_reason="stop" if stopped else "length",
            option_logprobs=scores,
            tool_calls=(ToolCall(tool.name, _arguments(completion)),) if tool else (),
            constrained=answer.constrained,
            seconds=seconds,
        )


def _logsumexp(values: Sequence[float]) -> float:
    return float(torch.tensor(values, dtype=torch.float64).logsumexp(0))


def _arguments(text: str) -> dict[str, Any] | str:
    """A tool call's parsed arguments; the raw text when it is not a JSON object."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return text
    return parsed if isinstance(parsed, dict) else text
