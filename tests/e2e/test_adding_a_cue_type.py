"""A new cue type costs four file edits: the worked example of docs/architecture.md ("Adding a
cue type"), made in a copy of the repository, gives a prompt table with the new cue's rows,
and the count printed before any job runs equals the rows built."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from cueaudit.prompts import text_expr
from tests.conftest import ROOT, tiny_config, write_config
from tests.unit.test_architecture import _tracked_files

pytestmark = pytest.mark.e2e

PAGE = ROOT / "docs/architecture.md"
MODULE_PATH = "src/cueaudit/cues/pronouns.py"
REGISTRY_PATH = "src/cueaudit/cues/registry.py"
SCHEMA_PATH = "workflow/schemas/config.schema.yaml"
RULES_PATH = "workflow/rules/cues.smk"
#: The lines of the schema that hold the cue blocks, as the example's YAML shows them.
CUE_BLOCKS = "properties:\n  cues:\n    properties:\n"


def worked_example() -> list[str]:
    """The code blocks of the page's "Adding a cue type": module, row, schema block, rule."""
    section = PAGE.read_text(encoding="utf-8").split("\n## Adding a cue type\n")[1]
    blocks = re.findall(r"^```(\w+)\n(.*?)^```", section.split("\n## ")[0], re.DOTALL | re.M)
    assert [language for language, _ in blocks] == ["python", "python", "yaml", "snakemake"]
    return [code for _, code in blocks]


def copy_repository(target: Path) -> None:
    """The repository's files as git sees them (tracked and not ignored), without results/."""
    for relative in _tracked_files():
        source = ROOT / relative
        if source.is_file() and not relative.startswith("results/"):
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / relative)


def _insert(text: str, anchor: str, addition: str) -> str:
    """``addition`` after ``anchor``, which must be in ``text`` once."""
    assert text.count(anchor) == 1, f"{anchor!r} is not in the file exactly once"
    return text.replace(anchor, anchor + addition)


def add_pronoun_cue_type(repo: Path) -> None:
    """The four edits of the worked example."""
    module, row, schema_block, rule = worked_example()
    (repo / MODULE_PATH).write_text(module, encoding="utf-8")
    registry = repo / REGISTRY_PATH
    import_line, row = row.split("\n", 1)
    text = _insert(registry.read_text(), "from __future__ import annotations\n", import_line + "\n")
    listing = re.search(r"REGISTRY: Final = CueRegistry\(\[(.*?)\]\)", text, re.DOTALL)
    assert listing is not None
    listed = listing[0].replace(listing[1], f"{listing[1]}, PRONOUN_CUE_TYPE")
    registry.write_text(text.replace(listing[0], f"{row.strip()}\n\n\n{listed}"), encoding="utf-8")
    schema = repo / SCHEMA_PATH
    assert schema_block.startswith(CUE_BLOCKS)
    cues = "  cues:\n    type: object\n    additionalProperties: false\n    properties:\n"
    block = schema_block.removeprefix(CUE_BLOCKS)
    schema.write_text(_insert(schema.read_text(), cues, block), encoding="utf-8")
    rules = repo / RULES_PATH
    rules.write_text(rules.read_text() + "\n\n" + rule, encoding="utf-8")


def changed_files(repo: Path) -> set[str]:
    """Files of the copy that the repository lacks or holds with other bytes."""
    return {
        str(path.relative_to(repo))
        for path in repo.rglob("*")
        if path.is_file()
        and not (
            (ROOT / path.relative_to(repo)).is_file()
            and (ROOT / path.relative_to(repo)).read_bytes() == path.read_bytes()
        )
    }


def test_a_new_cue_type_is_four_edits(tmp_path: Path) -> None:
    repo, work = tmp_path / "repo", tmp_path / "work"
    copy_repository(repo)
    add_pronoun_cue_type(repo)
    assert changed_files(repo) == {MODULE_PATH, REGISTRY_PATH, SCHEMA_PATH, RULES_PATH}

    config = tiny_config()
    config["cues"]["pronouns"] = {"per_gender": 2}
    write_config(work, config)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    snakefile = str(repo / "Snakefile")
    target = "results/prompts/salary.parquet"
    command = ["--snakefile", snakefile, "--directory", str(work), "--cores", "1", target]
    run = subprocess.run(
        [sys.executable, "-m", "snakemake", *command],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-6000:]

    printed = re.search(
        r"probing task salary: (\d+) prompts \(3 base prompts x (\d+) cue variants\)", run.stderr
    )
    assert printed is not None, run.stderr[-3000:]
    prompts = pl.read_parquet(work / "results/prompts/salary.parquet")
    # 3 base prompts x (no cue + 2 name sources x 4 groups + 10 explicit + 4 pronouns)
    assert int(printed[1]) == prompts.height == 3 * (1 + 8 + 10 + 4)
    pronouns = prompts.filter(pl.col("cue") == "pronoun")
    pronouns = pronouns.with_columns(text=text_expr(pronouns.columns))
    assert pronouns.height == 3 * 4
    assert pronouns.group_by("cue_value", "gender").len().sort("cue_value").rows() == [
        ("he/him", "male", 3),
        ("he/they", "male", 3),
        ("she/her", "female", 3),
        ("she/they", "female", 3),
    ]
    assert pronouns["race"].null_count() == pronouns.height
    row = pronouns.filter(pl.col("cue_value") == "she/they").row(0, named=True)
    base = prompts.filter((pl.col("cue") == "none") & (pl.col("base_id") == row["base_id"]))
    assert row["text"] == f"[MEMORY: User's pronouns are she/they]\nUSER: {base['body'][0]}"
