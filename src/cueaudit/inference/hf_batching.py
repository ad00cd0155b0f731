"""Planning a shard for the HF engine: shared prefixes, windows of them, and batches.

Each row starts from one prefix: its group's (one cue value, e.g. a dialog history) when that
extends the chat header shared by every prompt by at least ``prefix_min_tokens``, else the
header. Prefixes of similar length are held together in a :class:`Window` so the rows of many
small groups share batches, and a window's rows are cut into batches under the token budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from cueaudit.inference.core import Request
from cueaudit.inference.seeding import prompt_uniforms


@dataclass
class Prefix:
    """A token prefix shared by some prompts; its key/value cache is computed once."""

    ids: list[int]
    #: Per layer (keys, values) of shape [1, heads, len(ids), head_dim] once computed.
    layers: list[tuple[torch.Tensor, torch.Tensor]] | None = None


@dataclass
class Row:
    """One request's tokens, its random stream and the prefix it is decoded on."""

    request: Request
    ids: list[int]
    uniforms: torch.Tensor
    prefix: Prefix

    @property
    def suffix_length(self) -> int:
        return len(self.ids) - len(self.prefix.ids)


@dataclass
class Window:
    """Prefixes whose caches are held together, and the rows decoded on top of them."""

    prefixes: list[Prefix]
    rows: list[Row]
    #: Per layer (keys, values) of all prefixes, left-padded to the longest: [prefixes, ...].
    layers: list[tuple[torch.Tensor, torch.Tensor]] | None = None

    @property
    def width(self) -> int:
        return max(len(prefix.ids) for prefix in self.prefixes)


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


def plan_windows(
    requests: Sequence[Request],
    ids_of: Sequence[list[int]],
    max_new_tokens: int,
    prefix_min_tokens: int,
    token_budget: int,
) -> tuple[Prefix, list[Window]]:
    """The chat header and the windows of shared prefixes of tokenised requests.

    ``ids_of`` are the tokens of the (at least one) requests. Prefixes of similar length (at
    most twice the window's shortest) are gathered into one window while their padded caches
    fit in half the token budget, so the rows of many small groups are decoded in the same
    batches while only a bounded number of prefix caches is held.
    """
    # Every row keeps at least one token out of any prefix, so it has logits to sample.
    shortest = min(len(ids) for ids in ids_of)
    header = Prefix(ids_of[0][: min(common_prefix_length(ids_of), shortest - 1)])
    by_group: dict[str, list[int]] = {}
    for i, request in enumerate(requests):
        by_group.setdefault(request.group, []).append(i)
    prefix_of: list[Prefix] = [header] * len(requests)
    for group in sorted(by_group):
        members = by_group[group]
        shared = common_prefix_length([ids_of[i] for i in members])
        shared = min(shared, min(len(ids_of[i]) for i in members) - 1)
        if group and len(members) > 1 and shared - len(header.ids) >= prefix_min_tokens:
            prefix = Prefix(ids_of[members[0]][:shared])
            for i in members:
                prefix_of[i] = prefix
    rows = [
        Row(r, ids, torch.from_numpy(prompt_uniforms(r.seed, r.uid, max_new_tokens)), prefix)
        for r, ids, prefix in zip(requests, ids_of, prefix_of, strict=True)
    ]
    rows_of: dict[int, list[Row]] = {}
    prefixes: dict[int, Prefix] = {}
    for row in rows:
        rows_of.setdefault(id(row.prefix), []).append(row)
        prefixes[id(row.prefix)] = row.prefix
    ordered = sorted(
        prefixes.values(), key=lambda pf: (len(pf.ids), rows_of[id(pf)][0].request.uid)
    )
    # A window's stacked caches (prefixes × its longest prefix) take at most half the
    # token budget, so they and a full batch fit in the memory the budget was sized for.
    held_slots = max(token_budget // 2, 1)
    windows: list[Window] = []
    for prefix in ordered:  # ascending: each prefix is its window's longest so far
        if (
            not windows
            or len(prefix.ids) > 2 * len(windows[-1].prefixes[0].ids)
            or (len(windows[-1].prefixes) + 1) * len(prefix.ids) > held_slots
        ):
            windows.append(Window([], []))
        windows[-1].prefixes.append(prefix)
        windows[-1].rows.extend(rows_of[id(prefix)])
    return header, windows


def cut_batches(
    window: Window, max_new_tokens: int, budget: int, max_batch_size: int
) -> list[list[Row]]:
    """Suffix-length-sorted batches of at most ``max_batch_size`` rows whose key/value slots
    stay under ``budget``.

    A batch's slots are rows × (longest prefix + longest suffix + ``max_new_tokens``):
    shorter prefixes and suffixes are left-padded.
    """
    ordered = sorted(window.rows, key=lambda r: (r.suffix_length, len(r.prefix.ids), r.request.uid))
    out: list[list[Row]] = []
    current: list[Row] = []
    longest_prefix = longest_suffix = 0
    for row in ordered:
        prefix = max(longest_prefix, len(row.prefix.ids))
        suffix = max(longest_suffix, row.suffix_length)
        width = prefix + suffix + max_new_tokens
        if current and ((len(current) + 1) * width > budget or len(current) >= max_batch_size):
            out.append(current)
            current = []
            prefix, suffix = len(row.prefix.ids), row.suffix_length
        current.append(row)
        longest_prefix, longest_suffix = prefix, suffix
    if current:
        out.append(current)
    return out
