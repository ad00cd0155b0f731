"""The decision audit's constrained formats through llama.cpp's OpenAI-compatible server on
the packaged SmolLM2 (tool calls, a JSON schema). A module of its own so that, under
``pytest -n 2``, it runs beside tests/e2e/test_decision.py's long shared run."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.conftest import SnakemakeRunner, write_config
from tests.e2e.test_decision import decision_config
from tests.helpers.inference import llama_openai_config, llama_server, llama_server_available

pytestmark = pytest.mark.e2e

#: The formats whose answers the server constrains (tool calls, a JSON schema); the text and
#: probe tasks run through transformers in tests/e2e/test_decision.py.
SERVED_TASKS = [
    "decision_rate_tool",
    "decision_decide_tool",
    "decision_rank_json",
    "decision_rank_tool",
]
#: The answers are checked here, not the analysis: one Latin square of matched demographic
#: bundles (the server answers one request at a time: each ranking is seconds).
SERVED_BUNDLES = {
    "demographic_matched": 4,
    "irrelevant_matched": 0,
    "disguised_demographic": 0,
    "disguised_placebo": 0,
}


def served_config(url: str) -> dict:
    config = decision_config()
    config["decision"]["design"] |= {"tasks": SERVED_TASKS, "bundles_per_type": SERVED_BUNDLES}
    config["models"] = {
        "smollm2-server": {
            "backend": "openai",
            "openai": {
                **llama_openai_config(url),
                "schema_dialect": "llama_cpp",
                "concurrency": 2,
                "timeout_s": 300,
            },
        }
    }
    return config


@pytest.mark.skipif(not llama_server_available(), reason="needs llama-cpp-python[server]")
def test_the_design_through_the_llama_cpp_server_with_tool_calls(
    tmp_path: Path, run_snakemake: SnakemakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUEAUDIT_TEST_KEY", "not-a-real-key")
    with llama_server(tmp_path / "server.log") as url:
        write_config(tmp_path, served_config(url))
        run_snakemake(tmp_path, "results/tables/decision_outcome_summary.csv")
    summary = pl.read_csv(tmp_path / "results/tables/decision_outcome_summary.csv")
    rows = {row["task"]: row for row in summary.iter_rows(named=True)}
    assert set(rows) == set(SERVED_TASKS)
    for task in ("decision_rate_tool", "decision_decide_tool", "decision_rank_tool"):
        # a named tool_choice makes the server answer with a call to the format's tool
        assert rows[task]["n_tool_calls"] == rows[task]["n_responses"] > 0, task
        assert rows[task]["parse_rate"] == 1.0, task
    assert rows["decision_rank_json"]["parse_rate"] == 1.0
    outcomes = pl.read_parquet(
        tmp_path / "results/outcomes/smollm2-server/seed0/decision_rank_tool.parquet"
    )
    assert all(len(r) == 4 and set(r) <= {1, 2, 3, 4} for r in outcomes["ranks"].to_list())
    ratings = pl.read_parquet(
        tmp_path / "results/outcomes/smollm2-server/seed0/decision_rate_tool.parquet"
    )
    assert set(ratings["answer"].to_list()) <= {1.0, 2.0, 3.0, 4.0, 5.0}
