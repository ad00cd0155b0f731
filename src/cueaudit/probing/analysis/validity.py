"""Construct validity (paper §4.1): prompt-level cue-induced deviations from the no-cue baseline,
Pearson correlations between deviation vectors, and Fisher-z averages across models."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

import duckdb
import numpy as np
import polars as pl

from cueaudit.cues.vocabulary import NO_CUE
from cueaudit.errors import InputError
from cueaudit.probing.vocabulary import CUE_LABELS, DIMENSION_GROUPS, Dimension
from cueaudit.stats.correlation import (
    FISHER_WEIGHTS,
    OK,
    TOO_FEW,
    fisher_ci,
    fisher_z_mean,
    pairwise_pearson,
)

OBSERVATIONS = "observations"
MIN_PAIR_N = 3  # fewer shared prompts than this gives r = null
#: How ``fisher_average`` weights each model's z (config ``probing.analysis.fisher_weights``).
FisherWeights = Literal["equal", "n_minus_3"]

NOTE_FEW = f"fewer than {MIN_PAIR_N} shared base prompts"
NOTE_CONSTANT = "zero variance in a deviation vector"

DEVIATION_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "task": pl.String(),
    "cue": pl.String(),
    "group": pl.String(),
    "base_id": pl.String(),
    "cue_mean": pl.Float64(),
    "baseline_mean": pl.Float64(),
    "deviation": pl.Float64(),
    "n_cue": pl.Int64(),
    "n_baseline": pl.Int64(),
}
CORRELATION_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "task": pl.String(),
    "cue_a": pl.String(),
    "group_a": pl.String(),
    "cue_b": pl.String(),
    "group_b": pl.String(),
    "r": pl.Float64(),
    "n": pl.Int64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "note": pl.String(),
}
PAIR_COLUMNS = ("cue_a", "group_a", "cue_b", "group_b")

_CUE_ORDER = {cue: i for i, cue in enumerate(CUE_LABELS)}
_GROUP_ORDER = {g: i for i, g in enumerate(g for pair in DIMENSION_GROUPS.values() for g in pair)}


def cue_sort_key(cue: str) -> tuple[int, str]:
    """Sort key putting cues in the paper's figure order, unknown cue ids last (alphabetically)."""
    return (_CUE_ORDER.get(cue, len(_CUE_ORDER)), cue)


def group_sort_key(group: str) -> tuple[int, str]:
    """Sort key putting groups in DIMENSION_GROUPS order (focal before reference)."""
    return (_GROUP_ORDER.get(group, len(_GROUP_ORDER)), group)


def series_sort_key(cue: str, group: str) -> tuple[tuple[int, str], tuple[int, str]]:
    """Order of (cue, group) deviation vectors: by group, then by cue."""
    return (group_sort_key(group), cue_sort_key(cue))


def check_dimension(dimension: str) -> Dimension:
    """Return ``dimension`` if it names a demographic dimension, else raise InputError."""
    if dimension not in DIMENSION_GROUPS:
        raise InputError(
            "analysis request",
            f"unknown dimension {dimension!r}; expected one of {sorted(DIMENSION_GROUPS)}",
            field="dimension",
        )
    return dimension  # type: ignore[return-value]


def check_observations(con: duckdb.DuckDBPyConnection, columns: Iterable[str]) -> None:
    """Raise InputError unless relation ``observations`` exists with the given columns."""
    try:
        have = set(con.sql(f"SELECT * FROM {OBSERVATIONS} LIMIT 0").columns)
    except duckdb.CatalogException as exc:
        raise InputError(OBSERVATIONS, "no such table or view in the DuckDB connection") from exc
    missing = sorted(set(columns) - have)
    if missing:
        raise InputError(OBSERVATIONS, f"missing column(s): {', '.join(missing)}")


