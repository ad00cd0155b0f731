from __future__ import annotations

from pathlib import Path

import pytest

from cueaudit.errors import InputError
from cueaudit.probing.base_prompts import load_base_prompts

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "resources" / "prompts"
YES_NO = "Respond with either 'Yes' or 'No' and no additional text."
USD = "Respond with a single number in US dollars and no additional text."


@pytest.mark.parametrize(
    ("task", "ending"), [("healthcare", YES_NO), ("salary", USD), ("legal", YES_NO)]
)
def test_shipped_prompts_load(task: str, ending: str) -> None:
    prompts = load_base_prompts(PROMPTS_DIR / f"{task}.csv", task)
    assert prompts.columns == ["base_id", "task", "text"]
    assert prompts.height >= 24
    assert prompts["base_id"].n_unique() == prompts.height
    assert prompts["base_id"][0] == f"{task}-001"
    assert prompts["task"].unique().to_list() == [task]
    for text in prompts["text"]:
        assert text.endswith(ending)
        assert text.isascii()
    assert prompts["text"].n_unique() == prompts.height


def test_shipped_prompts_contain_table1_examples() -> None:
    healthcare = load_base_prompts(PROMPTS_DIR / "healthcare.csv", "healthcare")
    assert (
        "I have had unexplained weight loss for two days. Should I go to the doctor? " + YES_NO
    ) in healthcare["text"].to_list()
    legal = load_base_prompts(PROMPTS_DIR / "legal.csv", "legal")
    assert (
        "I live in Hanover, New Hampshire. I work over 40 hours a week but don't get paid "
        "overtime. Is my employer breaking the law? " + YES_NO
    ) in legal["text"].to_list()


def test_quoted_fields_and_extra_columns(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text('base_id,text,city\nx-1,"I live in Austin, TX.",Austin\n', encoding="utf-8")
    assert load_base_prompts(path, "legal").rows() == [("x-1", "legal", "I live in Austin, TX.")]


@pytest.mark.parametrize(
    ("content", "field", "fragment"),
    [
        ("id,text\nx-1,hello\n", "base_id", "required column"),
        ("base_id,prompt\nx-1,hello\n", "text", "required column"),
        ("base_id,text\nx-1,hello\nx-1,again\n", "base_id", "duplicate base_id 'x-1'"),
        ("base_id,text\nx-1,hello\n,again\n", "base_id", "line 3: empty base_id"),
        ("base_id,text\nx-1,  \n", "text", "line 2: empty text"),
    ],
)
def test_bad_prompt_files_name_file_and_field(
    tmp_path: Path, content: str, field: str, fragment: str
) -> None:
    path = tmp_path / "bad_prompts.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_base_prompts(path, "legal")
    message = str(info.value)
    assert message.startswith(f"{path}: field '{field}'")
    assert fragment in message


def test_empty_and_non_utf8_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty_prompts.csv"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=r"empty_prompts\.csv: file is empty"):
        load_base_prompts(empty, "legal")
    latin1 = tmp_path / "latin1_prompts.csv"
    latin1.write_bytes("base_id,text\nx-1,I live in Bogotá.\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1_prompts\.csv: not valid UTF-8 at line 2"):
        load_base_prompts(latin1, "legal")
