"""Bad model answers: response shards given to ``cueaudit.parsing.responses.parse_response_files``.

Cases by category (11):

- response tables that cannot be parsed (missing shards or columns, wrong types, option
  scores that are not a JSON object, a file that is not a shard): 8; none may write the
  outcome table under ``results/``.
- answers that parse to null with a reason (invalid tool-call JSON, a call to another tool,
  an empty completion): 3; these are answers, not input errors, so they give a row whose
  ``parse_error`` names the reason.

Every message names the shard file at fault (they named none before: a regression test).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from cueaudit.inference.core import RESPONSE_SCHEMA
from cueaudit.parsing.responses import parse_response_files
from tests.bad_inputs.battery import Case, Where, params, run_case

ROW: dict[str, Any] = {
    "prompt_uid": "u1",
    "model": "smollm2-135m",
    "seed": 0,
    "task": "healthcare",
    "completion": "Yes.",
    "prompt_tokens": 12,
    "completion_tokens": 2,
    "finish_reason": "stop",
    "option_logprobs": None,
    "tool_calls": None,
    "constrained": False,
    "seconds": 0.1,
    "backend": "hf",
    "cache_key": "k1",
    "cache_hit": False,
}


def shard(change: Callable[[pl.DataFrame], pl.DataFrame] = lambda f: f, **values: Any) -> bytes:
    """A one-row response shard (parquet bytes) with some values or columns changed."""
    out = io.BytesIO()
    change(pl.DataFrame([{**ROW, **values}], schema=RESPONSE_SCHEMA)).write_parquet(out)
    return out.getvalue()


def parse(kind: str = "binary", shards: tuple[str, ...] = ("0.parquet",)) -> Callable[[Where], Any]:
    def call(w: Where) -> Any:
        return parse_response_files(
            [w / s for s in shards], kind, None, w.results / "outcomes" / "healthcare" / "0.parquet"
        )

    return call


ERROR_CASES = [
    Case(
        "answers-no-shards",
        parse(shards=()),
        "parse_response_files: field 'paths': no response shards",
    ),
    Case(
        "answers-column-completion-missing",
        parse(),
        "{in}/0.parquet: field 'completion': missing column",
        {"0.parquet": shard(lambda f: f.drop("completion"))},
    ),
    Case(
        "answers-completion-an-integer",
        parse(),
        "{in}/0.parquet: field 'completion': must be String, got Int64",
        {
            "0.parquet": shard(
                lambda f: f.with_columns(pl.lit(7, dtype=pl.Int64).alias("completion"))
            )
        },
    ),
    Case(
        "answers-constrained-a-string",
        parse(),
        "{in}/0.parquet: field 'constrained': must be Boolean, got String",
        {"0.parquet": shard(lambda f: f.with_columns(pl.lit("no").alias("constrained")))},
    ),
    Case(
        "answers-option-logprobs-not-json",
        parse(),
        "{in}/0.parquet: field 'option_logprobs': not JSON: '{Yes: -0.1'",
        {"0.parquet": shard(option_logprobs="{Yes: -0.1")},
    ),
    Case(
        "answers-option-logprobs-a-json-list",
        parse(),
        "{in}/0.parquet: field 'option_logprobs': not a JSON object: '[-0.1, -2.3]'",
        {"0.parquet": shard(option_logprobs="[-0.1, -2.3]")},
    ),
    Case(
        "answers-shard-not-parquet",
        parse(),
        "{in}/0.parquet: not a response shard (parquet)",
        {"0.parquet": b"prompt_uid,completion\nu1,Yes\n"},
    ),
    Case(
        "answers-shard-missing",
        parse(shards=("0.parquet", "1.parquet")),
        "{in}/1.parquet: file not found",
        {"0.parquet": shard()},
    ),
]


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=c.id)
        for c in ERROR_CASES
        if params(ERROR_CASES)  # checks the ids are unique
    ],
)
def test_bad_response_table(case: Case, tmp_path: Path) -> None:
    run_case(case, tmp_path)


CALL = json.dumps([{"name": "submit_decision", "arguments": {"decision": "yes"}}])


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        pytest.param(
            {"tool_calls": "[{not json", "constrained": True},
            "invalid_json",
            id="answers-tool-call-invalid-json",
        ),
        pytest.param(
            {"tool_calls": CALL.replace("submit_decision", "submit_rating"), "constrained": True},
            "wrong_tool",
            id="answers-tool-call-to-another-tool",
        ),
        pytest.param({"completion": ""}, "empty", id="answers-empty-completion"),
    ],
)
def test_unreadable_answer_is_null_with_a_reason(
    values: dict[str, Any], reason: str, tmp_path: Path
) -> None:
    (tmp_path / "0.parquet").write_bytes(shard(**values))
    out = tmp_path / "results" / "outcomes" / "0.parquet"
    table = parse_response_files([tmp_path / "0.parquet"], "binary", None, out)
    row = table.row(0, named=True)
    assert (row["parse_error"], row["answer"]) == (reason, None)
    assert pl.read_parquet(out).equals(table)
