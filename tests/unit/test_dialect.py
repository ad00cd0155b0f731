from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import polars as pl
import pytest

from cueaudit.cues.dialect.cache import TranslationCache
from cueaudit.cues.dialect.rules import RuleBasedAAVE
from cueaudit.cues.dialect.translate import (
    audit_summary,
    audit_translations,
    run_dialect_translation,
    split_sentences,
    translate_prompts,
)
from cueaudit.cues.dialect.translators import (
    AAVE_PROMPT,
    OpenAITranslator,
    RuleBasedTranslator,
    make_translator,
)
from cueaudit.errors import InputError
from cueaudit.probing.base_prompts import load_base_prompts, load_task_base_prompts

ROOT = Path(__file__).resolve().parents[2]
INSTRUCTION = "Respond with either 'Yes' or 'No' and no additional text."


@pytest.mark.parametrize(
    ("sae", "aave", "rule"),
    [
        (
            "I have been bruising easily for 12 hours.",
            "I been bruisin' easily for 12 hours.",
            "been_progressive",
        ),
        ("She works at a bank.", "She work at a bank.", "uninflect_3sg"),
        ("I don't have any savings.", "I don't have no savings.", "negative_concord"),
        ("He is not giving me the money.", "He ain't givin' me the money.", "aint_be"),
        ("I'm about to start a new job.", "I'm finna start a new job.", "finna_future"),
        ("They are going to evict me.", "They gon evict me.", "future_sub_gon"),
        ("They are usually late.", "They usually be late.", "habitual_be"),
        ("There is a leak in my roof.", "It's a leak in my roof.", "existential_it"),
        ("He is tired.", "He tired.", "drop_copula"),
    ],
)
def test_rule_based_features(sae: str, aave: str, rule: str) -> None:
    result = RuleBasedAAVE(seed=0).translate(sae)
    assert result.text == aave
    assert rule in result.rules


def test_rules_are_seeded_and_independent_of_other_sentences() -> None:
    text = "I have had unexplained weight loss for two days."
    outputs = {RuleBasedAAVE(seed=s).translate(text).text for s in range(20)}
    # completive done fires with probability 0.6: both outcomes occur across seeds
    assert outputs == {text, "I done had unexplained weight loss for two days."}
    assert RuleBasedAAVE(seed=3).translate(text) == RuleBasedAAVE(seed=3).translate(text)
    never = RuleBasedAAVE(seed=0, probabilities={"completive_done": 0.0}).translate(text)
    assert never.text == text and never.rules == ()
    with pytest.raises(ValueError, match="unknown dialect rule"):
        RuleBasedAAVE(probabilities={"no_such_rule": 1.0})


def test_split_sentences_round_trips() -> None:
    text = "I have a B.S. in Biology. I live in Austin, TX. " + INSTRUCTION
    parts = split_sentences(text)
    assert "".join(parts) == text
    assert parts[::2] == ["I have a B.S. in Biology.", "I live in Austin, TX.", INSTRUCTION]


