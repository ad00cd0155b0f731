"""Study 1 (probing) reproduces the golden baseline made by commit 1bdac26, value for value.

tests/fixtures/probing_baseline/ holds what the workflow of commit 1bdac26 (before the
restructuring into shared keys + a ``probing:`` block) produced on a tiny design: every table
of results/cueaudit.duckdb as parquet, its response cache, and its config in the old shape.
This test seeds a fresh working directory with that cache, runs the current workflow on the
same design written in the new config shape, and checks that

1. no inference job calls the model (every answer comes from the old cache, so the cache key,
   prompt rendering and prompt uids are unchanged), and
2. every baseline table comes out identical, column for column and row for row (floats to a
   relative 1e-9); new tables may carry extra columns, and only the columns listed in
   ALLOWED_MISSING_COLUMNS may disappear.

See tests/fixtures/probing_baseline/README.md for how the baseline was made and regenerated.
"""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
import yaml

from tests.conftest import ROOT, SnakemakeRunner, write_config

pytestmark = pytest.mark.e2e

FIXTURE = ROOT / "tests/fixtures/probing_baseline"

# The new config shape: these keys stay at the top level, the rest move under `probing:`.
SHARED_KEYS = ("cues", "models", "seeds", "decoding")
PROBING_KEYS = ("tasks", "race_prediction", "analysis")

# Baseline columns the restructured workflow may drop (everything else must still be there).
ALLOWED_MISSING_COLUMNS: Mapping[str, frozenset[str]] = {
    "responses": frozenset({"p_yes", "p_no"}),
}
# Baseline tables the restructured workflow may drop: none.
ALLOWED_MISSING_TABLES: frozenset[str] = frozenset()

# Columns that identify a row of each table (unique in the baseline); rows are compared after
# sorting both sides by them. A table not listed here is sorted by all its non-float columns.
TABLE_KEYS: Mapping[str, tuple[str, ...]] = {
    "prompts": ("prompt_uid",),
    "responses": ("model", "seed", "task", "prompt_uid"),
    "outcomes": ("model", "seed", "task", "prompt_uid"),
    "parse_rates": ("model", "task", "cue"),
    "sample_sizes": ("model", "task", "cue", "race", "gender"),
    "means_race": ("model", "task", "cue", "group"),
    "means_gender": ("model", "task", "cue", "group"),
    "ratios_race": ("model", "task", "cue", "dimension", "focal", "reference"),
    "ratios_gender": ("model", "task", "cue", "dimension", "focal", "reference"),
    "validity_race": ("model", "task", "cue_a", "group_a", "cue_b", "group_b"),
    "validity_gender": ("model", "task", "cue_a", "group_a", "cue_b", "group_b"),
    "validity_race_averaged": ("task", "cue_a", "group_a", "cue_b", "group_b"),
    "validity_gender_averaged": ("task", "cue_a", "group_a", "cue_b", "group_b"),
    "race_prediction": ("model", "task", "cue", "class"),
    "readability": ("task", "term"),
    "regressions": ("model", "task", "spec", "term"),
}

REL_TOL = 1e-9
ABS_TOL = 1e-12

MODEL_CALLS = re.compile(r"model calls: \d+")


# --- config -------------------------------------------------------------------------------


def baseline_config() -> dict[str, Any]:
    """The baseline design, in the old (1bdac26) config shape, resource paths repo-relative."""
    return yaml.safe_load((FIXTURE / "config.yaml").read_text(encoding="utf-8"))


def nested_config(old: Mapping[str, Any]) -> dict[str, Any]:
    """The old flat config in the new shape: shared keys on top, the study under `probing:`."""
    unknown = set(old) - set(SHARED_KEYS) - set(PROBING_KEYS)
    assert not unknown, f"baseline config keys with no place in the new shape: {unknown}"
    config: dict[str, Any] = {key: old[key] for key in SHARED_KEYS if key in old}
    config["probing"] = {key: old[key] for key in PROBING_KEYS if key in old}
    return config


