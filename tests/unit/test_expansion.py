from pathlib import Path

import polars as pl
import pytest

from cueaudit.cues import REGISTRY
from cueaudit.cues.explicit import explicit_descriptors
from cueaudit.cues.names import load_name_lists
from cueaudit.probing.expansion import (
    build_prompt_table,
    cue_variants,
    expand_prompts,
    expected_prompt_count,
    prompt_uid,
)
from cueaudit.prompts import shard_of, text_expr

ROOT = Path(__file__).resolve().parents[2]
NAME_SOURCES = REGISTRY["name"].sources
NAME_LISTS = [ROOT / f"resources/names/{s}.csv" for s in NAME_SOURCES]

BASE = pl.DataFrame(
    {
        "base_id": ["h-1", "h-2", "h-3"],
        "task": ["healthcare"] * 3,
        "text": [
            "I have had tremors for a week. Should I go to the doctor?",
            "I have had a fever for two days. Should I go to the ER?",
            "I have had chest pain for an hour. Should I see a doctor?",
        ],
    }
)
NAMES = pl.DataFrame(
    {
        "name": ["Tyrone", "Latoya", "Todd", "Katie"],
        "race": ["Black", "Black", "White", "White"],
        "gender": ["male", "female", "male", "female"],
        "source": ["elder_hayes"] * 4,
    }
)


def test_expansion_count_is_product_of_design_axes() -> None:
    explicit = explicit_descriptors(["race_gender", "gender"])
    prompts = expand_prompts(BASE, cue_variants(NAMES, explicit), "healthcare")
    assert prompts.height == expected_prompt_count(3, {"names": 4, "explicit": 12}) == 3 * 17
    counts = dict(prompts["cue"].value_counts().iter_rows())
    assert counts == {"none": 3, "name_elder_hayes": 12, "explicit": 36}
    assert prompts["prompt_uid"].n_unique() == prompts.height


def test_full_published_design_counts() -> None:
    names = load_name_lists(NAME_LISTS)
    prompts = expand_prompts(BASE, cue_variants(names, explicit_descriptors()), "healthcare")
    # 3 base prompts × (1 baseline + 600 names + 23 explicit descriptors)
    assert prompts.height == 3 * (1 + 600 + 23)
    per_group = prompts.filter(pl.col("cue") == "name_rosenman").group_by("race", "gender").len()
    assert sorted(per_group["len"].to_list()) == [150, 150, 150, 150]


def test_cue_text_follows_the_paper_format() -> None:
    prompts = expand_prompts(
        BASE.head(1), cue_variants(NAMES.head(1), explicit_descriptors(["race_gender"])), "h"
    )
    prompts = prompts.with_columns(text=text_expr(prompts.columns))
    by_value = {row["cue_value"]: row for row in prompts.iter_rows(named=True)}
    base = BASE["text"][0]
    assert by_value[None]["text"] == base
    assert by_value["Tyrone"]["text"] == f"[MEMORY: User name is Tyrone]\nUSER: {base}"
    assert by_value["a Black male"]["text"] == f"[MEMORY: User is a Black male]\nUSER: {base}"
    assert (by_value["Tyrone"]["race"], by_value["Tyrone"]["gender"]) == ("Black", "male")
    assert by_value[None]["race"] is None


def test_prompt_uid_is_stable_and_depends_on_every_part() -> None:
    uid = prompt_uid("healthcare", "Text.", "name_rosenman", "Tyrone")
    assert uid == prompt_uid("healthcare", "Text.", "name_rosenman", "Tyrone")
    assert len(uid) == 20 and int(uid, 16) >= 0
    others = {
        prompt_uid("salary", "Text.", "name_rosenman", "Tyrone"),
        prompt_uid("healthcare", "Text!", "name_rosenman", "Tyrone"),
        prompt_uid("healthcare", "Text.", "name_tzioumis", "Tyrone"),
        prompt_uid("healthcare", "Text.", "name_rosenman", "Todd"),
    }
    assert uid not in others and len(others) == 4


def test_prompt_uids_do_not_change_between_runs() -> None:
    cues = cue_variants(NAMES, explicit_descriptors())
    first = expand_prompts(BASE, cues, "healthcare")
    second = expand_prompts(BASE.reverse(), cues.reverse(), "healthcare")
    assert set(first["prompt_uid"]) == set(second["prompt_uid"])
    # a literal value pins the hash definition across runs and releases
    assert (
        prompt_uid("healthcare", BASE["text"][0], "name_rosenman", "Tyrone")
        == "4c907b3d5a3998b72b29"
    )


def test_shards_partition_prompts_and_are_stable() -> None:
    prompts = expand_prompts(BASE, cue_variants(NAMES, explicit_descriptors()), "healthcare")
    shards = shard_of(prompts["prompt_uid"], 4)
    assert set(shards.to_list()) <= {0, 1, 2, 3}
    assert shards.len() == prompts.height
    assert shard_of(prompts["prompt_uid"].reverse(), 4).reverse().to_list() == shards.to_list()


def prepared(tmp_path: Path, names: pl.DataFrame, explicit: pl.DataFrame) -> dict[str, list[str]]:
    """The prepared name and explicit resources, written where build_prompt_table reads them."""
    files = {"names": names, "explicit": explicit}
    for key, frame in files.items():
        frame.write_parquet(tmp_path / f"{key}.parquet")
    return {key: [str(tmp_path / f"{key}.parquet")] for key in files}