def require_columns(frame: pl.DataFrame, columns: Iterable[str], source: str) -> None:
    """Raise InputError naming the columns of ``frame`` that are missing."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(source, f"missing column(s): {', '.join(missing)}")


def prompt_deviations(con: duckdb.DuckDBPyConnection, dimension: Dimension) -> pl.DataFrame:
    """Per model, task, cue, group and base prompt: mean outcome under the cue minus the mean
    outcome of the no-cue baseline of the same base prompt (seeds pooled, unparsed ignored)."""
    dim = check_dimension(dimension)
    check_observations(con, ["model", "task", "cue", "base_id", "outcome", dim])
    sql = f"""
        WITH obs AS (
            SELECT CAST(model AS VARCHAR) AS model, CAST(task AS VARCHAR) AS task,
                   CAST(cue AS VARCHAR) AS cue, CAST("{dim}" AS VARCHAR) AS grp,
                   CAST(base_id AS VARCHAR) AS base_id, CAST(outcome AS DOUBLE) AS outcome
            FROM {OBSERVATIONS}
            WHERE outcome IS NOT NULL AND isfinite(CAST(outcome AS DOUBLE))
        ),
        cue_cells AS (
            SELECT model, task, cue, grp, base_id,
                   AVG(outcome) AS cue_mean, COUNT(*) AS n_cue
            FROM obs WHERE cue <> $none AND grp IS NOT NULL
            GROUP BY model, task, cue, grp, base_id
        ),
        baseline AS (
            SELECT model, task, base_id,
                   AVG(outcome) AS baseline_mean, COUNT(*) AS n_baseline
            FROM obs WHERE cue = $none
            GROUP BY model, task, base_id
        )
        SELECT c.model, c.task, c.cue, c.grp AS "group", c.base_id, c.cue_mean,
               b.baseline_mean, c.cue_mean - b.baseline_mean AS deviation,
               c.n_cue, b.n_baseline
        FROM cue_cells c
        JOIN baseline b ON c.model = b.model AND c.task = b.task AND c.base_id = b.base_id
        ORDER BY c.model, c.task, c.cue, c.grp, c.base_id
    """
    out = con.sql(sql, params={"none": NO_CUE}).pl()
    return out.select(pl.col(c).cast(t) for c, t in DEVIATION_SCHEMA.items())


def series_layout(part: pl.DataFrame) -> tuple[list[tuple[str, str]], np.ndarray, np.ndarray]:
    """Sorted (cue, group) series of a frame and, per row, its base-prompt and series index."""
    series = sorted(
        part.select("cue", "group").unique().iter_rows(), key=lambda s: series_sort_key(*s)
    )
    mapping = {f"{c}\x1f{g}": i for i, (c, g) in enumerate(series)}
    codes = part.select(
        col=pl.concat_str(["cue", "group"], separator="\x1f").replace_strict(
            mapping, return_dtype=pl.Int64
        ),
        row=pl.col("base_id").rank("dense").cast(pl.Int64) - 1,
    )
    return series, codes["row"].to_numpy(), codes["col"].to_numpy()


def deviation_correlations(deviations: pl.DataFrame) -> pl.DataFrame:
    """Pearson r between every pair of (cue, group) deviation vectors of a model and task,
    aligned on base_id, with a 95% Fisher-z CI. Each unordered pair appears once, ordered by
    ``series_sort_key`` (so cross-group pairs have the focal group as ``group_a``); r is null
    with a ``note`` when fewer than 3 prompts are shared or a vector is constant."""
    keys = ["model", "task", "cue", "group", "base_id"]
    require_columns(deviations, [*keys, "deviation"], "deviations")
    if deviations.select(pl.any_horizontal(pl.col(keys).is_null()).any()).item():
        raise InputError("deviations", f"null values in key columns {keys}")
    records: list[tuple[object, ...]] = []
    parts = deviations.partition_by(["model", "task"], as_dict=True, maintain_order=True)
    for key in sorted(parts, key=lambda t: (str(t[0]), str(t[1]))):
        model, task = key
        part = parts[key]
        series, row, col = series_layout(part)
        k = len(series)
        n_base = int(row.max()) + 1
        if np.bincount(row * k + col, minlength=n_base * k).max() > 1:
            raise InputError(
                "deviations", "several rows for one (model, task, cue, group, base_id)"
            )
        x = np.full((n_base, k), np.nan)
        x[row, col] = part["deviation"].cast(pl.Float64).fill_null(np.nan).to_numpy()
        r, n, status = pairwise_pearson(x, MIN_PAIR_N)
        for i, (cue_a, group_a) in enumerate(series):
            for j in range(i + 1, k):
                cue_b, group_b = series[j]
                ok = status[i, j] == OK
                note = None if ok else (NOTE_FEW if status[i, j] == TOO_FEW else NOTE_CONSTANT)
                lo, hi = fisher_ci(float(r[i, j]), int(n[i, j])) if ok else (None, None)
                records.append(
                    (
                        model,
                        task,
                        cue_a,
                        group_a,
                        cue_b,
                        group_b,
                        float(r[i, j]) if ok else None,
                        int(n[i, j]),
                        lo,
                        hi,
                        note,
                    )
                )
    return pl.DataFrame(records, schema=CORRELATION_SCHEMA, orient="row")


def _pair_rank_columns(frame: pl.DataFrame) -> list[pl.Expr]:
    """Expressions giving integer sort ranks of the cue/group columns of a pairs frame."""
    exprs = []
    for c in PAIR_COLUMNS:
        keyfn = cue_sort_key if c.startswith("cue") else group_sort_key
        values = sorted(set(frame[c].drop_nulls().to_list()), key=keyfn)
        mapping = {v: i for i, v in enumerate(values)}
        exprs.append(pl.col(c).replace_strict(mapping, default=len(mapping), return_dtype=pl.Int64))
    return exprs


def fisher_average(
    correlations: pl.DataFrame, over: str = "model", weights: FisherWeights = "equal"
) -> pl.DataFrame:
    """Average r over the levels of ``over`` (default: models) with the Fisher z transform:
    tanh of the mean of atanh(r), null r skipped.

    ``weights``: ``"equal"`` (default) averages the z values unweighted, as the paper reads
    ("Correlations are averaged across models using a Fisher z transformation", §4.1);
    ``"n_minus_3"`` weights each z by n − 3, its inverse sampling variance (equal weights if
    all n − 3 are 0). The two agree when every model shares the same n.
    Columns: the remaining keys (``task``, cue/group pair), ``r``, ``n_models``, ``n_min``."""
    if over not in ("model", "task"):
        raise InputError("analysis request", "must be 'model' or 'task'", field="over")
    if weights not in FISHER_WEIGHTS:
        raise InputError(
            "config",
            f"probing.analysis.fisher_weights is {weights!r}; expected one of {FISHER_WEIGHTS}",
            field="fisher_weights",
        )
    require_columns(correlations, [over, *PAIR_COLUMNS, "r", "n"], "correlations")
    keys = [c for c in ("model", "task", *PAIR_COLUMNS) if c != over and c in correlations.columns]
    valid = pl.col("r").is_not_null() & pl.col("r").is_finite()
    agg = correlations.group_by(keys, maintain_order=True).agg(
        n_models=valid.sum().cast(pl.Int64),
        n_min=pl.col("n").filter(valid).min().cast(pl.Int64),
        _r=pl.col("r").cast(pl.Float64).filter(valid),
        _n=pl.col("n").cast(pl.Float64).filter(valid),
    )
    averaged = [
        None if len(r) == 0 else fisher_z_mean(np.asarray(r), np.asarray(n), weights)
        for r, n in agg.select("_r", "_n").iter_rows()
    ]
    agg = agg.with_columns(r=pl.Series(averaged, dtype=pl.Float64))
    out = agg.select(*keys, "r", "n_models", "n_min")
    lead = [c for c in keys if c not in PAIR_COLUMNS]
    ranks = _pair_rank_columns(out)
    return (
        out.with_columns(ranks[i].alias(f"_rank{i}") for i in range(len(ranks)))
        .sort([*lead, "_rank1", "_rank0", "_rank3", "_rank2"])
        .drop([f"_rank{i}" for i in range(len(ranks))])
    )


def correlation_matrix(
    pairs: pl.DataFrame,
    group_row: str,
    group_col: str,
    cues: Sequence[str] | None = None,
) -> tuple[list[str], list[str], np.ndarray]:
    """Cue × cue matrix of r between ``group_row`` vectors (rows) and ``group_col`` vectors
    (columns), from a pairs frame already restricted to one task (and model, if not averaged).
    Within a group the matrix is symmetric with 1 on the diagonal; missing pairs are NaN."""
    require_columns(pairs, [*PAIR_COLUMNS, "r"], "correlations")
    if pairs.select(PAIR_COLUMNS).is_duplicated().any():
        raise InputError("correlations", "several rows for one pair; filter to one task/model")
    lookup: dict[tuple[str, str, str, str], float] = {}
    rows_seen: set[str] = set()
    cols_seen: set[str] = set()
    for cue_a, group_a, cue_b, group_b, r in pairs.select(*PAIR_COLUMNS, "r").iter_rows():
        val = np.nan if r is None else float(r)
        for (c1, g1), (c2, g2) in (
            ((cue_a, group_a), (cue_b, group_b)),
            ((cue_b, group_b), (cue_a, group_a)),
        ):
            if g1 == group_row and g2 == group_col:
                lookup[(c1, g1, c2, g2)] = val
                rows_seen.add(c1)
                cols_seen.add(c2)
    if cues is not None:
        row_cues, col_cues = list(cues), list(cues)
    elif group_row == group_col:
        row_cues = col_cues = sorted(rows_seen | cols_seen, key=cue_sort_key)
    else:
        row_cues = sorted(rows_seen, key=cue_sort_key)
        col_cues = sorted(cols_seen, key=cue_sort_key)
    mat = np.full((len(row_cues), len(col_cues)), np.nan)
    for i, rc in enumerate(row_cues):
        for j, cc in enumerate(col_cues):
            if group_row == group_col and rc == cc:
                mat[i, j] = 1.0
            else:
                mat[i, j] = lookup.get((rc, group_row, cc, group_col), np.nan)
    return row_cues, col_cues, mat
