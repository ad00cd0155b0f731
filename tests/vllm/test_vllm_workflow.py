"""vLLM for real: the workflow's inference jobs with ``backend: vllm`` (vLLM's CPU build) beside
the HF engine on the same prompts, both studies, every answer format.

Runs where vLLM is installed: CI's vllm group, in its own environment (bash scripts/install.sh
--vllm; .ci/run). Elsewhere it skips, unless CUEAUDIT_REQUIRE_VLLM=1 makes that a failure.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.conftest import ROOT, SMOLLM2_SPEC, SnakemakeRunner, tiny_config, write_config
from tests.e2e.test_decision import decision_config

if importlib.util.find_spec("vllm") is None and os.environ.get("CUEAUDIT_REQUIRE_VLLM") == "1":
    pytest.fail("CUEAUDIT_REQUIRE_VLLM=1 but vLLM is not installed", pytrace=False)
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="needs vLLM (its CPU build: bash scripts/install.sh --vllm)",
    ),
]

HF, VLLM = "smollm2-hf", "smollm2-vllm"
#: Option scores with multi-token forms (binary, race labels), free text (salary).
PROBING_TASKS = ["healthcare", "salary", "race_prediction"]
#: Each way an answer is asked for: free text with option scores, a forced tool call, a JSON
#: schema (the other formats are the same requests on other wording; the forced-choice probe,
#: many multi-token labels, took 5 of the group's 12 minutes and adds no other path).
DECISION_TASKS = ["decision_rate_text", "decision_decide_tool", "decision_rank_json"]
CONSTRAINED = ["decision_decide_tool", "decision_rank_json"]
RANK_BUNDLES = {
    "demographic_matched": 4,
    "irrelevant_matched": 4,
    "disguised_demographic": 0,
    "disguised_placebo": 0,
}
#: Bounds of agreement with the HF engine on the same prompts (both float32, greedy).
MIN_SCORE_CORRELATION = 0.99
MIN_ANSWER_AGREEMENT = 0.9
CALLS = re.compile(r"model calls: (\d+), cache hits: (\d+)")
#: The interpreter of the project's environment with the HF extra (scripts/install.sh).
HF_PYTHON = os.environ.get("CUEAUDIT_HF_PYTHON", str(ROOT / ".venv/bin/python"))


def both_engines_config() -> dict:
    config = tiny_config(seeds=[0])
    for task in config["probing"]["tasks"].values():
        task |= {"shards": 1, "limit": 1}
    config["probing"]["race_prediction"] = {"enabled": True, "tasks": ["healthcare"]}
    config["decision"] = decision_config()["decision"]
    config["decision"]["design"]["tasks"] = DECISION_TASKS
    # 8 rankings, not 32: the JSON-schema path, at a quarter of its CI time
    config["decision"]["design"]["bundles_per_type"] = RANK_BUNDLES
    # greedy: the engines must give the same answers; no re-answers (tests/unit checks them)
    config["decoding"] = {"temperature": 0, "determinism_checks": 0}
    config["models"] = {
        # one job for the six tasks, as the main job runs it: one engine start, not six
        HF: dict(SMOLLM2_SPEC, batch_size=16, inference_jobs="per_seed"),
        VLLM: {**SMOLLM2_SPEC, "backend": "vllm", "vllm": {"kv_cache_gib": 1, "chunk_prompts": 64}},
    }
    return config


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("vllm")
    write_config(path, both_engines_config())
    return path


def outcome_tables(model: str) -> list[str]:
    return [
        f"results/outcomes/{model}/seed0/{task}.parquet" for task in PROBING_TASKS + DECISION_TASKS
    ]


def test_both_engines_answer_every_task(workdir: Path, run_snakemake: SnakemakeRunner) -> None:
    """The run the other tests read: every task's answers on both engines, parsed. The HF
    engine runs in the project's own environment (HF_PYTHON), with the HF extra's pins, as its
    users run it; vLLM in this one."""
    run_snakemake(workdir, *outcome_tables(HF), python=HF_PYTHON)
    run_snakemake(workdir, *outcome_tables(VLLM))
    assert all((workdir / t).is_file() for t in outcome_tables(HF) + outcome_tables(VLLM))


def responses(workdir: Path, model: str, task: str) -> pl.DataFrame:
    return pl.read_parquet(workdir / f"results/responses/{model}/seed0/{task}/0.parquet")


def outcomes(workdir: Path, model: str, task: str) -> pl.DataFrame:
    return pl.read_parquet(workdir / f"results/outcomes/{model}/seed0/{task}.parquet")


def option_probabilities(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per prompt and option: the option's probability."""
    rows = [
        {"prompt_uid": uid, "option": option, "p": math.exp(value)}
        for uid, scores in zip(frame["prompt_uid"], frame["option_logprobs"], strict=True)
        if scores
        for option, value in json.loads(scores).items()
    ]
    return pl.DataFrame(
        rows, schema={"prompt_uid": pl.String, "option": pl.String, "p": pl.Float64}
    )


