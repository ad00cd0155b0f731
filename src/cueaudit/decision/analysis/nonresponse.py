"""Differential non-response: whether a model fails to answer some groups more than others.

An answer is a **non-response** when it gives the analysis nothing through the interface it
was asked for (its ``reason``, the first that applies):

``refusal``
    the parser read a refusal (``parse_error`` "refusal");
``no_tool_call``
    a tool-mode task answered without calling the answer's tool (``answer_source`` is not
    "tool_call", or the call was to another tool: "wrong_tool"), even when its text parses:
    the tool interface got no action;
``invalid``
    a JSON answer or tool call that broke the schema (the other reasons of
    :data:`cueaudit.parsing.structured.REASONS`);
``unparsed``
    any other null reason of the outcome kinds (:data:`cueaudit.parsing.kinds.NULL_REASONS`:
    "empty", "no_rating", "no_ranking", ...), or a null answer without a recorded reason (a
    simulated failure).

Rate and Decide answers name one applicant: their group is the applicant's race and gender.
A ranking answer's group is the race (gender) its four candidates share, else ``"mixed"``:
irrelevant-attribute and name-matched bundles share both, placebo bundles their race,
demographic and paraphrase matched bundles their gender, disguised demographic and
position-balanced bundles neither (so they inform no test).

**The test.** Per arm × model × format and dimension (race, gender), the likelihood-ratio (G)
test of conditional independence of non-response and group given the stratum domain × mode ×
bundle type (:func:`cueaudit.stats.contingency.stratified_g_test`). It is the likelihood-ratio
test of the logit model with a stratum × group term against the stratum alone, chosen over a
main-effects logit because its estimates are closed-form cell rates: the case that matters
most, a model that fails for one group only, separates a logit fit, while the G statistic
stays finite; and over a pooled 2 × k table because non-response rates differ by interface
(tool calls fail more) and bundle type, which a pooled table would mix with the group. BH
q-values run over every per-model test (all arms, models, formats, dimensions); a model ×
format is ``differential`` when any of its tests has ``q_value < alpha``. Rows with model
``"all"`` (``pooled``) repeat each test with the models pooled, as a pooled check would: they
show how one model's differential non-response is diluted by the others', and enter neither
BH nor a flag. Answers of one prompt under several seeds are counted as independent, so with
more than one seed the test is anti-conservative: the flag is a finding to look at, not a
verdict.

Differential non-response is reported: the table ``nonresponse`` (counts, rates, Wilson
intervals per arm × model × format × mode × race × gender, with the model × format's
``differential``), the tests, a flag on every contrast of a flagged model and format
(:func:`flag_contrasts`), and a figure. With ``decision.analysis.stop_on_differential_nonresponse``
it stops the analysis instead (:func:`stop_if_differential`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np
import polars as pl

from cueaudit.decision.analysis.frames import ANSWER_KEY, PRIMARY, AnalysisFrames
from cueaudit.decision.analysis.instrument import complete_rankings
from cueaudit.errors import CueauditError, InputError
from cueaudit.parsing.kinds import NULL_REASONS
from cueaudit.parsing.structured import REASONS as STRUCTURED_REASONS
from cueaudit.stats.contingency import stratified_g_test
from cueaudit.stats.multiplicity import bh_qvalues
from cueaudit.stats.proportions import wilson_interval

REASONS: Final = ("refusal", "no_tool_call", "invalid", "unparsed")
_INVALID: Final = tuple(sorted(set(STRUCTURED_REASONS) - {"wrong_tool"}))
MIXED: Final = "mixed"
POOLED: Final = "all"
DIMENSIONS: Final = ("race", "gender")
#: Within a model × format, the strata a test conditions on.
STRATA: Final = ("domain", "mode", "bundle_type")
#: Where a contrast table's rows meet the tests (those of its columns it has).
UNIT: Final = ("arm", "model", "format")
#: The outcome columns the reasons are read from.
REASON_COLUMNS: Final = (*ANSWER_KEY, "parse_error", "answer_source")

ANSWERS_SCHEMA: Final = {
    "arm": pl.String(),
    "model": pl.String(),
    "seed": pl.Int64(),
    "task": pl.String(),
    "prompt_uid": pl.String(),
    "domain": pl.String(),
    "format": pl.String(),
    "mode": pl.String(),
    "bundle_type": pl.String(),
    "race": pl.String(),
    "gender": pl.String(),
    "reason": pl.String(),
}
REASONS_SCHEMA: Final = {c: ANSWERS_SCHEMA.get(c, pl.String()) for c in REASON_COLUMNS}
COUNT_COLUMNS: Final = ("n", "n_nonresponse", *(f"n_{r}" for r in REASONS))
NONRESPONSE_SCHEMA: Final = {
    "arm": pl.String(),
    "model": pl.String(),
    "format": pl.String(),
    "mode": pl.String(),
    "race": pl.String(),
    "gender": pl.String(),
    **dict.fromkeys(COUNT_COLUMNS, pl.Int64()),
    "rate": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "differential": pl.Boolean(),
}
TESTS_SCHEMA: Final = {
    "arm": pl.String(),
    "model": pl.String(),
    "format": pl.String(),
    "dimension": pl.String(),
    "pooled": pl.Boolean(),
    "statistic": pl.Float64(),
    "df": pl.Int64(),
    "p_value": pl.Float64(),
    "q_value": pl.Float64(),
    "n": pl.Int64(),
    "n_nonresponse": pl.Int64(),
    "n_strata": pl.Int64(),
    "differential": pl.Boolean(),
    "groups": pl.String(),
}


class DifferentialNonresponse(CueauditError):
    """Non-response that depends on race or gender, when the config asks to stop on it."""


def read_reasons(paths: Sequence[str | Path]) -> pl.DataFrame:
    """The answer key, ``parse_error`` and ``answer_source`` of outcome tables."""
    parts = []
    for path in paths:
        missing = [c for c in REASON_COLUMNS if c not in pl.read_parquet_schema(path)]
        if missing:
            raise InputError(str(path), "missing column", missing[0])
        parts.append(pl.read_parquet(path, columns=list(REASON_COLUMNS)))
    empty = pl.DataFrame(schema=REASONS_SCHEMA)
    return pl.concat([empty, *(p.cast(REASONS_SCHEMA) for p in parts)])


def read_tests(path: str | Path) -> pl.DataFrame:
    """A tests table written by the workflow (CSV), with :data:`TESTS_SCHEMA`'s types."""
    tests = pl.read_csv(path, schema_overrides=TESTS_SCHEMA)
    missing = [c for c in TESTS_SCHEMA if c not in tests.columns]
    if missing:
        raise InputError(str(path), "missing column", missing[0])
    return tests