def absolute_resources(value: Any, root: Path = ROOT) -> Any:
    """Every repo-relative `resources/...` path in the config, made absolute under ``root``."""
    if isinstance(value, Mapping):
        return {key: absolute_resources(item, root) for key, item in value.items()}
    if isinstance(value, list):
        return [absolute_resources(item, root) for item in value]
    if isinstance(value, str) and value.startswith("resources/"):
        return str(root / value)
    return value


def seed_response_cache(workdir: Path) -> Path:
    """Copy the baseline's response cache to where the workflow reads it."""
    target = workdir / "results/cache/responses"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(FIXTURE / "cache", target)
    return target


# --- checks -------------------------------------------------------------------------------


def assert_no_model_calls(workdir: Path) -> None:
    """Every inference job's final `model calls: N, cache hits: M` line says N == 0.

    (The engine-statistics line may follow it, so the last `model calls:` line is checked,
    not the last line of the log.)
    """
    logs = sorted((workdir / "logs/inference").rglob("*.log"))
    assert logs, f"no inference logs under {workdir / 'logs/inference'}"
    # one job per cached shard ("<shard>of<n>.<stamp>.parquet"; a shard may have several parts)
    shards = {(p.parent, p.name.split(".")[0]) for p in (FIXTURE / "cache").rglob("*.parquet")}
    expected = len(shards)
    assert len(logs) == expected, (
        f"{len(logs)} inference jobs ran, the baseline had {expected}: "
        f"{[str(p.relative_to(workdir)) for p in logs]}"
    )
    failures = []
    for log in logs:
        lines = [
            line
            for line in log.read_text(encoding="utf-8").splitlines()
            if MODEL_CALLS.search(line)
        ]
        if not lines:
            failures.append(f"{log.relative_to(workdir)}: no `model calls:` line")
        elif "model calls: 0," not in lines[-1]:
            failures.append(f"{log.relative_to(workdir)}: {lines[-1].strip()}")
    assert not failures, "inference jobs called the model (answers not from the old cache):\n" + (
        "\n".join(failures)
    )


def baseline_tables() -> dict[str, pl.DataFrame]:
    """The recorded tables with the intentional corrections of ``corrections.yaml`` applied."""
    tables = {path.stem: pl.read_parquet(path) for path in sorted(FIXTURE.glob("*.parquet"))}
    corrections = yaml.safe_load((FIXTURE / "corrections.yaml").read_text(encoding="utf-8"))
    for correction in corrections or []:
        tables[correction["table"]] = apply_correction(tables[correction["table"]], correction)
    return tables


def apply_correction(table: pl.DataFrame, correction: Mapping[str, Any]) -> pl.DataFrame:
    """``set`` the values of the one row ``where`` selects, once it still holds ``was``."""
    where = pl.all_horizontal(
        pl.col(c).is_null() if v is None else pl.col(c) == v for c, v in correction["where"].items()
    )
    rows = table.filter(where)
    assert rows.height == 1, f"correction {correction['where']} selects {rows.height} rows"
    for column, was in correction["was"].items():
        numeric = _is_float(table.schema[column])
        assert _values_equal(rows[column][0], was, numeric), (
            f"correction of {correction['table']} {correction['where']}: the baseline's "
            f"{column} is {rows[column][0]!r}, not {was!r}"
        )
    return table.with_columns(
        pl.when(where)
        .then(pl.lit(value, dtype=table.schema[column]))
        .otherwise(pl.col(column))
        .alias(column)
        for column, value in correction["set"].items()
    )


def _is_float(dtype: Any) -> bool:
    return dtype in (pl.Float32, pl.Float64)