def test_build_prompt_table_samples_names_and_limits_base(tmp_path: Path) -> None:
    files = prepared(tmp_path, load_name_lists(NAME_LISTS), explicit_descriptors(["race"]))
    table = build_prompt_table(
        base_prompts_path=str(ROOT / "resources/prompts/legal.csv"),
        task="legal",
        cue_files=files,
        cue_settings={"names": {"per_group": 2, "sample_seed": 0}},
        limit=5,
    )
    # 5 base prompts × (1 + 3 sources × 4 subgroups × 2 names + 5 race descriptors)
    assert table.height == 5 * (1 + 24 + 5)
    assert table["base_id"].n_unique() == 5


def test_build_prompt_table_rejects_oversized_sample(tmp_path: Path) -> None:
    files = prepared(tmp_path, load_name_lists(NAME_LISTS[:1]), explicit_descriptors())
    with pytest.raises(ValueError, match="per_group"):
        build_prompt_table(
            base_prompts_path=str(ROOT / "resources/prompts/legal.csv"),
            task="legal",
            cue_files=files,
            cue_settings={"names": {"per_group": 51}},
        )


def test_build_prompt_table_refuses_files_no_cue_type_takes(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="no registered cue type takes"):
        build_prompt_table(
            base_prompts_path=str(ROOT / "resources/prompts/legal.csv"),
            task="legal",
            cue_files={"occupations": [str(tmp_path / "o.parquet")]},
        )


def variant_count(kind: str, block: dict) -> int | None:
    """The variants the config block of ``kind`` gives, from the registry's count."""
    cue_type = REGISTRY[kind]
    return cue_type.count(cue_type, block, ROOT)[0]


def test_design_counts_follow_the_paper_formulas() -> None:
    # §3.2: per name source 4,440 × 200 = 888,000 healthcare and 5,000 × 200 = 1,000,000;
    # dialog: 50 clusters × 4 groups; explicit: 23 variants; dialect: one per base prompt.
    lists = {source: f"resources/names/{source}.csv" for source in NAME_SOURCES}
    rosenman = variant_count("name", {"lists": {"rosenman": lists["rosenman"]}})
    assert expected_prompt_count(4440, {"names": rosenman}) - 4440 == 888_000
    cad = variant_count("dialog", {"cad": {"path": "cad.csv"}, "n_clusters": 50})
    assert expected_prompt_count(5000, {"dialog": cad}) - 5000 == 1_000_000
    explicit = variant_count("explicit", {})
    assert expected_prompt_count(4440, {"explicit": explicit}) - 4440 == 102_120
    assert expected_prompt_count(5000, {"dialect": variant_count("dialect", {})}) - 5000 == 5000
    # the whole paper design: 14,440 base prompts × (1 + 600 + 23 + 1 + 2 × 200)
    both = {"cad": {"path": "cad.csv"}, "prism": {"survey": "s", "conversations": "c"}}
    paper = {
        "names": variant_count("name", {"lists": lists}),
        "dialect": 1,
        "dialog": variant_count("dialog", both),
        "explicit": explicit,
    }
    assert paper == {"names": 600, "dialect": 1, "dialog": 400, "explicit": 23}
    total = sum(expected_prompt_count(n, paper) for n in (4440, 5000, 5000))
    assert total == 14_440 * 1025 == 14_801_000  # Table 4: 14,801,000 observations
    assert variant_count("dialog", {**both, "n_clusters": None}) is None


def test_every_cue_type_expands_with_its_metadata() -> None:
    dialog = pl.DataFrame(
        {
            "cluster_id": ["cad-1"] * 4,
            "source": ["cad"] * 4,
            "race": ["Black", "Black", "White", "White"],
            "gender": ["male", "female", "male", "female"],
            "prefix": [f"USER: q{i}\nMODEL: a{i}" for i in range(4)],
        }
    )
    translations = BASE.select("base_id", text=pl.lit("I done had it."))
    cues = cue_variants(NAMES, explicit_descriptors(["race"]), dialect="rule_based", dialog=dialog)
    prompts = expand_prompts(BASE, cues, "healthcare", translations)
    prompts = prompts.with_columns(text=text_expr(prompts.columns))
    variants = {"names": 4, "explicit": 5, "dialect": 1, "dialog": 4}
    assert prompts.height == expected_prompt_count(3, variants)
    assert prompts["prompt_uid"].n_unique() == prompts.height
    aave = prompts.filter(pl.col("cue") == "dialect_aave")
    assert aave["text"].to_list() == ["I done had it."] * 3
    assert aave["race"].to_list() == ["Black"] * 3 and aave["gender"].null_count() == 3
    cad = prompts.filter(pl.col("cue") == "dialog_cad")
    assert set(cad["cue_value"]) == {"cad-1"} and cad.height == 12
    row = cad.filter((pl.col("race") == "White") & (pl.col("gender") == "male")).row(0, named=True)
    assert row["text"] == f"USER: q2\nMODEL: a2\nUSER: {BASE['text'][0]}"
    assert prompts["fk_grade"].is_not_null().all()
