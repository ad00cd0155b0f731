"""Constrained decoding: the bitmask helpers, llguidance matchers, and the HF engine on SmolLM2."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from cueaudit.inference.constrained import (
    GuidanceGrammars,
    bitmask_words,
    blocked_tokens,
    mask_logits,
)
from cueaudit.inference.core import (
    TOOLS_SYSTEM_TURN,
    AnswerSpec,
    Decoding,
    Request,
    Tool,
    canonical_json,
    render_user_turn,
)
from cueaudit.inference.hf import HFEngine

RANKING = {
    "type": "object",
    "properties": {
        "ranks": {
            "type": "array",
            "items": {"type": "integer", "minimum": 1, "maximum": 4},
            "minItems": 4,
            "maxItems": 4,
        }
    },
    "required": ["ranks"],
    "additionalProperties": False,
}
SUBMIT = Tool.of("submit_ranking", "Submit the rank (1 = best) of each candidate.", RANKING)
NAMES = ["Jamal", "Emily", "DeShawn", "Greg", "Lakisha", "Anne", "Tyrone", "Claire", "Keisha"]
JOBS = ["nurse", "software engineer", "accountant", "teacher", "electrician"]
#: Constrained rankings are always '{"ranks": [a, b, c, d]}': 16 tokens on this tokenizer.
RANKING_TOKENS = 16


def ranking_prompt(k: int) -> str:
    job = JOBS[k % len(JOBS)]
    lines = [
        f"{i + 1}. {NAMES[(k + 2 * i) % len(NAMES)]}: {(k * (i + 3)) % 11 + 1} years as a {job}"
        for i in range(4)
    ]
    return (
        f"Rank these four candidates for a {job} position from 1 (best) to 4 (worst); "
        "ties are allowed.\n" + "\n".join(lines) + "\nAnswer with the ranks of the candidates, "
        'in order, as JSON: {"ranks": [...]}.'
    )


@pytest.fixture(scope="module")
def engine(smollm2_dir: Path) -> HFEngine:
    return HFEngine(str(smollm2_dir))


class AllowOnly:
    """A stand-in matcher allowing a fixed token set."""

    def __init__(self, tokens: list[int]) -> None:
        self.tokens = tokens

    def fill(self, bitmask: torch.Tensor, row: int) -> None:
        words = np.zeros(bitmask.shape[1], dtype=np.uint32)
        for t in self.tokens:
            words[t // 32] |= np.uint32(1 << (t % 32))
        bitmask[row] = torch.from_numpy(words.view(np.int32))

    def accept(self, token: int) -> None:
        assert token in self.tokens

    @property
    def done(self) -> bool:
        return False


def test_bitmask_layout_and_masking_leave_free_rows_alone() -> None:
    assert bitmask_words(64) == 2 and bitmask_words(65) == 3
    logits = torch.zeros((3, 70), dtype=torch.float64)
    mask_logits(logits, [AllowOnly([0, 31, 32, 69]), None, AllowOnly([5])])
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [0, 31, 32, 69]
    assert torch.isfinite(logits[1]).all()
    assert torch.isfinite(logits[2]).nonzero().flatten().tolist() == [5]
    everything = torch.full((1, 3), -1, dtype=torch.int32)
    assert (
        blocked_tokens(everything, 70).shape == (1, 70) and not blocked_tokens(everything, 70).any()
    )
    untouched = torch.randn(2, 70)
    before = untouched.clone()
    mask_logits(untouched, [None, None])
    assert torch.equal(untouched, before)


def test_llguidance_matcher_enforces_the_ranking_schema(smollm2_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    grammars = GuidanceGrammars(tokenizer, len(tokenizer), [tokenizer.eos_token_id])
    matcher = grammars.matcher(canonical_json(RANKING))
    bitmask = torch.zeros((1, bitmask_words(len(tokenizer))), dtype=torch.int32)
    prefix = tokenizer.encode('{"ranks": [', add_special_tokens=False)
    for token in prefix:
        matcher.accept(token)
    matcher.fill(bitmask, 0)
    allowed = np.flatnonzero(~blocked_tokens(bitmask, len(tokenizer))[0]).tolist()
    # Integers within [1, 4] and nothing else (outlines-core's regex also allowed 0, 5, 17...).
    assert sorted(tokenizer.decode([t]) for t in allowed) == ["1", "2", "3", "4"]
    assert not matcher.done
    for token in tokenizer.encode("2, 2, 4, 1]}", add_special_tokens=False):
        matcher.accept(token)
    assert matcher.done
    # A fresh matcher of the same (cached) grammar starts over.
    fresh = grammars.matcher(canonical_json(RANKING))
    with pytest.raises(RuntimeError, match="constrained decoding failed"):
        fresh.accept(tokenizer.encode("[", add_special_tokens=False)[0])


@pytest.mark.slow
def test_fifty_rankings_are_all_schema_valid(engine: HFEngine) -> None:
    spec = AnswerSpec(json_schema=canonical_json(RANKING))
    reqs = [Request(f"rank-{k}", ranking_prompt(k), 0, answer=spec) for k in range(50)]
    out = [g for batch in engine.generate(reqs, Decoding(max_new_tokens=48)) for _, g in batch]
    assert len(out) == 50
    for g in out:
        jsonschema.validate(json.loads(g.completion), RANKING)
        assert g.constrained and g.finish_reason == "stop" and not g.tool_calls
        assert g.completion_tokens == RANKING_TOKENS
    assert len({g.completion for g in out}) > 5  # sampled, not one forced answer


@pytest.mark.slow
def test_constrained_and_free_rows_share_batches_without_changing_each_other(
    engine: HFEngine,
) -> None:
    spec = AnswerSpec(json_schema=canonical_json(RANKING))
    constrained = [Request(f"c{k}", ranking_prompt(k), 1, answer=spec) for k in range(4)]
    free = [Request(f"f{k}", ranking_prompt(k), 1) for k in range(4)]
    decoding = Decoding(max_new_tokens=RANKING_TOKENS)

    def answers(reqs: list[Request]) -> dict[str, tuple[str, int, str, bool]]:
        return {
            r.uid: (g.completion, g.completion_tokens, g.finish_reason, g.constrained)
            for batch in engine.generate(reqs, decoding)
            for r, g in batch
        }

    engine.stats.batches = 0
    mixed = answers(constrained + free)
    assert engine.stats.batches == 1
    alone = {**answers(constrained), **answers(free)}
    assert mixed == alone
    assert all(mixed[r.uid][3] for r in constrained) and not any(mixed[r.uid][3] for r in free)
    # Same prompts, same uniforms: the grammar is what makes the constrained rows differ.
    assert all(mixed[f"c{k}"][0] != mixed[f"f{k}"][0] for k in range(4))


@pytest.mark.slow
def test_forced_tool_returns_schema_valid_calls(engine: HFEngine) -> None:
    spec = AnswerSpec(tools=(SUBMIT,), tool_choice="submit_ranking")
    reqs = [Request(f"tool-{k}", ranking_prompt(k), 2, answer=spec) for k in range(20)]
    out = [g for batch in engine.generate(reqs, Decoding(max_new_tokens=48)) for _, g in batch]
    assert len(out) == 20
    for g in out:
        (call,) = g.tool_calls
        assert call.name == "submit_ranking" and g.constrained
        jsonschema.validate(call.arguments, RANKING)
        assert json.loads(g.completion) == call.arguments
    rendered = engine.render(reqs[0].text, spec)
    assert canonical_json(SUBMIT.openai()) in rendered


def test_tools_reach_a_template_that_ignores_them_as_a_system_turn(engine: HFEngine) -> None:
    tokenizer = engine.tokenizer
    plain = render_user_turn(tokenizer, "Rank them.")
    # SmolLM2's template has no tools variable: passing tools changes nothing...
    ignored = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Rank them."}],
        tokenize=False,
        add_generation_prompt=True,
        tools=[SUBMIT.openai()],
    )
    assert ignored == plain
    # ...so they come as a system turn, in place of the default system prompt.
    with_tools = render_user_turn(tokenizer, "Rank them.", [SUBMIT])
    system = TOOLS_SYSTEM_TURN.format(tools=canonical_json(SUBMIT.openai()))
    assert with_tools == (
        f"<|im_start|>system\n{system}<|im_end|>\n"
        "<|im_start|>user\nRank them.<|im_end|>\n<|im_start|>assistant\n"
    )
    assert "SmolLM" in plain and "SmolLM" not in with_tools
    assert engine.render("Rank them.") == plain
