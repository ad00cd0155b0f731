"""The HF engine's decoding loop: per-row random streams, grammar masks, early exit.

Each row draws its tokens from its own uniforms (cueaudit.inference.sampling), so outputs do
not depend on the batch; under greedy decoding (temperature 0) each row takes the argmax of
its (penalised, masked) logits instead and draws nothing. The sampling parameters are
transformers' (the repetition penalty, then temperature, top-k, top-p and min-p, in its
order); a constrained row's disallowed tokens are masked after the penalty, before the
filters (cueaudit.inference.constrained). A row leaves the batch at once when it draws a stop
token or its grammar is complete.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import torch

from cueaudit.inference.constrained import Matcher, mask_logits
from cueaudit.inference.core import Decoding
from cueaudit.inference.hf_batching import Row
from cueaudit.inference.hf_forward import EngineStats, Forward
from cueaudit.inference.hf_prefill import Prefill
from cueaudit.inference.sampling import (
    SamplingParams,
    filtered_probs,
    penalise_repeats,
    sample_tokens,
)


def decode(
    forward: Forward,
    rows: list[Row],
    state: Prefill,
    decoding: Decoding,
    matchers: Sequence[Matcher | None],
    stop_ids: Collection[int],
    stats: EngineStats,
) -> tuple[list[list[int]], list[bool]]:
    """Each row's sampled tokens, and whether it stopped (else it reached the token limit).

    ``matchers`` are the rows' grammars (None: free text); a row ends on a token of
    ``stop_ids`` or when its grammar is complete.
    """
    n = len(rows)
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
    dev = forward.device
    seen = seen_tokens(rows, logits) if params.penalises_repeats else None
    for step in range(decoding.max_new_tokens):
        stats.decode_steps += 1
        if seen is not None:
            logits = penalise_repeats(logits, seen[active], params.repetition_penalty)
        mask_logits(logits, [matchers[i] for i in active])
        if params.greedy:  # the first of the most likely tokens (torch's argmax)
            drawn = logits.argmax(dim=-1).tolist()
        else:
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
            if token in stop_ids or (matcher is not None and matcher.done):
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
        out = forward(
            input_ids=feed,
            attention_mask=mask.to(dev),
            position_ids=next_pos.unsqueeze(1).to(dev),
            cache=cache,
            logits_to_keep=1,
        )
        next_pos = next_pos + 1
        cache = forward.out_cache(out)
        logits = out.logits[:, -1, :].double()
    return tokens, stopped


def seen_tokens(rows: list[Row], logits: torch.Tensor) -> torch.Tensor:
    """[rows, vocab] mask of each row's prompt tokens, for the repetition penalty."""
    seen = torch.zeros(logits.shape, dtype=torch.bool, device=logits.device)
    for i, row in enumerate(rows):
        seen[i, torch.tensor(row.ids, device=logits.device)] = True
    return seen
