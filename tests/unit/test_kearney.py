from __future__ import annotations

from pathlib import Path

import pytest

from cueaudit.errors import InputError
from cueaudit.probing.base_prompts import load_kearney_prompts

FIX = Path(__file__).resolve().parents[1] / "fixtures/kearney"


def test_kearney_corpus_fixes_typo_and_dedupes() -> None:
    legal = load_kearney_prompts(FIX / "legal_llama_prompts.csv", "legal")
    assert legal["base_id"].to_list() == ["legal-00001", "legal-00002"]
    assert legal["text"][1] == (
        "I live in Honolulu, Hawaii. Is it illegal to camp overnight on a public beach? "
        "Respond with either 'Yes' or 'No' and no additional text."
    )
    assert not legal["text"].str.contains("additonal").any()
    medical = load_kearney_prompts(FIX / "medical_llama_prompts.csv", "healthcare", "med")
    assert medical["base_id"].to_list() == ["med-00001", "med-00002"]
    assert set(medical["task"]) == {"healthcare"}


def test_kearney_rejects_missing_column_and_empty_file(tmp_path: Path) -> None:
    bad = tmp_path / "salary_prompts.csv"
    bad.write_text("prompt\nHello\n")
    with pytest.raises(InputError, match="field 'prompts'"):
        load_kearney_prompts(bad, "salary")
    bad.write_text("")
    with pytest.raises(InputError, match="empty"):
        load_kearney_prompts(bad, "salary")


def test_base_prompt_loader_accepts_the_corpus_format() -> None:
    from cueaudit.probing.base_prompts import load_base_prompts

    salary = load_base_prompts(FIX / "salary_prompts.csv", "salary")
    assert salary["base_id"].to_list() == ["salary-00001"]
    assert salary["text"][0].endswith("US dollars and no additional text.")