def score_correlation(hf: pl.DataFrame, vllm: pl.DataFrame) -> float:
    """Pearson correlation of the two engines' option probabilities, prompt by prompt."""
    joined = option_probabilities(hf).join(
        option_probabilities(vllm), on=["prompt_uid", "option"], suffix="_vllm"
    )
    assert joined.height > 0, "no option scored by both engines"
    return float(np.corrcoef(joined["p"], joined["p_vllm"])[0, 1])


def reversed_options(scores: str | None) -> str | None:
    """The scores given to the options in reverse order (a wrong option position)."""
    if not scores:
        return scores
    values = json.loads(scores)
    return json.dumps(dict(zip(values, reversed(values.values()), strict=True)))


def task_blocks(log: str) -> dict[str, str]:
    """A per-seed job's log cut at its "task i of n: <task>" lines: task -> its lines."""
    parts = re.split(r"^.*task \d+ of \d+: (\S+)$", log, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_one_job_answered_every_task_on_one_vllm_engine(workdir: Path) -> None:
    """inference_jobs: per_seed, vLLM's default: one job for the seed, one engine start."""
    log = (workdir / f"logs/inference/{VLLM}/seed0.log").read_text()
    blocks = task_blocks(log)
    assert sorted(blocks) == sorted(PROBING_TASKS + DECISION_TASKS)
    for task, lines in blocks.items():
        generated, _ = map(int, CALLS.findall(lines)[-1])
        assert generated == responses(workdir, VLLM, task).height > 0, task
        assert re.search(r"engine: .*'engine_starts': 1\b", lines), task
        # the same chat template: every prompt the same tokens on both engines
        tokens = responses(workdir, HF, task).join(
            responses(workdir, VLLM, task), on="prompt_uid", suffix="_vllm"
        )
        assert (tokens["prompt_tokens"] == tokens["prompt_tokens_vllm"]).all(), task


@pytest.mark.parametrize("task", ["healthcare", "race_prediction", "decision_rate_text"])
def test_option_scores_agree_with_the_hf_engine(workdir: Path, task: str) -> None:
    hf, vllm = responses(workdir, HF, task), responses(workdir, VLLM, task)
    correlation = score_correlation(hf, vllm)
    print(f"{task}: option-score correlation {correlation:.4f} over {hf.height} prompts")
    assert correlation >= MIN_SCORE_CORRELATION, task
    # the check fails where the prompts or the options are not the same ones
    shuffled = vllm.with_columns(pl.col("prompt_uid").shuffle(seed=1))
    assert score_correlation(hf, shuffled) < MIN_SCORE_CORRELATION
    swapped = vllm.with_columns(
        pl.col("option_logprobs").map_elements(reversed_options, return_dtype=pl.String)
    )
    assert score_correlation(hf, swapped) < MIN_SCORE_CORRELATION


@pytest.mark.parametrize("task", PROBING_TASKS + DECISION_TASKS)
def test_parsed_answers_agree_with_the_hf_engine(workdir: Path, task: str) -> None:
    hf, vllm = outcomes(workdir, HF, task), outcomes(workdir, VLLM, task)
    joined = hf.join(vllm, on="prompt_uid", suffix="_vllm")
    assert joined.height == hf.height == vllm.height > 0
    parsed = [c for c in ("answer", "ranks", "answer_label") if c in hf.columns]
    assert parsed, f"{task}: no parsed column in {hf.columns}"
    column = parsed[0]
    pairs = zip(joined[column].to_list(), joined[f"{column}_vllm"].to_list(), strict=True)
    same = sum(a == b for a, b in pairs)
    agreement = same / joined.height
    print(f"{task}: parsed answers identical in {same} of {joined.height} ({agreement:.2f})")
    assert agreement >= MIN_ANSWER_AGREEMENT, task


@pytest.mark.parametrize("task", CONSTRAINED)
def test_constrained_answers_have_one_layout_on_both_backends(workdir: Path, task: str) -> None:
    """The grammar is the instrument's: json.dumps' default separators, no other whitespace,
    on vLLM as on the HF engine (vLLM's own default lets the model write any whitespace)."""
    for model in (HF, VLLM):
        frame = responses(workdir, model, task)
        complete = frame.filter(pl.col("finish_reason") == "stop")["completion"].to_list()
        assert complete, f"{model} {task}: no complete answer"
        for text in complete:
            assert text == json.dumps(json.loads(text)), (model, task, text)
