"""From response shards to outcome tables: one row per response, read by its outcome kind.

The answer's source decides the parser:

- ``tool_call``: the ``tool_calls`` column holds calls; the call to the kind's tool is read by
  the kind's structured parser;
- ``json``: no tool calls and ``constrained`` is true: the completion is the JSON answer;
- ``text``: otherwise, the kind's free-text parser reads the completion.

Option-score columns come from ``option_logprobs`` and are null where it is null.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import polars as pl

from cueaudit.errors import InputError
from cueaudit.io import write_parquet
from cueaudit.parsing import structured
from cueaudit.parsing.kinds import OutcomeKind, Parsed, get_kind

#: Columns of every outcome table, before the kind's own columns.
COMMON_COLUMNS: Final = {
    "prompt_uid": pl.String(),
    "model": pl.String(),
    "seed": pl.Int64(),
    "task": pl.String(),
    "parse_error": pl.String(),
    "answer_source": pl.String(),  # 'text', 'json' or 'tool_call'
    "constrained": pl.Boolean(),
    "generated": pl.Float64(),  # when the answer was generated (null in older shards)
}
ANSWER_SOURCES: Final = ("text", "json", "tool_call")
#: What identifies one answer: one outcome per prompt, model, seed and task.
ANSWER_KEY: Final = ("prompt_uid", "model", "seed", "task")
_REQUIRED: Final = ("prompt_uid", "model", "seed", "task", "completion")


def outcome_schema(kind: str, settings: Mapping[str, Any] | None = None) -> dict[str, pl.DataType]:
    """The columns of an outcome table of this kind, in order."""
    return {**COMMON_COLUMNS, **get_kind(kind, settings).columns()}


def read_answer(
    kind: OutcomeKind, completion: str | None, tool_calls: str | None, constrained: bool
) -> tuple[str, Parsed]:
    """The answer's source and what the kind reads from it (rules in the module docstring).
    An answer too long or too deeply nested to read (:func:`structured.unreadable`) is a
    failure of that answer alone, with its reason."""
    calls = tool_calls is not None and tool_calls.strip() != "[]"
    source = "tool_call" if calls else "json" if constrained else "text"
    reason = structured.unreadable(tool_calls) or structured.unreadable(completion)
    if reason is not None:
        return source, Parsed(reason=reason)
    try:
        return _read(kind, completion, tool_calls, constrained)
    except RecursionError:  # nesting the bracket count missed (brackets in broken strings)
        return source, Parsed(reason="too_deep")


def _read(
    kind: OutcomeKind, completion: str | None, tool_calls: str | None, constrained: bool
) -> tuple[str, Parsed]:
    if tool_calls is not None:
        try:
            calls = json.loads(tool_calls)
        except ValueError:
            return "tool_call", Parsed(reason="invalid_json")
        if calls != []:
            return "tool_call", kind.parse_tool_calls(calls)
    if constrained:
        return "json", kind.parse_json(completion)
    return "text", kind.parse_text(completion)


def _column(responses: pl.DataFrame, name: str, dtype: pl.DataType) -> pl.Series:
    """An input column, all null when the shards predate it (old shards: not constrained)."""
    if name not in responses.columns:
        return pl.Series(name, [None] * responses.height, dtype=dtype)
    column = responses[name]
    if column.dtype not in (dtype, pl.Null()):
        raise InputError("responses", f"must be {dtype}, got {column.dtype}", name)
    return column.cast(dtype)


def _logprobs(raw: str | None) -> dict[str, float] | None:
    if raw is None:
        return None
    try:
        decoded = json.loads(raw)
    except ValueError as error:
        raise InputError("responses", f"not JSON: {raw[:80]!r}", "option_logprobs") from error
    if not isinstance(decoded, dict):
        raise InputError("responses", f"not a JSON object: {raw[:80]!r}", "option_logprobs")
    return decoded


def parse_responses(
    responses: pl.DataFrame, kind: str, settings: Mapping[str, Any] | None = None
) -> pl.DataFrame:
    """One outcome row per response: :data:`COMMON_COLUMNS`, then the kind's columns.

    Each distinct answer (completion, tool calls, constrained) and each distinct set of option
    scores is parsed once.
    """
    outcome = get_kind(kind, settings)
    missing = [c for c in _REQUIRED if c not in responses.columns]
    if missing:
        raise InputError("responses", "missing column", missing[0])
    completions = _column(responses, "completion", pl.String())
    tool_calls = _column(responses, "tool_calls", pl.String())
    constrained = _column(responses, "constrained", pl.Boolean()).fill_null(False)
    generated = _column(responses, "generated", pl.Float64())
    scores = _column(responses, "option_logprobs", pl.String())

    answers: dict[tuple[str | None, str | None, bool], tuple[str, Parsed]] = {}
    scored: dict[str | None, dict[str, float | None]] = {}
    value_columns = outcome.value_columns()
    columns: dict[str, list[Any]] = {
        c: [] for c in ("parse_error", "answer_source", *value_columns)
    }
    score_rows: list[dict[str, float | None]] = []
    for key in zip(completions, tool_calls, constrained, strict=True):
        if key not in answers:
            answers[key] = read_answer(outcome, *key)
        source, parsed = answers[key]
        columns["parse_error"].append(parsed.reason)
        columns["answer_source"].append(source)
        for name in value_columns:
            columns[name].append(parsed.values.get(name))
    for raw in scores:
        if raw not in scored:
            scored[raw] = outcome.option_scores(_logprobs(raw))
        score_rows.append(scored[raw])
    for name in outcome.score_columns():
        columns[name] = [row[name] for row in score_rows]

    schema = {**COMMON_COLUMNS, **outcome.columns()}
    parsed_frame = pl.DataFrame(columns, schema={c: schema[c] for c in columns})
    return (
        responses.select("prompt_uid", "model", "seed", "task")
        .with_columns(constrained, generated)
        .hstack(parsed_frame)
        .select(list(schema))
        .cast(pl.Schema(schema))
    )


def parse_response_files(
    paths: Sequence[str | Path],
    kind: str,
    settings: Mapping[str, Any] | None,
    out_path: str | Path,
) -> pl.DataFrame:
    """Parse the response shards of one model, seed and task into one outcome table, written
    atomically to ``out_path``. A prompt answered twice (a duplicated row, a shard copied
    over another) is an error naming the shard: one prompt gets one outcome."""
    if not paths:
        raise InputError("parse_response_files", "no response shards", "paths")
    parts = [_parse_shard(Path(p), kind, settings) for p in paths]
    outcomes = pl.concat(
        [part.with_columns(_shard=pl.lit(i)) for i, part in enumerate(parts)],
        how="diagonal_relaxed",
    )
    twice = outcomes.filter(pl.struct(ANSWER_KEY).is_duplicated())
    if twice.height:
        first = twice.row(0, named=True)
        shards = sorted({str(paths[i]) for i in twice["_shard"].to_list()})
        raise InputError(
            shards[-1],
            f"{twice.select(ANSWER_KEY).n_unique()} prompts answered more than once (first: "
            f"{first['prompt_uid']} of {first['task']}, in {', '.join(shards)}): one prompt "
            "gets one outcome",
            "prompt_uid",
        )
    outcomes = outcomes.drop("_shard")
    write_parquet(outcomes, out_path)
    return outcomes


def _parse_shard(path: Path, kind: str, settings: Mapping[str, Any] | None) -> pl.DataFrame:
    """One shard's outcomes; a problem with its table is reported with the shard's path."""
    if not path.is_file():
        raise InputError(str(path), "file not found")
    try:
        responses = pl.read_parquet(path)
    except (pl.exceptions.ComputeError, OSError) as error:
        raise InputError(str(path), "not a response shard (parquet)") from error
    try:
        return parse_responses(responses, kind, settings)
    except InputError as error:
        if error.source != "responses":
            raise
        raise InputError(str(path), error.message, error.field) from error
