"""The HF engine's option scores on the real packaged SmolLM2: full continuation likelihoods,
the old first-step P(Yes), scoring without sampling, completions unchanged by scoring. A module
of its own so that, under ``pytest -n 2``, it runs beside test_inference_engine.py."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from cueaudit.inference import hf as hf_module
from cueaudit.inference.core import Decoding, Option, Request
from cueaudit.inference.hf import HFEngine
from tests.helpers.hf_engine import (
    LIKERT,
    RACE,
    YES_NO,
    assert_scores_match_direct,
    direct_logprobs,
    requests,
    run,
)
from tests.helpers.inference import BASES


@pytest.fixture(scope="module")
def engine(smollm2_dir: Path) -> HFEngine:
    return HFEngine(str(smollm2_dir), prefix_min_tokens=16)


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
