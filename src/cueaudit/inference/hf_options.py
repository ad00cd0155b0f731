"""Option scores of a prefilled HF batch: log P(form | prompt), summed over an option's forms.

A single-token form's log-probability is read from the first decoding step's logits. The
multi-token forms are fed after the prompt, on the batch's own cache when its layers are
extended in place (every distinct form side by side in one pass under a 4D mask, then the
cache is cut back), else on copies of the rows' caches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from cueaudit.inference.hf_batching import Row
from cueaudit.inference.hf_forward import AppendLayer, EngineStats, Forward
from cueaudit.inference.hf_prefill import Prefill

#: The tokens of an option's surface form as it follows the generation prompt.
FormIds = Callable[[str], list[int]]


def option_scores(
    forward: Forward,
    rows: list[Row],
    state: Prefill,
    form_ids: FormIds,
    token_budget: int,
    stats: EngineStats,
) -> list[dict[str, float] | None]:
    """Per row, {option key: log of the summed probability of its forms} (None: no options).

    Must run before decoding: multi-token forms are fed on the prefilled cache.
    ``token_budget`` bounds the rows of one pass on copied caches.
    """
    if not any(row.request.answer.options for row in rows):
        return [None] * len(rows)
    first = torch.log_softmax(state.logits, dim=-1).cpu()
    logprob: dict[tuple[int, str], float] = {}
    longer: list[tuple[int, str]] = []
    for i, row in enumerate(rows):
        forms = dict.fromkeys(f for o in row.request.answer.options for f in o.forms)
        for form in forms:
            ids = form_ids(form)
            if len(ids) == 1:
                logprob[(i, form)] = float(first[i, ids[0]])
            else:
                longer.append((i, form))
    if (
        longer
        and state.cache is not None
        and all(isinstance(layer, AppendLayer) for layer in state.cache.layers)
    ):
        logprob.update(_continuations_in_place(forward, longer, first, state, form_ids, stats))
    elif longer:
        logprob.update(
            _continuations_on_copies(forward, longer, first, state, form_ids, token_budget, stats)
        )
    return [
        {
            o.key(): _logsumexp([logprob[(i, f)] for f in o.forms])
            for o in row.request.answer.options
        }
        if row.request.answer.options
        else None
        for i, row in enumerate(rows)
    ]


def _continuations_on_copies(
    forward: Forward,
    pairs: list[tuple[int, str]],
    first: torch.Tensor,
    state: Prefill,
    form_ids: FormIds,
    token_budget: int,
    stats: EngineStats,
) -> dict[tuple[int, str], float]:
    """log P(form | prompt) of (row, multi-token form) pairs, from copies of row caches.

    The form's first token is read from the first decoding step; the rest by feeding the
    form, right-padded, on a copy (``index_select``) of its row's cache, which decoding
    later extends.
    """
    scores: dict[tuple[int, str], float] = {}
    dev = forward.device
    longest = max(len(form_ids(form)) for _, form in pairs)
    chunk = max(1, token_budget // (state.mask.shape[1] + longest))
    for start in range(0, len(pairs), chunk):
        part = pairs[start : start + chunk]
        forms = [form_ids(form) for _, form in part]
        width = max(len(ids) for ids in forms) - 1
        feed = torch.full((len(part), width), forward.pad_id, dtype=torch.long)
        targets = torch.zeros((len(part), width), dtype=torch.long)
        feed_mask = torch.zeros((len(part), width), dtype=torch.long)
        for j, ids in enumerate(forms):
            feed[j, : len(ids) - 1] = torch.tensor(ids[:-1])
            targets[j, : len(ids) - 1] = torch.tensor(ids[1:])
            feed_mask[j, : len(ids) - 1] = 1
        index = torch.tensor([i for i, _ in part])
        out = forward(
            input_ids=feed.to(dev),
            attention_mask=torch.cat([state.mask[index], feed_mask], dim=1).to(dev),
            position_ids=(state.next_pos[index].unsqueeze(1) + torch.arange(width)).to(dev),
            cache=forward.copy_rows(state.cache, index.to(dev)),
        )
        logits = out.logits.float()
        picked = logits.gather(-1, targets.to(dev).unsqueeze(-1)).squeeze(-1)
        steps = (picked - logits.logsumexp(-1)).double().cpu() * feed_mask
        stats.form_tokens += int(feed_mask.sum())
        for j, ((i, form), ids) in enumerate(zip(part, forms, strict=True)):
            scores[(i, form)] = float(first[i, ids[0]]) + float(steps[j].sum())
    return scores


def _continuations_in_place(
    forward: Forward,
    pairs: list[tuple[int, str]],
    first: torch.Tensor,
    state: Prefill,
    form_ids: FormIds,
    stats: EngineStats,
) -> dict[tuple[int, str], float]:
    """As :func:`_continuations_on_copies`, in one forward pass and without copying caches.

    Every distinct multi-token form is fed to every row at once, side by side after the
    prompt, on the batch's own cache: a 4D mask lets each form's tokens see the row's
    prompt and the form's earlier tokens only. The cache is then cut back to the prompt
    (decoding overwrites those slots). A copy of the whole cache per (row, form) pair took
    a quarter of a race-prediction shard's time; this pass takes about 7%.
    """
    dev = forward.device
    forms = list(dict.fromkeys(form for _, form in pairs))
    feeds = [form_ids(form)[:-1] for form in forms]
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
    dtype = forward.model.dtype
    mask = torch.zeros(visible.shape, dtype=dtype).masked_fill_(~visible, torch.finfo(dtype).min)
    out = forward(
        input_ids=torch.tensor([[t for f in feeds for t in f]] * n, device=dev),
        attention_mask=mask.unsqueeze(1).to(dev),
        position_ids=(state.next_pos.unsqueeze(1) + offset).to(dev),
        cache=state.cache,
    )
    for layer in state.cache.layers:
        layer.truncate(cached)
    # Each fed token's log-probability of the form's next token (only [rows, fed] leaves
    # the device, not the vocabulary-wide logits).
    targets = torch.tensor([t for form in forms for t in form_ids(form)[1:]], device=dev)
    logits = out.logits.float()
    picked = logits.gather(-1, targets.expand(n, width).unsqueeze(-1)).squeeze(-1)
    steps = (picked - logits.logsumexp(-1)).double().cpu()
    stats.form_tokens += sum(len(form_ids(form)) - 1 for _, form in pairs)
    scores: dict[tuple[int, str], float] = {}
    for i, form in pairs:
        at, length = starts[forms.index(form)], len(form_ids(form)) - 1
        scores[(i, form)] = float(first[i, form_ids(form)[0]]) + float(
            steps[i, at : at + length].sum()
        )
    return scores


def _logsumexp(values: Sequence[float]) -> float:
    return float(torch.tensor(values, dtype=torch.float64).logsumexp(0))
