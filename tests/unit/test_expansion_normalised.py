"""The normalised prompt tables (prefix + body parts) hold exactly the prompts, uids and
grades of the per-row formula, and their readers (race prediction, inference shards) see the
same texts as before."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
import pytest

from cueaudit.cues.explicit import explicit_descriptors
from cueaudit.inference.runner import shard_prompts
from cueaudit.probing import readability
from cueaudit.probing.expansion import PROMPT_SCHEMA, cue_variants, expand_prompts
from cueaudit.probing.race_prediction import (
    INSTRUCTION,
    build_race_prediction_table,
    race_prediction_prompts,
    write_race_prediction_table,
)
from cueaudit.prompts import scan_prompts, shard_of, text_expr

BASE = pl.DataFrame(
    {
        "base_id": ["h-1", "h-2", "h-3"],
        "task": ["healthcare"] * 3,
        "text": [
            "I have had tremors for a week. Should I go to the doctor?",
            "my knee hurts when i walk and it is swollen",
            "Chest pain! Should I see a doctor? Answer Yes or No.",
        ],
    }
)
TRANSLATIONS = pl.DataFrame(
    {
        "base_id": ["h-3", "h-1", "h-2"],  # not in the base prompts' order
        "text": ["Chest be hurtin'! Should I see a doctor?", "I done had tremors.", "knee hurt"],
    }
)
NAMES = pl.DataFrame(
    {
        "name": ["Tyrone", "Latoya", "Todd", "Katie"],
        "race": ["Black", "Black", "White", "White"],
        "gender": ["male", "female", "male", "female"],
        "source": ["elder_hayes", "elder_hayes", "rosenman", "rosenman"],
    }
)
GROUPS = [("Black", "male"), ("Black", "female"), ("White", "male"), ("White", "female")]
# Histories that end inside a sentence, on a terminator, and with too few words to count.
HISTORIES = [
    "USER: hi there you\nMODEL: hello",
    "USER: Can you help me plan a trip?\nMODEL: Sure. Where to?",
    "USER: ok",
    "USER: What should I eat before a long run tomorrow morning\nMODEL: Oats, a banana!",
]
DIALOG = pl.DataFrame(
    [
        (f"{source}-1", source, race, gender, f"{history} ({source})")
        for source in ("cad", "prism")
        for (race, gender), history in zip(GROUPS, HISTORIES, strict=True)
    ],
    schema=["cluster_id", "source", "race", "gender", "prefix"],
    orient="row",
)


def _cues() -> pl.DataFrame:
    explicit = explicit_descriptors(["race", "gender"])
    return cue_variants(NAMES, explicit, dialect="rule_based:v1", dialog=DIALOG)


def _expected(task: str, cues: pl.DataFrame) -> list[dict[str, object]]:
    """The prompts by the per-row formula of the text tables: one dict per (cue, base) row."""
    dialect = dict(TRANSLATIONS.iter_rows())
    rows = []
    for cue in cues.iter_rows(named=True):
        for base_id, base_text in BASE.select("base_id", "text").iter_rows():
            main = dialect[base_id] if cue["body"] == "dialect" else base_text
            prefix = cue["prefix"]
            parts = [task, base_text, cue["cue"], cue["cue_value"] or ""]
            if cue["uid_variant"] is not None:
                parts.append(cue["uid_variant"])
            uid = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:20]
            rows.append(
                {
                    "prompt_uid": uid,
                    "base_id": base_id,
                    "cue": cue["cue"],
                    "cue_value": cue["cue_value"],
                    "text": main if prefix is None else f"{prefix} {main}",
                    "fk_grade": readability.fk_grade([main] if prefix is None else [prefix, main]),
                }
            )
    return rows


def test_normalised_table_holds_the_per_row_prompts_uids_and_grades() -> None:
    cues = _cues()
    assert set(cues["cue_type"]) == {"none", "name", "explicit", "dialect", "dialog"}
    table = expand_prompts(BASE, cues, "healthcare", TRANSLATIONS)
    assert table.schema == pl.Schema(PROMPT_SCHEMA)
    assert "text" not in table.columns
    got = table.with_columns(text=text_expr(table.columns))
    expected = _expected("healthcare", cues)
    # no cue, 4 names, 5 race + 2 gender descriptors, AAVE, 2 sources x 4 dialogs
    assert got.height == len(expected) == 3 * (1 + 4 + 7 + 1 + 8)
    keys = ("prompt_uid", "base_id", "cue", "cue_value", "text", "fk_grade")
    assert got.select(keys).to_dicts() == expected  # fk_grade bit-identical
    # each distinct part once: a prefix per distinct cue prefix, a body per base / translation
    assert table["body"].n_unique() == 6
    assert table["prefix"].n_unique() == cues["prefix"].n_unique()
    assert set(table.filter(pl.col("cue").is_in(["none", "dialect_aave"]))["prefix"]) == {""}


def test_parts_survive_the_parquet_round_trip(tmp_path: Path) -> None:
    table = expand_prompts(BASE, _cues(), "healthcare", TRANSLATIONS)
    table.write_parquet(tmp_path / "p.parquet")
    back = pl.read_parquet(tmp_path / "p.parquet")
    assert back.schema["prefix"] == back.schema["body"] == pl.Categorical()
    assert back.equals(table)
    texts = scan_prompts(tmp_path / "p.parquet").select("prompt_uid", "text").collect()
    assert texts.to_dicts() == [
        {"prompt_uid": r["prompt_uid"], "text": r["text"]} for r in _expected("healthcare", _cues())
    ]


@pytest.mark.parametrize(
    "parts",
    [
        ["Hello! My name is Aaliyah Nguyen", "Hi, I'm Jose.", "USER: ok\nMODEL: fine", "...", "x"],
        ["One two three four five six", "seven eight", "Is it illegal?", "and then none"],
    ],
)
def test_outer_grades_equal_the_scalar_combination(parts: list[str]) -> None:
    left = [readability.EMPTY, *(readability.count(p) for p in parts)]
    right = [readability.count(p) for p in parts]
    grid = readability.outer_grades(left, right)
    for i, lhs in enumerate([None, *parts]):
        for j, rhs in enumerate(parts):
            components = [rhs] if lhs is None else [lhs, rhs]
            assert grid[i, j] == readability.fk_grade(components)


def test_race_prediction_texts_are_the_instruction_around_each_prompt(tmp_path: Path) -> None:
    paths = []
    for task in ("healthcare", "legal"):
        table = expand_prompts(BASE, _cues(), task, TRANSLATIONS)
        paths.append(tmp_path / f"{task}.parquet")
        table.write_parquet(paths[-1])
    out = tmp_path / "race_prediction.parquet"
    assert write_race_prediction_table(paths, out, chunk_rows=10) == 2 * 3 * 21
    written = pl.read_parquet(out)
    assert written.equals(build_race_prediction_table(paths))
    assert written.schema["prefix"] == pl.Categorical()
    source = pl.concat([scan_prompts(p).collect() for p in paths])
    got = written.with_columns(text=text_expr(written.columns))
    assert got["text"].to_list() == [INSTRUCTION.format(prompt=t) for t in source["text"]]
    assert got["source_prompt_uid"].to_list() == source["prompt_uid"].to_list()
    expected_uids = [
        hashlib.sha256(f"race_prediction\x1f{u}".encode()).hexdigest()[:20]
        for u in source["prompt_uid"]
    ]
    assert got["prompt_uid"].to_list() == expected_uids
    # a table with a text column (not normalised) gives the same prompts
    plain = race_prediction_prompts(source)
    assert plain.select(text_expr(plain.columns))["text"].to_list() == got["text"].to_list()


def test_shard_reads_equal_the_filtered_full_table(tmp_path: Path) -> None:
    table = expand_prompts(BASE, _cues(), "healthcare", TRANSLATIONS)
    normalised, plain = tmp_path / "normalised.parquet", tmp_path / "plain.parquet"
    table.write_parquet(normalised)
    # a normalised table batches by its exact prefix, a text table by the group it writes
    by_value = pl.concat_str([pl.col("cue"), pl.col("cue_value").fill_null("")], separator="\x1f")
    full = table.with_columns(text=text_expr(table.columns), group=by_value).drop("prefix", "body")
    full.write_parquet(plain)
    full.drop("group").write_parquet(tmp_path / "ungrouped.parquet")
    assert set(shard_prompts(tmp_path / "ungrouped.parquet", 0, 1)["group"]) == {""}
    by_prefix = table.select("prompt_uid", prefix=pl.col("prefix").cast(pl.String))
    seen = []
    for shard in range(4):
        expected = full.filter(shard_of(full["prompt_uid"], 4) == shard).select(
            "prompt_uid", "text", "group"
        )
        for path in (normalised, plain):
            got = shard_prompts(path, shard, 4)
            assert got.schema == pl.Schema({"prompt_uid": pl.String, "text": pl.String,
                                            "group": pl.String})  # fmt: skip
            assert got.drop("group").equals(expected.drop("group"))
            if path == plain:
                assert got.equals(expected)
            else:
                prefixes = got.join(by_prefix, on="prompt_uid")
                assert prefixes["group"].to_list() == prefixes["prefix"].to_list()
                assert all(t.startswith(g) for t, g in got.select("text", "group").iter_rows())
        seen += expected["prompt_uid"].to_list()
    assert sorted(seen) == sorted(full["prompt_uid"].to_list())
    # the four dialog histories of one cluster share a cue value but are four groups
    dialog = table.filter(pl.col("cue_type") == "dialog")
    assert dialog["prefix"].n_unique() > dialog["cue_value"].n_unique()


def test_normalised_table_stores_each_long_prefix_once() -> None:
    """Memory sanity, not a timing: 40 base prompts under 8 dialog histories of about 2,400
    characters take a fraction of the bytes their assembled texts would."""
    histories = [f"{h} " + "and then we talked about it at length. " * 60 for h in HISTORIES]
    dialog = DIALOG.with_columns(prefix=pl.Series(histories * 2))
    base = pl.DataFrame(
        {
            "base_id": [f"b{i}" for i in range(40)],
            "task": ["h"] * 40,
            "text": [f"Question number {i}: should I see a doctor?" for i in range(40)],
        }
    )
    cues = cue_variants(None, None, dialog=dialog)
    table = expand_prompts(base, cues, "h")
    text_bytes = sum(
        (0 if p is None else len(p) + 1) + len(b)
        for p in cues["prefix"].to_list()
        for b in base["text"].to_list()
    )
    assert text_bytes > 750_000
    assert table.height == 40 * 9
    assert table.estimated_size() < text_bytes / 4


def test_the_database_stores_parts_and_its_prompts_view_has_the_texts(tmp_path: Path) -> None:
    import duckdb

    from cueaudit import store

    table = expand_prompts(BASE, _cues(), "healthcare", TRANSLATIONS)
    table.write_parquet(tmp_path / "prompts.parquet")
    answers = table.select(
        "prompt_uid", "task", model=pl.lit("m"), seed=pl.lit(0, pl.Int64),
        answer=pl.lit(1.0), parse_error=pl.lit(None, pl.String),
        completion=pl.lit("Yes"), finish_reason=pl.lit("stop"), cache_hit=pl.lit(False),
    )  # fmt: skip
    answers.write_parquet(tmp_path / "answers.parquet")
    store.build_database(
        tmp_path / "db.duckdb",
        prompts=[tmp_path / "prompts.parquet"],
        responses=[tmp_path / "answers.parquet"],
        outcomes=[tmp_path / "answers.parquet"],
    )
    con = duckdb.connect(str(tmp_path / "db.duckdb"), read_only=True)
    kinds = dict(
        con.execute("SELECT table_name, table_type FROM information_schema.tables").fetchall()
    )
    assert (kinds["prompts"], kinds[store.PROMPT_PARTS]) == ("VIEW", "BASE TABLE")
    assert "text" not in con.sql(f"SELECT * FROM {store.PROMPT_PARTS} LIMIT 0").columns
    stored = con.sql("SELECT prompt_uid, text FROM prompts").pl()
    expected = {r["prompt_uid"]: r["text"] for r in _expected("healthcare", _cues())}
    assert dict(stored.iter_rows()) == expected
    memory = store.connect(prompts=[tmp_path / "prompts.parquet"], outcomes=[])
    assert dict(memory.sql("SELECT prompt_uid, text FROM prompts").fetchall()) == expected


def test_no_base_prompts_give_an_empty_table_of_the_schema() -> None:
    table = expand_prompts(BASE.head(0), _cues(), "healthcare", TRANSLATIONS)
    assert table.height == 0 and table.schema == pl.Schema(PROMPT_SCHEMA)
    assert race_prediction_prompts(table).height == 0
