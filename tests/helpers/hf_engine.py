"""The HF engine tests' requests and their reference: log-probabilities from one plain
forward pass of the packaged SmolLM2, with no cache (tests/unit/test_inference_engine*.py)."""

from __future__ import annotations

import math

import pytest
import torch

from cueaudit.inference.core import AnswerSpec, Decoding, Option, Request
from cueaudit.inference.hf import HFEngine
from tests.helpers.inference import prompt_table

YES_NO = (Option("Yes", ("Yes", "yes", "YES")), Option("No", ("No", "no", "NO")))
LIKERT = tuple(Option(str(k), (str(k),)) for k in range(1, 6))
RACE = (
    Option("Black", ("Black", "black")),
    Option("White", ("White", "white")),
    Option("Unknown", ("Unknown", "unknown")),
    # Every form above is one token on this tokenizer; these are two and five tokens long.
    Option("Not sure", ("Not sure", "not sure")),
    Option("Declined", ("Prefer not to say",)),
)


def requests(seed: int = 0, options: tuple[Option, ...] = YES_NO) -> list[Request]:
    table = prompt_table(n_names=5)
    return [
        Request(uid, text, seed, group=f"{cue}\x1f{value}", answer=AnswerSpec(options=options))
        for uid, text, cue, value in table.select(
            "prompt_uid", "text", "cue", "cue_value"
        ).iter_rows()
    ]


def run(engine: HFEngine, reqs: list[Request], decoding: Decoding) -> dict[str, tuple]:
    return {
        r.uid: (g.completion, g.completion_tokens, g.finish_reason, g.option_logprobs)
        for batch in engine.generate(reqs, decoding)
        for r, g in batch
    }


def prompt_ids(engine: HFEngine, request: Request) -> list[int]:
    rendered = engine.render(request.text, request.answer)
    return list(engine.tokenizer(rendered, add_special_tokens=False).input_ids)


def direct_logprobs(engine: HFEngine, request: Request, forms: list[str]) -> list[float]:
    """log P(form | prompt) of each form, from one plain forward pass with no cache.

    The sequences prompt + form are right-padded into one batch: a causal model's logits at
    the real positions do not see the padding.
    """
    prompt = prompt_ids(engine, request)
    tails = [engine.tokenizer.encode(f, add_special_tokens=False) for f in forms]
    width = len(prompt) + max(len(t) for t in tails)
    ids = torch.full((len(forms), width), engine.pad_id, dtype=torch.long)
    mask = torch.zeros((len(forms), width), dtype=torch.long)
    for j, tail in enumerate(tails):
        ids[j, : len(prompt) + len(tail)] = torch.tensor(prompt + tail)
        mask[j, : len(prompt) + len(tail)] = 1
    with torch.inference_mode():
        logits = engine.model(ids, attention_mask=mask, use_cache=False).logits
    logprobs = logits.double().log_softmax(-1)
    return [
        sum(float(logprobs[j, len(prompt) - 1 + k, t]) for k, t in enumerate(tail))
        for j, tail in enumerate(tails)
    ]


def direct_logprob(engine: HFEngine, request: Request, form: str) -> float:
    return direct_logprobs(engine, request, [form])[0]


def assert_scores_match_direct(engine: HFEngine, request: Request, scores: dict) -> None:
    forms = [f for o in request.answer.options for f in o.forms]
    direct = dict(zip(forms, direct_logprobs(engine, request, forms), strict=True))
    for option in request.answer.options:
        want = math.log(sum(math.exp(direct[f]) for f in option.forms))
        assert scores[option.key()] == pytest.approx(want, rel=1e-4)
