"""The HF engine on the real packaged SmolLM2: invariance, shared prefixes, option scores."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from cueaudit.errors import InputError
from cueaudit.inference import hf as hf_module
from cueaudit.inference.core import AnswerSpec, Decoding, Option, Request
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
from tests.helpers.inference import BASES, DIALOG, prompt_table

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


@pytest.fixture(scope="module")
def engine(smollm2_dir: Path) -> HFEngine:
    return HFEngine(str(smollm2_dir), prefix_min_tokens=16)


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
def test_yes_no_scores_are_the_old_first_step_probabilities(
    engine: HFEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Single-token forms score as the old P(Yes)/P(No): summed first-step probabilities.

    The old engine summed the probabilities of each form's first token, from the first
    decoding step's logits (captured here). "YES" is two tokens ("Y", "ES"): the old engine
    counted all of P("Y"), the full continuation is P("Y") · P("ES" | "Y").
    """
    forms = ["No", "no", "NO", "Y", "YES"]
    assert all(len(engine.form_ids(f)) == 1 for f in ("Yes", "yes", "No", "no", "NO"))
    assert len(engine.form_ids("YES")) == 2
    first_ids = {f: engine.form_ids(f)[0] for f in ("Yes", "yes", "YES", "No", "no", "NO")}
    assert engine.form_ids("Y") == [first_ids["YES"]]
    captured: dict[str, torch.Tensor] = {}
    real = hf_module.option_scores

    def spy(forward, rows, state, *rest):  # type: ignore[no-untyped-def]
        for row, logits in zip(rows, state.logits, strict=True):
            captured[row.request.uid] = logits.softmax(-1)
        return real(forward, rows, state, *rest)

    monkeypatch.setattr(hf_module, "option_scores", spy)
    reqs = requests()[::4]
    got = run(engine, reqs, Decoding(max_new_tokens=1))
    for r in reqs:
        first = captured[r.uid]
        old_yes, old_no = (float(sum(first[first_ids[f]] for f in o.forms)) for o in YES_NO)
        p_yes, p_no = (math.exp(got[r.uid][3][o.key()]) for o in YES_NO)
        assert p_no == pytest.approx(old_no, rel=1e-12)
        # One plain forward pass of the whole prompt (float32 sums: ~1e-5 apart).
        direct = dict(zip(forms, map(math.exp, direct_logprobs(engine, r, forms)), strict=True))
        assert p_no == pytest.approx(direct["No"] + direct["no"] + direct["NO"], rel=1e-4)
        p_es_after_y = direct["YES"] / direct["Y"]
        assert 0 < p_es_after_y < 1
        p_y = float(first[first_ids["YES"]])
        assert p_yes == pytest.approx(old_yes - p_y * (1 - p_es_after_y), rel=1e-5)


@pytest.mark.parametrize(
    "options",
    [pytest.param(LIKERT, marks=pytest.mark.slow), pytest.param(RACE, marks=pytest.mark.slow)],
    ids=["likert", "race"],
)
def test_option_scores_are_full_continuation_likelihoods(
    engine: HFEngine, options: tuple[Option, ...]
) -> None:
    # Rows of different prefixes (dialog histories, names, none) and of other option sets
    # share the batches: left-padded caches, right-padded forms.
    reqs = requests(options=options)[::7] + requests(options=YES_NO)[25::4]
    fed = engine.stats.form_tokens
    got = run(engine, reqs, Decoding(max_new_tokens=3))
    multi = [f for o in options for f in o.forms if len(engine.form_ids(f)) > 1]
    assert (multi != []) == (options is RACE)
    # "YES" (two tokens) of the Yes/No rows, plus "Not sure" and "Prefer not to say".
    per_row = {id(YES_NO): 1, id(RACE): 1 + 1 + 4}
    want = sum(per_row.get(id(r.answer.options), 0) for r in reqs)
    assert engine.stats.form_tokens - fed == want
    for r in reqs:
        scores = got[r.uid][3]
        assert set(scores) == {o.key() for o in r.answer.options}
        probs = [math.exp(v) for v in scores.values()]
        assert all(0 < p < 1 for p in probs)
        total = sum(probs)
        assert sum(p / total for p in probs) == pytest.approx(1.0, abs=1e-12)
        assert_scores_match_direct(engine, r, scores)


@pytest.mark.slow
def test_score_equals_the_scores_of_generate(engine: HFEngine) -> None:
    reqs = requests(options=RACE)[::4] + requests(options=YES_NO)[2::4]
    generated = run(engine, reqs, Decoding(max_new_tokens=4))
    steps = engine.stats.decode_steps
    scored = {r.uid: s for batch in engine.score(reqs) for r, s in batch}
    assert engine.stats.decode_steps == steps  # nothing was sampled
    assert set(scored) == set(generated)
    for uid, scores in scored.items():
        assert scores == pytest.approx(generated[uid][3], rel=1e-9)
    plain = [Request("plain", BASES[0], 0)]
    assert [s for batch in engine.score(plain) for _, s in batch] == [{}]
    assert (
        next(iter(engine.generate(plain, Decoding(max_new_tokens=1))))[0][1].option_logprobs is None
    )


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


@pytest.mark.slow
def test_scoring_multi_token_forms_leaves_the_completions_unchanged(engine: HFEngine) -> None:
    """The forms are fed on the batch's own cache, which is cut back before decoding: a
    slot of a form left behind would change the tokens sampled after it."""
    scored = requests(options=RACE)[::5]
    plain = [Request(r.uid, r.text, r.seed, group=r.group) for r in scored]
    assert any(len(engine.form_ids(f)) > 1 for o in RACE for f in o.forms)
    with_scores = run(engine, scored, Decoding(max_new_tokens=6))
    without = run(engine, plain, Decoding(max_new_tokens=6))
    assert {u: v[:3] for u, v in with_scores.items()} == {u: v[:3] for u, v in without.items()}
    assert all(v[3] is None for v in without.values())
    for r in scored[:3]:
        assert_scores_match_direct(engine, r, with_scores[r.uid][3])


def test_the_cpu_token_budget_fills_two_gib_of_caches(smollm2_dir: Path) -> None:
    fresh = HFEngine(str(smollm2_dir))
    _ = fresh.model
    config = fresh.model.config
    # SmolLM2-135M: 30 layers, 3 key/value heads of 64 dimensions, float32.
    assert (config.num_hidden_layers, config.num_key_value_heads) == (30, 3)
    assert slot_bytes(fresh.model) == 2 * 30 * 3 * 64 * 4
    assert fresh.token_budget == CPU_CACHE_BYTES // (2 * 30 * 3 * 64 * 4) == 46603