def _shared(column: str) -> pl.Expr:
    """The candidates' common value of ``column``, else :data:`MIXED`."""
    col = pl.col(column)
    return pl.when(col.n_unique() == 1).then(col.first()).otherwise(pl.lit(MIXED)).alias(column)


def answers_of(frames: AnalysisFrames, reasons: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per Rate, Decide or Rank answer (:data:`ANSWERS_SCHEMA`) with its group and its
    non-response ``reason`` (null: answered). ``reasons`` (:func:`read_reasons`) gives the
    parsers' reasons and the answer source; without it every unanswered answer is
    ``"unparsed"``."""
    design = ["arm", "model", "seed", "task", "prompt_uid", "domain", "mode"]
    judged = frames.judgements.select(
        *design,
        "format",
        pl.lit(None, pl.String).alias("bundle_type"),
        "race",
        "gender",
        pl.col("y").is_not_null().alias("_answered"),
    )
    complete = complete_rankings(frames.rankings).select(ANSWER_KEY).unique()
    ranked = (
        frames.rankings.group_by(*design, "bundle_type")
        .agg(_shared("race"), _shared("gender"))
        .join(complete.with_columns(_answered=pl.lit(True)), on=list(ANSWER_KEY), how="left")
        .select(
            *design,
            pl.lit("rank").alias("format"),
            "bundle_type",
            "race",
            "gender",
            pl.col("_answered").fill_null(False),
        )
    )
    rows = pl.concat([judged, ranked])
    if reasons is None:
        reasons = pl.DataFrame(schema=REASONS_SCHEMA)
    unknown = sorted(set(reasons["parse_error"].drop_nulls()) - set(NULL_REASONS))
    if unknown:
        raise InputError("outcome tables", f"unknown null reason {unknown[0]!r}", "parse_error")
    if reasons.select(ANSWER_KEY).is_duplicated().any():
        raise InputError("outcome tables", "an answer appears twice", "prompt_uid")
    rows = rows.join(reasons, on=list(ANSWER_KEY), how="left")
    error, source, answered = pl.col("parse_error"), pl.col("answer_source"), pl.col("_answered")
    no_tool_call = (pl.col("mode") == "tool") & (
        (source.is_not_null() & (source != "tool_call")) | (error == "wrong_tool")
    )
    reason = (
        pl.when(error == "refusal")
        .then(pl.lit("refusal"))
        .when(no_tool_call)
        .then(pl.lit("no_tool_call"))
        .when(~answered & error.is_in(list(_INVALID)))
        .then(pl.lit("invalid"))
        .when(~answered)
        .then(pl.lit("unparsed"))
    )
    return rows.with_columns(reason=reason).select(list(ANSWERS_SCHEMA)).cast(ANSWERS_SCHEMA)


def summarise(counts: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """Rows of :data:`COUNT_COLUMNS` summed within ``by`` (sorted), with the non-response
    ``rate`` and its Wilson 95% interval."""
    summed = counts.group_by(list(by)).agg(pl.col(c).sum() for c in COUNT_COLUMNS).sort(by)
    low, high = wilson_interval(summed["n_nonresponse"].to_numpy(), summed["n"].to_numpy())
    return summed.with_columns(
        rate=pl.col("n_nonresponse") / pl.col("n"),
        ci_low=pl.Series(low, dtype=pl.Float64),
        ci_high=pl.Series(high, dtype=pl.Float64),
    )


def _counted(answers: pl.DataFrame) -> pl.DataFrame:
    reason = pl.col("reason")
    return answers.with_columns(
        n=pl.lit(1, pl.Int64),
        n_nonresponse=reason.is_not_null().cast(pl.Int64),
        **{f"n_{r}": (reason == r).fill_null(False).cast(pl.Int64) for r in REASONS},
    )


def _groups(rows: pl.DataFrame, dimension: str) -> str:
    """Each group's non-response, highest rate first: 'Black 30.2% (58/192); ...'."""
    rates = summarise(rows, [dimension]).sort("rate", dimension, descending=[True, False])
    return "; ".join(
        f"{r[dimension]} {100 * r['rate']:.1f}% ({r['n_nonresponse']}/{r['n']})"
        for r in rates.iter_rows(named=True)
    )


def _test(rows: pl.DataFrame, dimension: str) -> tuple[float, int, float, int]:
    cells = rows.group_by(*STRATA, dimension).agg(pl.col("n").sum(), pl.col("n_nonresponse").sum())
    strata = cells.select(STRATA).unique().with_row_index("_s")
    levels = sorted(set(cells[dimension].drop_nulls()))
    cells = cells.join(strata, on=list(STRATA), how="left", nulls_equal=True)
    counts = np.zeros((strata.height, len(levels), 2))
    for r in cells.drop_nulls(dimension).iter_rows(named=True):
        g = levels.index(r[dimension])
        counts[r["_s"], g] = (r["n"] - r["n_nonresponse"], r["n_nonresponse"])
    result = stratified_g_test(counts)
    return result.statistic, result.df, result.p_value, result.n_strata


def differential_tests(answers: pl.DataFrame, alpha: float) -> pl.DataFrame:
    """The tests of :data:`TESTS_SCHEMA`, one per arm × model × format × dimension, then the
    pooled ones where an arm × format has more than one model; ``differential`` at BH level
    ``alpha`` (the config's ``decision.analysis.nonresponse_alpha``). A test without any
    informative stratum has null ``p_value``."""
    counted = _counted(answers)
    rows = []
    for pooled in (False, True):
        unit = ["arm", "format"] if pooled else list(UNIT)
        for key, part in sorted(
            counted.partition_by(unit, as_dict=True).items(), key=lambda kv: tuple(map(str, kv[0]))
        ):
            if pooled and part["model"].n_unique() < 2:
                continue
            values = dict(zip(unit, key, strict=True)) | ({"model": POOLED} if pooled else {})
            for dimension in DIMENSIONS:
                statistic, df, p_value, n_strata = _test(part, dimension)
                rows.append(
                    {
                        **values,
                        "dimension": dimension,
                        "pooled": pooled,
                        "statistic": statistic,
                        "df": df,
                        "p_value": p_value,
                        "n": part.height,
                        "n_nonresponse": int(part["n_nonresponse"].sum()),
                        "n_strata": n_strata,
                        "groups": _groups(part, dimension),
                    }
                )
    tests = pl.DataFrame(rows, schema=TESTS_SCHEMA)
    if tests.is_empty():
        return tests
    own = ~tests["pooled"].to_numpy()
    p = np.where(own, tests["p_value"].to_numpy(), np.nan)
    q = bh_qvalues(p)
    return tests.with_columns(
        p_value=pl.col("p_value").fill_nan(None),
        q_value=pl.Series(q).fill_nan(None),
        differential=pl.when(pl.Series(own)).then(pl.Series(q < alpha)),
    ).select(list(TESTS_SCHEMA))


def nonresponse_table(answers: pl.DataFrame, tests: pl.DataFrame) -> pl.DataFrame:
    """:data:`NONRESPONSE_SCHEMA`: counts and rates per arm × model × format × mode × race ×
    gender, each with its model × format's ``differential``."""
    by = ["arm", "model", "format", "mode", "race", "gender"]
    flags = _flags(tests)
    table = summarise(_counted(answers), by).join(flags, on=list(UNIT), how="left")
    return table.select(list(NONRESPONSE_SCHEMA)).cast(NONRESPONSE_SCHEMA)


def _flags(tests: pl.DataFrame) -> pl.DataFrame:
    """Per arm × model × format of the per-model tests: whether any was differential."""
    own = tests.filter(~pl.col("pooled"))
    return own.group_by(UNIT).agg(pl.col("differential").fill_null(False).any())


def flag_contrasts(table: pl.DataFrame, tests: pl.DataFrame, arm: str = PRIMARY) -> pl.DataFrame:
    """``table`` with ``nonresponse_flag`` (its format, and model when it has one, had
    differential non-response in ``arm``, or in the row's ``arm``) and ``nonresponse_models``
    (the flagged models, comma-separated; null when none)."""
    keys = [c for c in UNIT if c in table.columns]
    if "format" not in keys:
        raise InputError("contrast table", "no format column to flag", "format")
    flagged = _flags(tests).filter(pl.col("differential"))
    if "arm" not in keys:
        flagged = flagged.filter(pl.col("arm") == arm)
    models = flagged.group_by(keys).agg(
        nonresponse_models=pl.col("model").unique().sort().str.join(", ")
    )
    cast = {k: pl.String() for k in keys}
    joined = table.with_columns(pl.col(k).cast(pl.String) for k in keys).join(
        models.cast(cast), on=keys, how="left", maintain_order="left"
    )
    return joined.with_columns(nonresponse_flag=pl.col("nonresponse_models").is_not_null()).select(
        *table.columns, "nonresponse_flag", "nonresponse_models"
    )


def stop_if_differential(tests: pl.DataFrame) -> None:
    """Raise :class:`DifferentialNonresponse` naming each flagged arm, model, format,
    dimension and its groups' rates."""
    flagged = tests.filter(~pl.col("pooled") & pl.col("differential").fill_null(False))
    if flagged.is_empty():
        return
    lines = []
    for r in flagged.sort("q_value").iter_rows(named=True):
        arm = "" if r["arm"] == PRIMARY else f"arm {r['arm']}, "
        lines.append(
            f"{arm}model {r['model']}, format {r['format']}: non-response depends on "
            f"{r['dimension']} (G = {r['statistic']:.1f}, df {r['df']}, p = {r['p_value']:.2g}, "
            f"q = {r['q_value']:.2g}): {r['groups']}"
        )
    raise DifferentialNonresponse(
        "differential non-response, and decision.analysis.stop_on_differential_nonresponse "
        "is true (set it to false to report it as a finding):\n" + "\n".join(lines)
    )
