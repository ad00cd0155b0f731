"""The shared DuckDB store: base tables, neutral parse rates, provenance and study views."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypedDict

import duckdb
import polars as pl
import pytest

from cueaudit import store


class Study(TypedDict):
    prompts: list[str]
    outcomes: list[str]
    responses: list[str]


def _write(rows: Mapping[str, Sequence[object]], path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pl.DataFrame(rows, strict=False).write_parquet(path)
    return str(path)


def _answers(
    uids: list[str], seed: int, task: str, **columns: Sequence[object]
) -> dict[str, Sequence[object]]:
    """Rows of model ``m``: the key columns of a response or outcome table, then ``columns``."""
    n = len(uids)
    keys: dict[str, Sequence[object]] = {
        "prompt_uid": uids,
        "model": ["m"] * n,
        "seed": [seed] * n,
        "task": [task] * n,
    }
    return keys | columns


def _advice_study(root: Path) -> Study:
    """A probing-like study: one task, prompts with a cue, numeric answers, two seeds."""
    prompts = _write(
        {
            "prompt_uid": ["a1", "a2", "a3"],
            "task": ["advice"] * 3,
            "cue": ["none", "name", "name"],
        },
        root / "prompts/advice.parquet",
    )
    outcomes = [
        _write(
            _answers(
                ["a1", "a2", "a3"],
                seed,
                "advice",
                answer=answers,
                parse_error=errors,
                p_affirmative=[0.9, None, 0.2],
            ),
            root / f"outcomes/m/seed{seed}/advice.parquet",
        )
        for seed, answers, errors in (
            (0, [1.0, None, None], [None, "no_number", "empty"]),
            (1, [None, 2.0, None], ["empty", None, "no_number"]),
        )
    ]
    responses = [
        _write(
            _answers(
                ["a1", "a2", "a3"],
                seed,
                "advice",
                completion=["Yes", "maybe", ""],
                prompt_tokens=[10, 11, 12],
                completion_tokens=[1, 2, 3],
                finish_reason=["stop", "length", "stop"],
                seconds=[0.5, 0.25, 0.25],
                backend=["hf"] * 3,
                cache_hit=hits,
            ),
            root / f"responses/m/seed{seed}/advice/0.parquet",
        )
        for seed, hits in ((0, [True, False, False]), (1, [True, True, True]))
    ]
    return {"prompts": [prompts], "outcomes": outcomes, "responses": responses}


def _decision_study(root: Path) -> Study:
    """A decision-like study: format and bundle columns, labelled answers with option
    probabilities and an answer source, no ``answer`` or ``p_affirmative`` column."""
    prompts = _write(
        {
            "prompt_uid": ["d1", "d2"],
            "task": ["hiring"] * 2,
            "format": ["rating", "choice"],
            "bundle": ["b1", "b2"],
        },
        root / "prompts/hiring.parquet",
    )
    outcomes = [
        _write(
            _answers(
                ["d1", "d2"],
                seed,
                "hiring",
                answer_label=labels,
                parse_error=errors,
                answer_source=["options", "generated"],
                p_label_yes=[0.7, 0.4],
            ),
            root / f"outcomes/m/seed{seed}/hiring.parquet",
        )
        for seed, labels, errors in (
            (0, ["A", None], [None, "no_label"]),
            (1, ["B", "A"], [None, None]),
        )
    ]
    responses = [
        _write(
            _answers(
                ["d1", "d2"],
                seed,
                "hiring",
                completion=['{"hire": "A"}', "no idea"],
                finish_reason=["stop", "stop"],
                option_logprobs=['{"A": -0.1}', None],
                tool_calls=[None, None],
                constrained=[True, False],
                backend=["vllm", "vllm"],
                cache_hit=[False, False],
            ),
            root / f"responses/m/seed{seed}/hiring/0.parquet",
        )
        for seed in (0, 1)
    ]
    return {"prompts": [prompts], "outcomes": outcomes, "responses": responses}


def _advice_views(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE VIEW advice_answers AS SELECT o.seed, p.cue, o.answer "
        "FROM outcomes o JOIN prompts p USING (prompt_uid, task) WHERE o.task = 'advice'"
    )


def _decision_views(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE VIEW decisions AS SELECT o.seed, p.format, o.answer_label "
        "FROM outcomes o JOIN prompts p USING (prompt_uid, task) WHERE o.answer_label IS NOT NULL"
    )


def _relations(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    rows = con.execute("SELECT table_name, table_type FROM information_schema.tables").fetchall()
    return dict(rows)


RATE_COLUMNS = [
    "n_responses",
    "n_parsed",
    "parse_rate",
    "n_probability",
    "main_parse_error",
    "n_main_parse_error",
]


def test_two_studies_get_their_own_views_and_parse_rate_groupings(tmp_path: Path) -> None:
    advice, decision = _advice_study(tmp_path / "a"), _decision_study(tmp_path / "d")
    store.build_database(
        tmp_path / "advice.duckdb",
        **advice,
        views=[_advice_views],
        parse_rate_groups=[store.ParseRateGroups(by=("cue",), per_seed=False)],
        provenance={"m": {"model_id": "sha256:abc", "decoding": {"temperature": 1.0}}},
    )
    store.build_database(
        tmp_path / "decision.duckdb",
        **decision,
        views=[_decision_views],
        parse_rate_groups=[store.ParseRateGroups(by=("format", "bundle"))],
    )

    con = duckdb.connect(str(tmp_path / "advice.duckdb"), read_only=True)
    assert _relations(con) == {
        **dict.fromkeys(store.SHARED_TABLES, "BASE TABLE"),
        "advice_answers": "VIEW",
    }
    rates = con.sql("SELECT * FROM parse_rates").pl()
    assert rates.columns == ["model", "task", "cue", *RATE_COLUMNS]
    assert rates.rows() == [
        ("m", "advice", "name", 4, 1, 0.25, 2, "no_number", 2),
        ("m", "advice", "none", 2, 1, 0.5, 2, "empty", 1),
    ]
    assert con.execute("SELECT * FROM advice_answers ORDER BY ALL").fetchall() == [
        (0, "name", None),
        (0, "name", None),
        (0, "none", 1.0),
        (1, "name", 2.0),
        (1, "name", None),
        (1, "none", None),
    ]

    con = duckdb.connect(str(tmp_path / "decision.duckdb"), read_only=True)
    assert _relations(con) == {
        **dict.fromkeys(store.SHARED_TABLES, "BASE TABLE"),
        "decisions": "VIEW",
    }
    rates = con.sql("SELECT * FROM parse_rates").pl()
    assert rates.columns == ["model", "seed", "task", "format", "bundle", *RATE_COLUMNS]
    assert rates.rows() == [
        ("m", 0, "hiring", "choice", "b2", 1, 0, 0.0, 0, "no_label", 1),
        ("m", 0, "hiring", "rating", "b1", 1, 1, 1.0, 0, None, 0),
        ("m", 1, "hiring", "choice", "b2", 1, 1, 1.0, 0, None, 0),
        ("m", 1, "hiring", "rating", "b1", 1, 1, 1.0, 0, None, 0),
    ]
    assert con.execute("SELECT * FROM decisions ORDER BY ALL").fetchall() == [
        (0, "rating", "A"),
        (1, "choice", "A"),
        (1, "rating", "B"),
    ]


def test_provenance_counts_cache_hits_and_model_calls_per_model_seed_task(
    tmp_path: Path,
) -> None:
    advice, decision = _advice_study(tmp_path / "a"), _decision_study(tmp_path / "d")
    settings = {"m": {"model_id": "sha256:abc", "decoding": {"temperature": 1.0}}}
    store.build_database(tmp_path / "a.duckdb", **advice, provenance=settings)
    store.build_database(tmp_path / "d.duckdb", **decision)

    con = duckdb.connect(str(tmp_path / "a.duckdb"), read_only=True)
    advice_rows = con.sql("SELECT * FROM provenance").pl().to_dicts()
    con = duckdb.connect(str(tmp_path / "d.duckdb"), read_only=True)
    decision_rows = con.sql("SELECT * FROM provenance").pl().to_dicts()

    provenance = json.dumps(settings["m"], sort_keys=True)
    assert advice_rows[0] == {
        "model": "m",
        "seed": 0,
        "task": "advice",
        "backend": "hf",
        "model_id": "sha256:abc",
        "n_responses": 3,
        "n_cache_hits": 1,
        "n_model_calls": 2,
        "n_constrained": None,  # the shards carry no `constrained` column
        "n_option_scored": None,
        "n_tool_calls": None,
        "prompt_tokens": 33,
        "completion_tokens": 6,
        "seconds": 1.0,
        "finish_reasons": '{"length":1,"stop":2}',
        "answer_sources": None,
        "provenance": provenance,
    }
    assert (advice_rows[1]["seed"], advice_rows[1]["n_cache_hits"]) == (1, 3)
    assert advice_rows[1]["n_model_calls"] == 0
    assert [
        (r["seed"], r["backend"], r["n_model_calls"], r["n_constrained"], r["n_option_scored"])
        for r in decision_rows
    ] == [(0, "vllm", 2, 1, 1), (1, "vllm", 2, 1, 1)]
    assert decision_rows[0]["n_tool_calls"] == 0
    assert decision_rows[0]["prompt_tokens"] is None
    assert decision_rows[0]["answer_sources"] == '{"generated":1,"options":1}'
    assert decision_rows[0]["model_id"] is None and decision_rows[0]["provenance"] is None


def test_one_database_stacks_the_parse_rates_of_two_studies(tmp_path: Path) -> None:
    advice, decision = _advice_study(tmp_path / "a"), _decision_study(tmp_path / "d")
    store.build_database(
        tmp_path / "both.duckdb",
        prompts=advice["prompts"] + decision["prompts"],
        outcomes=advice["outcomes"] + decision["outcomes"],
        responses=advice["responses"] + decision["responses"],
        views=[_advice_views, _decision_views],
        parse_rate_groups=[
            store.ParseRateGroups(by=("cue",), per_seed=False, tasks=("advice",)),
            store.ParseRateGroups(by=("format",), tasks=("hiring",)),
        ],
    )
    con = duckdb.connect(str(tmp_path / "both.duckdb"), read_only=True)
    # outcome files with different extra columns stack by name
    assert con.execute("SELECT count(*), count(p_label_yes) FROM outcomes").fetchall() == [(10, 4)]
    rates = con.sql("SELECT * FROM parse_rates ORDER BY task, cue, seed, format").pl()
    assert rates.columns == ["model", "task", "cue", *RATE_COLUMNS, "seed", "format"]
    assert rates.select("task", "cue", "seed", "format", "n_responses", "n_parsed").rows() == [
        ("advice", "name", None, None, 4, 1),
        ("advice", "none", None, None, 2, 1),
        ("hiring", None, 0, "choice", 1, 0),
        ("hiring", None, 0, "rating", 1, 1),
        ("hiring", None, 1, "choice", 1, 1),
        ("hiring", None, 1, "rating", 1, 1),
    ]
    assert con.execute("SELECT count(*) FROM decisions").fetchall() == [(3,)]
    assert con.execute("SELECT count(*) FROM advice_answers").fetchall() == [(6,)]


def test_parse_rates_name_a_missing_column(tmp_path: Path) -> None:
    advice = _advice_study(tmp_path)
    con = store.connect(prompts=advice["prompts"], outcomes=advice["outcomes"])
    with pytest.raises(ValueError, match="'bundle'"):
        store.parse_rates(con, store.ParseRateGroups(by=("bundle",)))


def test_analysis_tables_may_not_replace_shared_tables(tmp_path: Path) -> None:
    csv = tmp_path / "rates.csv"
    csv.write_text("model\nm\n")
    with pytest.raises(ValueError, match="parse_rates"):
        store.build_database(
            tmp_path / "x.duckdb", **_advice_study(tmp_path), tables={"parse_rates": csv}
        )
    assert not (tmp_path / "x.duckdb").exists()


def test_probing_database_parse_rates_equal_the_published_table(tmp_path: Path) -> None:
    from cueaudit.probing.analysis.tables import connect, write_parse_rates
    from cueaudit.probing.views import PARSE_RATES, study_views
    from tests.helpers.probing_simulator import SimSpec, simulate

    spec = SimSpec(
        tasks={"salary": "usd", "healthcare": "binary"},
        n_base=4,
        unparsed_cues=("explicit",),
    )
    written = {k: [str(p) for p in v] for k, v in simulate(spec, tmp_path / "sim").items()}
    kinds = {**spec.tasks, "race_prediction": "race"}
    responses = []
    (tmp_path / "responses").mkdir()
    for i, path in enumerate(written["outcomes"]):
        shard = tmp_path / "responses" / f"{i}.parquet"
        pl.read_parquet(path).select("prompt_uid", "model", "seed", "task").write_parquet(shard)
        responses.append(str(shard))
    csv = tmp_path / "parse_rates.csv"
    published = write_parse_rates(written["prompts"], written["outcomes"], kinds, csv)
    store.build_database(
        tmp_path / "db.duckdb",
        prompts=written["prompts"],
        outcomes=written["outcomes"],
        responses=responses,
        views=[study_views(kinds, "probability")],
        parse_rate_groups=[PARSE_RATES],
    )
    con = duckdb.connect(str(tmp_path / "db.duckdb"), read_only=True)
    in_db = con.sql("SELECT * FROM parse_rates").pl()
    assert in_db.equals(published) and in_db.equals(pl.read_csv(csv))
    assert published.columns[:3] == ["model", "task", "cue"]
    explicit = published.filter(pl.col("cue") == "explicit", pl.col("task") == "salary")
    assert explicit["parse_rate"].to_list() == [0.0]
    n_base, races, genders, variants, seeds = 4, 2, 2, 2, 2
    assert explicit["n_responses"].to_list() == [n_base * races * genders * variants * seeds]
    # the study's views persist in the file and equal the in-memory ones over the parquet files
    memory = connect(written["prompts"], written["outcomes"], kinds, "probability")
    for view in ("observations", "race_predictions"):
        query = f"SELECT * FROM {view} ORDER BY ALL"
        assert con.sql(query).pl().equals(memory.sql(query).pl())
    # no cue, three cues with both races and genders, AAVE (Black, no gender)
    per_base = 1 + 3 * races * genders * variants + variants
    n_tasks = 2
    n_observations = n_base * per_base * n_tasks * seeds
    assert con.execute("SELECT count(*) FROM observations").fetchall() == [(n_observations,)]


@pytest.mark.parametrize("module", ["cueaudit.store", "cueaudit.report"])
def test_shared_modules_import_no_study(module: str) -> None:
    code = (
        f"import json, sys, {module}\n"
        "study = ('cueaudit.probing', 'cueaudit.decision')\n"
        "print(json.dumps([sorted(sys.modules), [m for m in sys.modules if m.startswith(study)]]))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, study_modules = json.loads(run.stdout)
    assert module in loaded and "polars" in loaded
    assert study_modules == []


def test_a_database_changed_after_its_build_is_named(tmp_path: Path) -> None:
    """Snakemake reruns nothing for an output damaged after its job: the build notes the
    file's size and time, and a database that no longer matches them is named, with how to
    rebuild it."""
    study = _advice_study(tmp_path / "a")
    db = tmp_path / "cueaudit.duckdb"
    store.build_database(db, **study, views=[_advice_views])
    assert store.database_changed(db) is None
    size = db.stat().st_size
    with db.open("r+b") as handle:  # cut short, as a full disk or a killed copy leaves it
        handle.truncate(size // 2)
    message = store.database_changed(db)
    assert message is not None and message.startswith(f"{db} changed after build_database")
    assert f"({size} bytes then, {size // 2} now)" in message
    assert "--forcerun build_database" in message
    store.build_database(db, **study, views=[_advice_views])
    assert store.database_changed(db) is None
    # overwritten in place, the same size: its modification time tells
    stat = db.stat()
    os.utime(db, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert store.database_changed(db) is not None