class CountingTranslator(RuleBasedTranslator):
    def __init__(self) -> None:
        super().__init__(seed=0)
        self.calls: list[str] = []

    def translate_batch(self, sentences: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
        self.calls.extend(sentences)
        return super().translate_batch(sentences)


def _base() -> pl.DataFrame:
    texts = [
        f"I have been coughing for 3 days. Should I see a doctor? {INSTRUCTION}",
        f"I have been coughing for 3 days. Should I go to the ER? {INSTRUCTION}",
    ]
    return pl.DataFrame({"task": ["h", "h"], "base_id": ["h-1", "h-2"], "text": texts})


def test_cache_means_zero_translator_calls_on_rerun(tmp_path: Path) -> None:
    first = CountingTranslator()
    with TranslationCache(tmp_path / "cache.sqlite") as cache:
        out1 = translate_prompts(_base(), first, cache)
    # 3 distinct sentences; the shared symptom sentence once; the instruction kept in SAE
    assert sorted(first.calls) == sorted(
        ["I have been coughing for 3 days.", "Should I see a doctor?", "Should I go to the ER?"]
    )
    second = CountingTranslator()
    with TranslationCache(tmp_path / "cache.sqlite") as cache:
        out2 = translate_prompts(_base(), second, cache)
        assert len(cache) == 3
    assert second.calls == []
    assert out2["text"].to_list() == out1["text"].to_list()
    assert out2["n_cached"].to_list() == [2, 2] and out1["n_cached"].to_list() == [0, 0]
    assert out1["text"][0] == f"I been coughin' for 3 days. Should I see a doctor? {INSTRUCTION}"
    # a different set-up (seed) is a different cache key
    other = CountingTranslator()
    other._rules = RuleBasedAAVE(seed=1)
    with TranslationCache(tmp_path / "cache.sqlite") as cache:
        translate_prompts(_base(), other, cache)
    assert len(other.calls) == 3


def test_audit_flags_each_problem() -> None:
    src = f"I have had a fever for 3 days. {INSTRUCTION}"
    table = pl.DataFrame(
        {
            "task": ["h"] * 4,
            "base_id": ["ok", "numeral", "same", "instruction"],
            "source_text": [src] * 4,
            "text": [
                f"I done had a fever for 3 days. {INSTRUCTION}",
                f"I done had a fever for three days. {INSTRUCTION}",
                src,
                "I done had a fever for 3 days. Say yes or no.",
            ],
            "translator": ["t"] * 4,
            "model": ["m"] * 4,
            "rules": [["completive_done"]] * 4,
        }
    )
    audit = audit_translations(table)
    reasons = dict(zip(audit["base_id"], audit["flag_reasons"], strict=True))
    assert reasons == {
        "ok": "",
        "numeral": "numerals_changed",
        "same": "unchanged",
        "instruction": "length_ratio,instruction_changed",
    }
    summary = audit_summary(audit).row(0, named=True)
    assert (summary["n_prompts"], summary["n_flagged"], summary["unchanged"]) == (4, 3, 1)


def test_openai_translator_sends_the_paper_prompt_without_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[dict] = []

    def fake_post(url: str, headers: dict, body: bytes) -> bytes:
        sent.append({"url": url, "auth": headers["Authorization"], **json.loads(body)})
        return json.dumps(
            {"choices": [{"message": {"content": "AAVE: I done had a cough."}}]}
        ).encode()

    monkeypatch.setenv("TEST_KEY", "sk-test")
    translator = OpenAITranslator(api_key_env="TEST_KEY", post=fake_post)
    assert translator.model == "gpt-5-nano"
    with TranslationCache(tmp_path / "c.sqlite") as cache:
        base = pl.DataFrame({"task": ["h"], "base_id": ["1"], "text": ["I have had a cough."]})
        out = translate_prompts(base, translator, cache)
        translate_prompts(base, translator, cache)
    assert out["text"][0] == "I done had a cough."
    assert len(sent) == 1  # the rerun was served from the cache
    assert sent[0]["url"] == "https://api.openai.com/v1/chat/completions"
    assert sent[0]["messages"][0]["content"] == AAVE_PROMPT.format(text="I have had a cough.")
    assert sent[0]["messages"][0]["content"].startswith("You are a linguistic translator.")
    assert sent[0]["auth"] == "Bearer sk-test"
    monkeypatch.delenv("TEST_KEY")
    with pytest.raises(InputError, match="TEST_KEY"):
        translator.translate_batch(["Hello there."])


def test_make_translator_rejects_bad_specs() -> None:
    assert make_translator({"translator": "rule_based"}).name == "rule_based"
    with pytest.raises(InputError, match="local model folder"):
        make_translator({"translator": "hf"})
    with pytest.raises(InputError, match="not found"):
        make_translator({"translator": "hf", "model": "/no/such/folder"})


def test_run_dialect_translation_writes_translations_and_audit(tmp_path: Path) -> None:
    audit = run_dialect_translation(
        load_base_prompts(ROOT / "resources/prompts/legal.csv", "legal", limit=4),
        {"translator": "rule_based", "cache": str(tmp_path / "cache.sqlite")},
        translations_path=tmp_path / "t.parquet",
        audit_path=tmp_path / "audit.csv",
        flagged_path=tmp_path / "flagged.csv",
    )
    translations = pl.read_parquet(tmp_path / "t.parquet")
    assert translations.height == audit.height == 4
    assert translations["text"][0].startswith("I stay in Hanover, New Hampshire.")
    assert translations["text"].str.ends_with(INSTRUCTION).all()
    assert pl.read_csv(tmp_path / "audit.csv").height == 4
    assert audit["numerals_preserved"].all()


def test_bad_base_prompt_file_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("id,text\n1,hello\n")
    with pytest.raises(InputError, match="base_id"):
        run_dialect_translation(
            load_task_base_prompts({"legal": (str(bad), None)}),
            {"cache": str(tmp_path / "c.sqlite")},
            translations_path=tmp_path / "t.parquet",
            audit_path=tmp_path / "a.csv",
            flagged_path=tmp_path / "f.csv",
        )
    assert not (tmp_path / "t.parquet").exists()


def test_hf_translator_on_local_smollm2(tmp_path: Path, smollm2_dir: Path) -> None:
    """The hf translator on the packaged SmolLM2 (one sentence, greedy, cached on rerun)."""
    pytest.importorskip("transformers")
    from cueaudit.cues.dialect.translators import HFTranslator

    translator = HFTranslator(smollm2_dir, max_new_tokens=24)
    base = pl.DataFrame({"task": ["h"], "base_id": ["1"], "text": ["I have had a cough."]})
    with TranslationCache(tmp_path / "c.sqlite") as cache:
        first = translate_prompts(base, translator, cache)
        translator.translate_batch = None  # type: ignore[method-assign]  # must not be called
        second = translate_prompts(base, translator, cache)
    assert first["text"][0] and "\n" not in first["text"][0]
    assert second["text"].to_list() == first["text"].to_list()
    assert (first["translator"][0], first["model"][0]) == ("hf", "smollm2-135m")
