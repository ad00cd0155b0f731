"""A new cue type costs four file edits: the worked example of docs/architecture.md ("Adding a
cue type"), made in a copy of the repository, gives a prompt table with the new cue's rows,
the count printed before any job runs equals the rows built, and the decision audit builds
the cue into a design."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from cueaudit.prompts import text_expr
from tests.conftest import tiny_config, write_config
from tests.helpers.worked_example import (
    changed_files,
    code_blocks,
    copy_repository,
    insert_after,
)

pytestmark = pytest.mark.e2e

MODULE_PATH = "src/cueaudit/cues/pronouns.py"
REGISTRY_PATH = "src/cueaudit/cues/registry.py"
SCHEMA_PATH = "workflow/schemas/config.schema.yaml"
RULES_PATH = "workflow/rules/cues.smk"
#: In the copy: an extension arm listing the new cue passes the config checks, and the
#: decision prompt tables of its design (the library function the workflow's rule calls).
DECISION_DESIGN = """
import json, sys
from pathlib import Path
from cueaudit.config import validate_config
from cueaudit.decision.prompts import build_decision_prompts
from cueaudit.decision.profiles import load_attribute_list, load_profiles
from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.studies import STUDIES
import yaml

repo, work, arm = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
config = yaml.safe_load((work / "config/config.yaml").read_text())
config["decision"] = {"extensions": {"pronouns": {"extension": True, "design": arm}}}
validate_config(config, repo / "workflow/schemas/config.schema.yaml", STUDIES)
design = config["decision"]["extensions"]["pronouns"]["design"]
tables = build_decision_prompts(
    load_profiles(repo / "resources/decision/profiles.jsonl"),
    load_name_pairs(repo / "resources/names/elder_hayes_pairs.csv"),
    load_attribute_list(repo / "resources/decision/hobbies.txt"),
    load_attribute_list(repo / "resources/decision/neighbourhoods.txt"),
    design,
    "pronouns",
)
for task, table in tables.items():
    table.write_parquet(work / f"{task}.parquet")
print(json.dumps(list(tables)))
"""
#: The lines of the schema that hold the cue blocks, as the example's YAML shows them.
CUE_BLOCKS = "properties:\n  cues:\n    properties:\n"


def worked_example() -> list[str]:
    """The code blocks of the page's "Adding a cue type": module, row, schema block, rule."""
    return code_blocks("Adding a cue type", ["python", "python", "yaml", "snakemake"])


def add_pronoun_cue_type(repo: Path) -> None:
    """The four edits of the worked example."""
    module, row, schema_block, rule = worked_example()
    (repo / MODULE_PATH).write_text(module, encoding="utf-8")
    registry = repo / REGISTRY_PATH
    import_line, row = row.split("\n", 1)
    text = insert_after(
        registry.read_text(), "from __future__ import annotations\n", import_line + "\n"
    )
    listing = re.search(r"REGISTRY: Final = CueRegistry\(\s*\[(.*?)\]", text, re.DOTALL)
    assert listing is not None
    listed = listing[0].replace(listing[1], f"{listing[1]}, PRONOUN_CUE_TYPE")
    registry.write_text(text.replace(listing[0], f"{row.strip()}\n\n\n{listed}"), encoding="utf-8")
    schema = repo / SCHEMA_PATH
    assert schema_block.startswith(CUE_BLOCKS)
    cues = "  cues:\n    type: object\n    additionalProperties: false\n    properties:\n"
    block = schema_block.removeprefix(CUE_BLOCKS)
    schema.write_text(insert_after(schema.read_text(), cues, block), encoding="utf-8")
    rules = repo / RULES_PATH
    rules.write_text(rules.read_text() + "\n\n" + rule, encoding="utf-8")


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

    # the decision audit: the pronoun statement beside the name pairs, one per gender
    arm = {"domains": ["hiring"], "tasks": ["decision_rate_text"], "paraphrases": 1}
    arm |= {"profiles_per_tier": 1, "names_per_cell": 1, "cues": ["name_pair", "pronoun"]}
    built = subprocess.run(
        [sys.executable, "-c", DECISION_DESIGN, str(repo), str(work), json.dumps(arm)],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(repo / "src")},
        check=False,
    )
    assert built.returncode == 0, built.stderr[-6000:]
    (task,) = json.loads(built.stdout)
    rates = pl.read_parquet(work / f"{task}.parquet")
    assert sorted(set(rates["cue"])) == ["name_pair", "pronoun"]
    stated = rates.filter(pl.col("cue") == "pronoun")
    named = rates.filter(pl.col("cue") == "name_pair")
    profiles = named["profile_id"].n_unique()
    # one statement per gender and profile, against 4 races x 2 genders x 1 name per profile
    assert (named.height, stated.height) == (8 * profiles, 2 * profiles)
    assert stated["race"].null_count() == stated.height
    assert sorted(stated["pair_id"].unique()) == ["pronoun/female", "pronoun/male"]
    she = stated.filter(pl.col("gender") == "female")["text"][0]
    assert "The applicant is someone who uses she/her pronouns." in she
    assert "name not shown" in she
