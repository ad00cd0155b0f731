"""The HF engine's forward pass over key/value caches, and the cache layer decoding extends.

Every phase of a batch (shared prefixes, the suffix prefill, option forms, decoding steps)
runs the model through one :class:`Forward`, which knows how this model takes its cache and
whether its cache layers may be extended in place (:class:`AppendLayer`); each phase counts
the work it did in the engine's :class:`EngineStats`.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


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
    form_tokens: int = 0  # tokens of multi-token option forms fed after their prompts

    @property
    def prefill_tokens(self) -> int:
        return self.prefix_tokens + self.padded_suffix_tokens


class AppendLayer(DynamicLayer):
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


class Forward:
    """A loaded causal language model's forward pass with a key/value cache.

    ``pad_id`` fills the padded input slots; ``compile`` runs the pass through
    ``torch.compile``. :attr:`append_in_place` is True when every cache layer of the model is a
    plain DynamicLayer, which :class:`AppendLayer` replaces (sliding-window and other special
    layers keep transformers' own update).
    """

    def __init__(self, model: Any, device: str, pad_id: int, compile: bool = False) -> None:
        self.model, self.device, self.pad_id = model, device, pad_id
        self._forward = torch.compile(model.forward, dynamic=True) if compile else model.forward
        params = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self.append_in_place = all(
            type(layer) is DynamicLayer for layer in DynamicCache(config=model.config).layers
        )

    def __call__(self, **kwargs: Any) -> Any:
        cache = kwargs.pop("cache", None)
        if cache is not None:
            kwargs[self._cache_arg] = cache
        return self._forward(use_cache=True, **kwargs)

    @staticmethod
    def out_cache(out: Any) -> Any:
        return getattr(out, "cache", None) or out.past_key_values

    def new_cache(self, layers: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> Any:
        return DynamicCache(ddp_cache_data=layers, config=self.model.config)

    def decoding_cache(
        self, layers: Sequence[tuple[torch.Tensor, torch.Tensor]], capacity: int
    ) -> Any:
        """A cache of ``layers`` that decoding extends: in buffers of ``capacity`` slots where
        the model allows it (:attr:`append_in_place`), else transformers' own."""
        if not self.append_in_place:
            return self.new_cache(layers)
        cache = self.new_cache([])
        cache.layers = [AppendLayer(k, v, capacity) for k, v in layers]
        return cache

    def copy_rows(self, cache: Any, index: torch.Tensor) -> Any:
        """A new cache of the rows ``index`` of ``cache``."""
        return self.new_cache(
            [
                (layer.keys.index_select(0, index), layer.values.index_select(0, index))
                for layer in cache.layers
            ]
        )
