"""The HF engine on the real packaged SmolLM2: invariance, shared prefixes, batching, memory
(its option scores: test_inference_engine_scores.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from cueaudit.errors import InputError
from cueaudit.inference.core import AnswerSpec, Decoding, Request
from cueaudit.inference.hf import HFEngine
from cueaudit.inference.hf_batching import cut_batches
from cueaudit.inference.hf_loading import CPU_CACHE_BYTES, check_quantization, slot_bytes
from cueaudit.inference.sampling import (
    SamplingParams,
    filtered_probs,
    sample_tokens,
)
from cueaudit.inference.seeding import prompt_uniforms
from tests.conftest import SMOLLM2_SPEC
from tests.helpers.hf_engine import (
    RACE,
    YES_NO,
    assert_scores_match_direct,
    prompt_ids,
    requests,
    run,
)
from tests.helpers.inference import BASES, DIALOG


@pytest.fixture(scope="module")
def engine(smollm2_dir: Path) -> HFEngine:
    return HFEngine(str(smollm2_dir), prefix_min_tokens=16)


# slow: the fast tier checks batch-size invariance on 12 rows
# (test_out_of_memory_backs_off_with_identical_outputs)
@pytest.mark.slow
def test_outputs_identical_at_batch_sizes_1_7_32(engine: HFEngine) -> None:
    reqs = requests()
    assert len(reqs) == 32
    decoding = Decoding(max_new_tokens=6)
    outputs = {}
    for size in (1, 7, 32):
        engine.max_batch_size = size
        outputs[size] = run(engine, reqs if size != 7 else reqs[::-1], decoding)
    engine.max_batch_size = 64
    for size in (7, 32):
        for uid, (text, n, reason, scores) in outputs[1].items():
            other = outputs[size][uid]
            assert other[:3] == (text, n, reason)
            assert set(other[3]) == set(scores) == {"Yes|yes|YES", "No|no|NO"}
            for key, logprob in scores.items():
                assert math.exp(other[3][key]) == pytest.approx(math.exp(logprob), abs=1e-5)
    # Not a constant: different prompts and different seeds give different samples.
    assert len({v[0] for v in outputs[32].values()}) > 10
    reseeded = run(engine, requests(seed=1), decoding)
    assert sum(reseeded[u][0] != outputs[32][u][0] for u in reseeded) > 10


@pytest.mark.slow
def test_shared_prefix_gives_the_full_forward_probabilities(engine: HFEngine) -> None:
    reqs = [r for r in requests() if "dialog" in r.group][:4] + requests()[:2]
    engine.stats.prefix_tokens = engine.stats.padded_suffix_tokens = 0
    got = run(engine, reqs, Decoding(max_new_tokens=1))
    full_tokens = 0
    for r in reqs:
        full_tokens += len(prompt_ids(engine, r))
        assert_scores_match_direct(engine, r, got[r.uid][3])
    # The dialog history and the chat header were computed once, not once per prompt.
    assert engine.stats.prefill_tokens < 0.6 * full_tokens


# slow: the fast tier has shared prefixes in test_shared_prefix_gives_the_full_forward_probabilities
@pytest.mark.slow
def test_rows_of_different_prefixes_share_a_batch(engine: HFEngine) -> None:
    """Histories of unequal length decoded together give each prompt its own forward pass."""
    history = DIALOG * 2
    reqs = [
        Request(
            f"h{k}-b{b}",
            f"[history {k}] " + history[: 200 + 80 * k] + "\nUSER: " + base,
            0,
            group=f"h{k}",
            answer=AnswerSpec(options=RACE if b == 1 else YES_NO),
        )
        for k in range(3)
        for b, base in enumerate(BASES[:3])
    ]
    _header, windows = engine.plan(reqs, Decoding(max_new_tokens=4))
    assert len(windows) == 1 and len(windows[0].prefixes) == 3
    assert len({len(p.ids) for p in windows[0].prefixes}) == 3
    batches = cut_batches(windows[0], 4, 10**6, engine.max_batch_size)
    assert len(batches) == 1 and len({id(r.prefix) for r in batches[0]}) == 3
    mixed = run(engine, reqs, Decoding(max_new_tokens=4))
    engine.max_batch_size = 1
    alone = run(engine, reqs, Decoding(max_new_tokens=4))
    engine.max_batch_size = 64
    # transformers' own cache update (kept for sliding-window layers) gives the same answers.
    engine.forward.append_in_place = False
    concatenated = run(engine, reqs, Decoding(max_new_tokens=4))
    engine.forward.append_in_place = True
    for r in reqs:
        assert mixed[r.uid][:3] == alone[r.uid][:3] == concatenated[r.uid][:3]
        assert concatenated[r.uid][3] == pytest.approx(mixed[r.uid][3], rel=1e-4)
        assert_scores_match_direct(engine, r, mixed[r.uid][3])


@pytest.mark.slow
def test_finished_rows_leave_the_batch_and_budget_cuts_batches(engine: HFEngine) -> None:
    reqs = requests()
    engine.stats.decode_steps = 0
    out = run(engine, reqs, Decoding(max_new_tokens=12))
    stops = [v for v in out.values() if v[2] == "stop"]
    assert stops and all(v[1] <= 12 for v in out.values())
    assert all(v[1] == 12 for v in out.values() if v[2] == "length")
    _header, windows = engine.plan(reqs, Decoding(max_new_tokens=12))
    for window in windows:
        for batch in cut_batches(window, 12, 400, engine.max_batch_size):
            prefix = max(len(r.prefix.ids) for r in batch)
            widest = prefix + max(r.suffix_length for r in batch) + 12
            assert len(batch) == 1 or len(batch) * widest <= 400


def test_out_of_memory_backs_off_with_identical_outputs(
    engine: HFEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    reqs = requests()[:12]
    decoding = Decoding(max_new_tokens=4)
    expected = run(engine, reqs, decoding)
    real = engine._run_batch

    def small_memory(window, rows, dec):  # type: ignore[no-untyped-def]
        if len(rows) > 3:
            raise torch.cuda.OutOfMemoryError("fake OOM")
        return real(window, rows, dec)

    monkeypatch.setattr(engine, "_run_batch", small_memory)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    before, budget = engine.stats.oom_backoffs, engine.token_budget
    got = run(engine, reqs, decoding)
    assert engine.stats.oom_backoffs > before
    assert {k: v[:3] for k, v in got.items()} == {k: v[:3] for k, v in expected.items()}
    for uid, (*_, scores) in got.items():
        assert scores == pytest.approx(expected[uid][3], rel=1e-4)
    engine.token_budget = budget


def test_from_spec_reads_the_manifest_and_the_model_block(smollm2_dir: Path) -> None:
    manifest = {"model_id": "sha256:abc", "resolved_path": str(smollm2_dir)}
    spec = {"dtype": "float32", "device": "cpu", "batch_size": 7, "prefix_min_tokens": 5}
    built = HFEngine.from_spec(manifest, {**SMOLLM2_SPEC, **spec, "token_budget": 999})
    assert (built.model_id, built.max_batch_size, built.prefix_min_tokens) == ("sha256:abc", 7, 5)
    assert built.device == "cpu" and built._requested_budget == 999
    assert built.identity()["model"] == "sha256:abc" and built._model is None


def test_quantization_on_cpu_is_a_clear_error(smollm2_dir: Path) -> None:
    for quantization in ("8bit", "4bit"):
        with pytest.raises(InputError, match="needs a CUDA GPU"):
            check_quantization(quantization, "cpu")
        with pytest.raises(InputError, match="quantization"):
            HFEngine(str(smollm2_dir), device="cpu", quantization=quantization)
    check_quantization("none", "cpu")


def test_sampler_is_per_prompt_and_respects_top_k() -> None:
    u1 = prompt_uniforms(0, "abc", 5)
    assert (u1 == prompt_uniforms(0, "abc", 8)[:5]).all()
    assert not (u1 == prompt_uniforms(1, "abc", 5)).any()
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    probs = filtered_probs(logits, SamplingParams(top_k=2))
    assert probs[0, :2].sum() == 0 and probs[0].sum() == pytest.approx(1.0)
    draws = {int(sample_tokens(probs, torch.tensor([u]))[0]) for u in (0.01, 0.5, 0.99)}
    assert draws == {2, 3}
    nucleus = filtered_probs(logits, SamplingParams(top_k=0, top_p=0.5))
    assert int((nucleus[0] > 0).sum()) == 1


def test_append_layer_matches_transformers_dynamic_layer() -> None:
    from transformers.cache_utils import DynamicLayer

    from cueaudit.inference.hf_forward import AppendLayer

    gen = torch.Generator().manual_seed(0)
    keys, values = torch.randn(4, 3, 5, 8, generator=gen), torch.randn(4, 3, 5, 8, generator=gen)
    ours, theirs = AppendLayer(keys, values, capacity=7), DynamicLayer()
    theirs.update(keys, values)
    # Past the buffer's capacity it grows; a row selection keeps each row's history.
    for step in range(6):
        k, v = torch.randn(2, 3, 1, 8, generator=gen), torch.randn(2, 3, 1, 8, generator=gen)
        if step == 2:
            ours.batch_select_indices(torch.tensor([1, 3]))
            theirs.batch_select_indices(torch.tensor([1, 3]))
        if step < 2:
            k, v = k.repeat(2, 1, 1, 1), v.repeat(2, 1, 1, 1)
        got, want = ours.update(k, v), theirs.update(k, v)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert ours.get_seq_length() == theirs.get_seq_length() == 11


def test_the_cpu_token_budget_fills_two_gib_of_caches(smollm2_dir: Path) -> None:
    fresh = HFEngine(str(smollm2_dir))
    _ = fresh.model
    config = fresh.model.config
    # SmolLM2-135M: 30 layers, 3 key/value heads of 64 dimensions, float32.
    assert (config.num_hidden_layers, config.num_key_value_heads) == (30, 3)
    assert slot_bytes(fresh.model) == 2 * 30 * 3 * 64 * 4
    assert fresh.token_budget == CPU_CACHE_BYTES // (2 * 30 * 3 * 64 * 4) == 46603
