"""The HF engine's prefill: shared prefixes computed once, then each batch's suffixes.

The chat header is run through the model once, each group's prefix once on top of the
header's cache; a window's prefix caches are stacked, left-padded to its longest, and each
batch gathers its rows' prefixes from that stack before its suffixes are prefilled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cueaudit.inference.hf_batching import Prefix, Row, Window
from cueaudit.inference.hf_forward import EngineStats, Forward


@dataclass
class Prefill:
    """A batch right after its prompts were prefilled."""

    logits: torch.Tensor  # [rows, vocab] float64: the first decoding step's logits
    cache: Any  # the batch's key/value cache, which decoding extends
    mask: torch.Tensor  # [rows, cached slots] attention mask (CPU)
    next_pos: torch.Tensor  # [rows] position of each row's first new token


@torch.inference_mode()
def compute_prefix(
    forward: Forward, prefix: Prefix, base: Prefix | None, stats: EngineStats
) -> None:
    """Fill ``prefix.layers`` (batch 1), extending ``base``'s cache if given."""
    if prefix.layers is not None:
        return
    start, cache = 0, None
    if base is not None and base.layers:
        start, cache = len(base.ids), forward.new_cache(base.layers)
    if len(prefix.ids) == start:
        prefix.layers = list(base.layers) if base is not None and base.layers else []
        return
    device = forward.device
    ids = torch.tensor([prefix.ids[start:]], device=device)
    positions = torch.arange(start, len(prefix.ids), device=device).unsqueeze(0)
    mask = torch.ones((1, len(prefix.ids)), dtype=torch.long, device=device)
    out = forward(
        input_ids=ids,
        attention_mask=mask,
        position_ids=positions,
        cache=cache,
        logits_to_keep=1,
    )
    stats.prefix_tokens += len(prefix.ids) - start
    prefix.layers = [(layer.keys, layer.values) for layer in forward.out_cache(out).layers]


def stack_prefixes(forward: Forward, window: Window, header: Prefix, stats: EngineStats) -> None:
    """Compute the header (once) and the window's prefixes on it, and stack their caches,
    left-padded to the window's longest."""
    compute_prefix(forward, header, None, stats)
    for prefix in window.prefixes:
        compute_prefix(forward, prefix, header, stats)
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


def batch_cache(
    forward: Forward, window: Window, rows: list[Row], width: int, capacity: int
) -> Any:
    """Each row's prefix key/values, left-padded to ``width`` slots, as one cache.

    ``capacity`` is the number of slots the batch will fill (prefix, suffix and new tokens).
    """
    if width == 0 or not window.layers:
        return None
    slot = {id(prefix): i for i, prefix in enumerate(window.prefixes)}
    index = torch.tensor([slot[id(row.prefix)] for row in rows], device=forward.device)
    start = window.width - width
    layers = [
        (keys[:, :, start:].index_select(0, index), values[:, :, start:].index_select(0, index))
        for keys, values in window.layers
    ]
    return forward.decoding_cache(layers, capacity)


@torch.inference_mode()
def prefill(
    forward: Forward, window: Window, rows: list[Row], new_tokens: int, stats: EngineStats
) -> Prefill:
    """Prefill the rows' suffixes on their prefixes' caches (left-padded to one width)."""
    n = len(rows)
    prefix_lengths = [len(row.prefix.ids) for row in rows]
    p = max(prefix_lengths)
    suffixes = [row.ids[len(row.prefix.ids) :] for row in rows]
    width = max(len(s) for s in suffixes)
    input_ids = torch.full((n, width), forward.pad_id, dtype=torch.long)
    prefix_mask = torch.zeros((n, p), dtype=torch.long)
    suffix_mask = torch.zeros((n, width), dtype=torch.long)
    for i, (suffix, length) in enumerate(zip(suffixes, prefix_lengths, strict=True)):
        input_ids[i, width - len(suffix) :] = torch.tensor(suffix)
        suffix_mask[i, width - len(suffix) :] = 1
        prefix_mask[i, p - length :] = 1
    starts = torch.tensor(prefix_lengths).unsqueeze(1)
    positions = torch.maximum(starts + suffix_mask.cumsum(-1) - 1, starts)
    mask = torch.cat([prefix_mask, suffix_mask], dim=1)
    cache = batch_cache(forward, window, rows, p, p + width + new_tokens)
    dev = forward.device
    out = forward(
        input_ids=input_ids.to(dev),
        attention_mask=mask.to(dev),
        position_ids=positions.to(dev),
        cache=cache,
        logits_to_keep=1,
    )
    stats.suffix_tokens += sum(len(s) for s in suffixes)
    stats.padded_suffix_tokens += n * width
    stats.batches += 1
    stats.prompts += n
    next_pos = torch.tensor([len(row.ids) for row in rows])
    return Prefill(out.logits[:, -1, :].double(), forward.out_cache(out), mask, next_pos)