def _values_equal(a: Any, b: Any, numeric: bool) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if numeric and isinstance(a, int | float) and isinstance(b, int | float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return a == b


def _sort_key(row: Sequence[Any]) -> tuple[Any, ...]:
    # None first, then by value; every value is boxed so mixed None/str never compare.
    return tuple((value is not None, value if value is not None else 0) for value in row)


def table_difference(
    name: str, baseline: pl.DataFrame, new: pl.DataFrame, keys: Sequence[str]
) -> str | None:
    """None when ``new`` holds the baseline's rows and values; else the first difference.

    Only the baseline's columns that ``new`` has are compared (``new`` may carry more).
    """
    columns = [c for c in baseline.columns if c in new.columns]
    if baseline.height != new.height:
        return f"table {name}: {new.height} rows, baseline {baseline.height}"
    key_index = [columns.index(k) for k in keys]

    def by_key(row: Sequence[Any]) -> tuple[Any, ...]:
        return _sort_key([row[j] for j in key_index])

    base_rows = sorted(baseline.select(columns).rows(), key=by_key)
    new_rows = sorted(new.select(columns).rows(), key=by_key)
    numeric = {c: _is_float(baseline.schema[c]) or _is_float(new.schema[c]) for c in columns}
    for i, (base_row, new_row) in enumerate(zip(base_rows, new_rows, strict=True)):
        base_key = dict(zip(keys, (base_row[j] for j in key_index), strict=True))
        new_key = dict(zip(keys, (new_row[j] for j in key_index), strict=True))
        if base_key != new_key:
            return (
                f"table {name}, row {i} (sorted by {list(keys)}): key {new_key}, "
                f"baseline key {base_key}"
            )
        for j, column in enumerate(columns):
            if not _values_equal(base_row[j], new_row[j], numeric[column]):
                return (
                    f"table {name}, column {column}, row {base_key}: "
                    f"{new_row[j]!r}, baseline {base_row[j]!r}"
                )
    return None


def assert_tables_match(database: Path) -> None:
    """Every baseline table is in ``database`` with the same rows and values."""
    baseline = baseline_tables()
    assert baseline, f"no baseline tables in {FIXTURE}"
    con = duckdb.connect(str(database), read_only=True)
    try:
        present = {
            row[0]
            for row in con.sql(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
            ).fetchall()
        }
        missing_tables = set(baseline) - present - ALLOWED_MISSING_TABLES
        assert not missing_tables, f"baseline tables missing from {database}: {missing_tables}"
        problems = []
        for name, base in baseline.items():
            if name not in present:
                continue
            new_columns = [
                row[0]
                for row in con.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = 'main' AND table_name = ? ORDER BY ordinal_position",
                    [name],
                ).fetchall()
            ]
            gone = set(base.columns) - set(new_columns)
            unexpected = gone - ALLOWED_MISSING_COLUMNS.get(name, frozenset())
            if unexpected:
                problems.append(f"table {name}: baseline columns missing {sorted(unexpected)}")
                continue
            kept = [c for c in base.columns if c in new_columns]
            selection = ", ".join(f'"{c}"' for c in kept)
            new = con.sql(f'SELECT {selection} FROM "{name}"').pl()
            keys = TABLE_KEYS.get(name) or tuple(c for c in kept if not _is_float(base.schema[c]))
            assert base.select(keys).unique().height == base.height, (
                f"baseline {name}: {list(keys)} does not identify a row"
            )
            difference = table_difference(name, base.select(kept), new, keys)
            if difference:
                problems.append(difference)
        assert not problems, "the workflow no longer reproduces the baseline:\n" + "\n".join(
            problems
        )
    finally:
        con.close()


# --- the test -------------------------------------------------------------------------------


def test_probing_reproduces_baseline(tmp_path: Path, run_snakemake: SnakemakeRunner) -> None:
    seed_response_cache(tmp_path)
    write_config(tmp_path, absolute_resources(nested_config(baseline_config())))

    run_snakemake(tmp_path)

    assert_no_model_calls(tmp_path)
    assert_tables_match(tmp_path / "results/cueaudit.duckdb")
