"""The cue registry: a new cue type is one module (variants, count) plus one registry row,
and the study's tables (labels, export names, simulator design) are derived from the rows."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from cueaudit.cues import REGISTRY
from cueaudit.cues.cue_type import (
    CueCondition,
    CueRegistry,
    CueType,
    DecisionCue,
    VariantCount,
    variant_rows,
)
from cueaudit.cues.dialog.common import format_prefix
from cueaudit.cues.explicit import explicit_descriptors
from cueaudit.cues.registry import EXPLICIT_CUE_TYPE
from cueaudit.cues.vocabulary import CUE_TAGS
from cueaudit.probing import readability
from cueaudit.probing.expansion import build_prompt_table, cue_variants, expand_prompts
from cueaudit.probing.export import CUE_NAMES
from cueaudit.probing.templates import TEMPLATES
from cueaudit.probing.vocabulary import CUE_LABELS
from tests.helpers.probing_simulator import CUE_DESIGN, cue_design

ROOT = Path(__file__).resolve().parents[2]
BASE = pl.DataFrame(
    {
        "base_id": ["h-1", "h-2"],
        "task": ["healthcare"] * 2,
        "text": [
            "I have had tremors for a week. Should I go to the doctor?",
            "I have had a fever for two days. Should I go to the ER?",
        ],
    }
)
NAMES = pl.DataFrame(
    {"name": ["Tyrone", "Katie"], "race": ["Black", "White"], "gender": ["male", "female"],
     "source": ["rosenman"] * 2}
)  # fmt: skip
OCCUPATIONS = pl.DataFrame(
    {
        "occupation": ["a nurse", "a welder", "a cashier"],
        "source": ["bls"] * 3,
        "race": ["Black", "White", "Black"],
        "gender": ["female", "male", "male"],
    }
)


# The toy cue type: two module-level functions and one row.
def occupation_variants(cue_type: CueType[pl.DataFrame], frame: pl.DataFrame) -> pl.DataFrame:
    return variant_rows(cue_type, frame, source=pl.col("source"), value=pl.col("occupation"))


def occupation_count(cue_type: CueType[pl.DataFrame], block: dict, base: Path) -> VariantCount:
    return OCCUPATIONS.height, None


OCCUPATION = CueType(
    kind="occupation",
    config_key="occupations",
    id_pattern="occupation_{source}",
    conditions=(CueCondition("bls", "Occupation (BLS)", "occupation_bls"),),
    variants=occupation_variants,
    count=occupation_count,
    default_template="[MEMORY: User works as {value}]\nUSER: {prompt}",
    races=("Black", "White"),
)


@pytest.fixture
def occupation() -> Iterator[CueType[pl.DataFrame]]:
    REGISTRY.register(OCCUPATION)
    try:
        yield OCCUPATION
    finally:
        REGISTRY.unregister(OCCUPATION.kind)


def test_a_registered_cue_type_expands_with_no_other_change(occupation: CueType) -> None:
    cues = cue_variants(NAMES, explicit_descriptors(["gender"]), occupations=OCCUPATIONS)
    # registry order: baseline, names, (dialect, dialog: not given), explicit, occupation
    assert cues["cue"].to_list() == ["none", "name_rosenman", "name_rosenman", "explicit",
                                     "explicit"] + ["occupation_bls"] * 3  # fmt: skip
    prompts = expand_prompts(BASE, cues, "healthcare")
    assert prompts.height == 2 * (1 + 2 + 2 + 3)
    assert prompts["prompt_uid"].n_unique() == prompts.height
    nurse = prompts.filter(pl.col("cue_value") == "a nurse").sort("base_id").row(0, named=True)
    base = BASE["text"][0]
    assert nurse["prefix"] + nurse["body"] == f"[MEMORY: User works as a nurse]\nUSER: {base}"
    assert (nurse["cue_type"], nurse["cue_source"]) == ("occupation", "bls")
    assert (nurse["race"], nurse["gender"]) == ("Black", "female")
    assert nurse["fk_grade"] == readability.fk_grade(["[MEMORY: User works as a nurse]\nUSER:",
                                                      base])  # fmt: skip
    assert occupation.condition_ids == ("occupation_bls",)
    assert REGISTRY.labels()["occupation_bls"] == "Occupation (BLS)"
    assert REGISTRY.export_names()["occupation_bls"] == "occupation_bls"
    assert cue_design()["occupation_bls"] == ("occupation", "bls", ("Black", "White"), True)
    assert occupation.resource_files({}) == ("results/resources/occupations.parquet",)


def test_build_prompt_table_reads_a_registered_resource(
    occupation: CueType, tmp_path: Path
) -> None:
    paths = {k: tmp_path / f"{k}.parquet" for k in ("names", "explicit", "occupations")}
    NAMES.write_parquet(paths["names"])
    explicit_descriptors(["race"]).write_parquet(paths["explicit"])
    OCCUPATIONS.write_parquet(paths["occupations"])
    table = build_prompt_table(
        base_prompts_path=str(ROOT / "resources/prompts/legal.csv"),
        task="legal",
        cue_files={key: [str(path)] for key, path in paths.items()},
        limit=3,
    )
    counts = dict(table["cue"].value_counts().iter_rows())
    assert counts == {"none": 3, "name_rosenman": 6, "explicit": 15, "occupation_bls": 9}


def test_a_resource_no_cue_type_takes_is_refused() -> None:
    assert "occupation" not in REGISTRY  # the fixture unregistered it
    with pytest.raises(TypeError, match="occupations"):
        cue_variants(NAMES, None, occupations=OCCUPATIONS)


def test_every_condition_has_a_label_an_export_name_and_a_design() -> None:
    ids = REGISTRY.cue_ids()
    assert len(ids) == len(set(ids)) == 7
    assert set(CUE_LABELS) == set(CUE_NAMES) == {"none", *ids}
    assert set(CUE_DESIGN) == set(ids)
    assert all(CUE_LABELS[cid] and CUE_NAMES[cid] for cid in CUE_LABELS)


def test_derived_tables_equal_the_former_literals() -> None:
    assert list(CUE_LABELS.items()) == [
        ("none", "No cue"),
        ("dialect_aave", "Dialect (AAVE)"),
        ("dialog_cad", "Dialog (CAD)"),
        ("dialog_prism", "Dialog (PRISM)"),
        ("explicit", "Explicit"),
        ("name_elder_hayes", "Name (EH)"),
        ("name_rosenman", "Name (R)"),
        ("name_tzioumis", "Name (T)"),
    ]
    assert CUE_NAMES == {
        "none": "neutral",
        "explicit": "explicit",
        "dialect_aave": "dialect",
        "name_rosenman": "name_specific_rosenman",
        "name_elder_hayes": "name_specific_hayes_elder",
        "name_tzioumis": "name_specific_tzioumis",
        "dialog_cad": "convo_prefix",
        "dialog_prism": "convo_prefix_prism",
    }
    assert list(CUE_DESIGN.items()) == [
        ("dialect_aave", ("dialect", "aave", ("Black",), False)),
        ("dialog_cad", ("dialog", "cad", ("Black", "White"), True)),
        ("dialog_prism", ("dialog", "prism", ("Black", "White"), True)),
        ("explicit", ("explicit", None, ("Black", "White"), True)),
        ("name_elder_hayes", ("name", "elder_hayes", ("Black", "White"), True)),
        ("name_rosenman", ("name", "rosenman", ("Black", "White"), True)),
        ("name_tzioumis", ("name", "tzioumis", ("Black", "White"), True)),
    ]
    assert REGISTRY.export_columns() == {"name": ("name",), "convo_concat_id": ("dialog",)}
    assert [t.kind for t in REGISTRY] == ["name", "dialect", "dialog", "explicit"]


def test_a_study_can_reword_a_template_without_changing_prompt_ids() -> None:
    reworded = {**TEMPLATES, "explicit": "I am {value}. {prompt}"}
    explicit = explicit_descriptors(["race_gender"]).head(1)
    mine = expand_prompts(BASE, cue_variants(None, explicit, templates=reworded), "h")
    paper = expand_prompts(BASE, cue_variants(None, explicit), "h")
    assert mine["prefix"][2] + mine["body"][2] == f"I am a Black male. {BASE['text'][0]}"
    assert (
        paper["prefix"][2] + paper["body"][2]
        == f"[MEMORY: User is a Black male]\nUSER: {BASE['text'][0]}"
    )
    assert mine["prompt_uid"].to_list() == paper["prompt_uid"].to_list()


def test_registration_refuses_clashes() -> None:
    registry = CueRegistry([EXPLICIT_CUE_TYPE])
    with pytest.raises(
        ValueError, match="kind, config key, condition id, decision cue name already taken"
    ):
        registry.register(EXPLICIT_CUE_TYPE)
    explicit_again = DecisionCue("explicit", shows="first_name", races=("Black", "White"))
    with pytest.raises(ValueError, match="'occupation': decision cue name already taken"):
        registry.register(replace(OCCUPATION, decision=explicit_again))
    with pytest.raises(ValueError, match="condition id already taken"):
        registry.register(replace(OCCUPATION, id_pattern="explicit", conditions=(
            CueCondition(None, "Explicit again", "x"),)))  # fmt: skip
    with pytest.raises(ValueError, match="condition id already taken"):
        registry.register(replace(OCCUPATION, id_pattern="none", conditions=(
            CueCondition(None, "Baseline", "x"),)))  # fmt: skip
    assert [t.kind for t in registry] == ["explicit"]


def test_the_decision_cues_are_the_registry_rows_with_a_decision_use() -> None:
    cues = REGISTRY.decision_cues()
    assert list(cues) == ["name_pair", "first_name", "dialect", "explicit"]
    assert cues["first_name"] is REGISTRY["name"].decision
    assert cues["explicit"].races == ("Black", "White", "Hispanic", "Asian")
    assert REGISTRY["explicit"].races == ("Black", "White")  # the probing descriptors' races
    assert [n for n, c in cues.items() if c.fills_bundles] == ["name_pair", "explicit"]
    assert {n: c.signals_per_profile(5) for n, c in cues.items()} == {
        "name_pair": 40, "first_name": 20, "dialect": 2, "explicit": 8}  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"shows": "accent"}, "shows 'accent', not one of"),
        ({"descriptor": None}, "gives a descriptor exactly when it shows a statement"),
        ({"shows": "first_name"}, "gives a descriptor exactly when it shows a statement"),
        ({"races": ("Black", "Martian")}, r"not \['Martian'\]"),
        ({"genders": ("nonbinary",)}, r"not \['nonbinary'\]"),
        ({"races": (), "genders": ()}, "at least one of them"),
    ],
)
def test_a_malformed_decision_cue_is_refused(changes: dict, message: str) -> None:
    statement = DecisionCue("pronoun", shows="statement", races=(), descriptor=lambda r, g: "x")
    with pytest.raises(ValueError, match=message):
        replace(statement, **changes)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"default_template": "[MEMORY: {prompt}] {value}"}, "must end with ' {prompt}'"),
        ({"default_template": "{value}\nUSER:\n{prompt}"}, "must end with ' {prompt}'"),
        ({"default_template": "USER: {prompt}"}, "needs one {value}"),
        ({"default_template": "{value} and {value}: {prompt}"}, "needs one {value}"),
        ({"default_template": "[JOB: {value}]\nUSER: {prompt}"}, "has the tags ['JOB']"),
        ({"body": "dialect"}, "gives bodies exactly when its body is not 'base'"),
        ({"id_pattern": "{source}_{source}"}, "if it has {source} (once)"),
        ({"conditions": ()}, "no conditions"),
        ({"races": ("Black", "Martian")}, "races"),
        ({"body": "translated"}, "body"),
        ({"conditions": (CueCondition(None, "Occupation", "occupation"),)}, "distinct sources"),
        ({"id_pattern": "occupation"}, "one condition without a source"),
    ],
)
def test_malformed_rows_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        replace(OCCUPATION, **changes)


def test_variants_with_other_columns_are_refused() -> None:
    def bad(cue_type: CueType[pl.DataFrame], frame: pl.DataFrame) -> pl.DataFrame:
        return frame.select(cue=pl.lit("occupation_bls"))

    registry = CueRegistry([replace(OCCUPATION, variants=bad)])
    with pytest.raises(ValueError, match="'occupation': variants have columns"):
        cue_variants(registry=registry, occupations=OCCUPATIONS)


def test_a_cue_type_without_a_template_is_refused() -> None:
    registry = CueRegistry([replace(OCCUPATION, default_template=None)])
    with pytest.raises(ValueError, match="'occupation': no template shows its value"):
        cue_variants(registry=registry, occupations=OCCUPATIONS)


def test_the_cue_tags_are_those_of_every_template() -> None:
    wording = " ".join([*TEMPLATES.values(), format_prefix([("", "")])])
    assert tuple(sorted(set(re.findall(r"\b([A-Z]{3,}):", wording)))) == CUE_TAGS
