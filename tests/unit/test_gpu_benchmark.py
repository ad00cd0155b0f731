"""benchmarks/gpu_inference.py on CPU with the tiny model: the report counts the work done."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

from cueaudit.errors import InputError
from cueaudit.inference.core import render_user_turn
from cueaudit.inference.hf_batching import common_prefix_length
from cueaudit.prompts import scan_prompts

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "gpu_inference", ROOT / "benchmarks/gpu_inference.py"
)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules["gpu_inference"] = bench
_spec.loader.exec_module(bench)

N, NEW = 12, 3
MEASURED = ("cueaudit", "cueaudit_history_groups", "generate_tuned")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, Path]:
    out = tmp_path_factory.mktemp("gpu_benchmark")
    work = out / "work"
    argv = ["--model", "tiny", "--device", "cpu", "--prompts", str(N), "--rows-per-cue", "2"]
    argv += ["--new-tokens", str(NEW), "--warmup", "2", "--threads", "2", "--history-groups"]
    report = bench.main([*argv, "--out", str(out), "--work-dir", str(work)])
    return report, out, work


def _token_lists(work: Path) -> dict[str, list[list[int]]]:
    """Each task's rendered prompts tokenised independently of the benchmark."""
    tokenizer = AutoTokenizer.from_pretrained(work / "model")
    lists = {}
    for task in bench.TASKS:
        texts = scan_prompts(work / f"prompts_{task}.parquet").select("text").collect()
        rendered = [render_user_turn(tokenizer, t, ()) for t in texts["text"]]
        lists[task] = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    return lists


def test_every_configuration_does_the_same_fixed_work(run: tuple) -> None:
    report, _, work = run
    configs = report["configurations"]
    assert set(configs) == {*MEASURED, "paper"}
    assert "CUDA" in configs["paper"]["skipped"] and set(configs["paper"]) == {"skipped"}
    tokens = _token_lists(work)
    prompt_tokens = sum(len(ids) for lists in tokens.values() for ids in lists)
    for name in MEASURED:
        row = configs[name]
        assert row["prompts"] == N, name
        assert row["new_tokens"] == {"min": NEW, "max": NEW}, name
        assert row["generated_tokens"] == N * NEW, name
        assert row["prompt_tokens"] == row["prefill"]["prompt_tokens"] == prompt_tokens, name
        assert row["prompts_per_s"] == pytest.approx(N / row["seconds"])
        assert row["projected_gpu_hours"] == pytest.approx(14_801_000 / row["prompts_per_s"] / 3600)
        assert row["mfu"] is None and row["prefill"]["mfu"] is None  # no peak on a CPU
        assert row["peak_gpu_memory_bytes"] is None
        assert sum(t["prompts"] for t in row["per_task"].values()) == N


def test_prefill_counts_are_the_tokens_each_configuration_computed(run: tuple) -> None:
    report, _, work = run
    configs = report["configurations"]
    tokens = _token_lists(work)
    prompt_tokens = sum(len(ids) for lists in tokens.values() for ids in lists)
    tuned = configs["generate_tuned"]
    # generate computes every prompt token; one batch per task, left-padded to its longest.
    assert tuned["computed_tokens"] == prompt_tokens
    assert tuned["padded_slots"] == sum(
        len(lists) * max(map(len, lists)) for lists in tokens.values()
    )
    # The engine computes each task's chat header once, not once per prompt.
    saved = 0
    for lists in tokens.values():
        header = min(common_prefix_length(lists), min(map(len, lists)) - 1)
        saved += (len(lists) - 1) * header
    assert saved > 0
    for name in ("cueaudit", "cueaudit_history_groups"):
        engine = configs[name]
        assert 0 < engine["computed_tokens"] <= prompt_tokens - saved
        assert engine["computed_tokens"] <= engine["padded_slots"]
        assert engine["prefill"]["computed_tokens"] == engine["computed_tokens"]
        assert engine["token_budget_probed"] == engine["token_budget_final"] > 0
        assert engine["oom_backoffs"] == 0
        assert engine["decoding"]["temperature"] == 1.0
        # The model's own generation config (LLaMA-3.1-8B-Instruct's top_p) fills the rest.
        assert engine["decoding"]["top_p"] == 0.9


def test_report_files_and_the_prompt_mix(run: tuple) -> None:
    report, out, _ = run
    assert json.loads((out / "gpu_inference.json").read_text()) == json.loads(
        json.dumps(report, default=str)
    )
    table = (out / "gpu_inference.md").read_text().splitlines()
    for name in (*MEASURED, "paper"):
        assert sum(line.startswith(f"| {name} |") for line in table) == 1, name
    prompts = report["prompts"]
    assert sum(prompts["per_task"].values()) == sum(prompts["cue_types"].values()) == N
    # Each task's 4 prompts: a name group, then (furthest below its share) a dialog cluster.
    assert prompts["cue_types"] == {"name": 6, "dialog": 6}
    # The runner batches by exact prefix: its groups are the dialog histories.
    assert 0 < prompts["groups"] == prompts["history_groups"] <= N
    configs = report["configurations"]
    assert (
        configs["cueaudit"]["computed_tokens"]
        == configs["cueaudit_history_groups"]["computed_tokens"]
    )
    tiny = LlamaConfig(**bench.MODELS["tiny"])
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(tiny)
    assert report["model"]["parameters"]["total"] == sum(p.numel() for p in model.parameters())


def test_the_cue_mix_and_the_8b_shape() -> None:
    cues = bench.paper_cues()
    counts = dict(cues["cue_type"].value_counts().iter_rows())
    assert counts == {"none": 1, "name": 600, "explicit": 23, "dialect": 1, "dialog": 400}
    dialogs = cues.filter(pl.col("cue_type") == "dialog")
    lengths = dialogs["prefix"].str.len_chars()
    assert lengths.min() >= 2300 and lengths.max() < 2500
    first_turns = dialogs.group_by("cue_source", "cue_value").agg(
        pl.col("prefix").str.split("\nUSER: ").list.first().n_unique().alias("openings")
    )
    openings = dict(first_turns.group_by("cue_source").agg(pl.col("openings").max()).rows())
    assert openings == {"cad": 1, "prism": 4}  # CAD clusters share their first turn
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(LlamaConfig(**bench.LLAMA_31_8B))
    assert sum(p.numel() for p in model.parameters()) == 8_030_261_248  # LLaMA-3.1-8B's count
    with pytest.raises(InputError, match="needs a CUDA GPU"):
        bench.parse_args(["--model", "llama8b", "--device", "cpu"])


def test_prompts_come_in_whole_cue_groups_as_a_shard_holds_them(tmp_path: Path) -> None:
    prompts = bench.draw_prompts(600, 4, tmp_path, seed=1)
    assert {task: table.height for task, table in prompts.items()} == dict.fromkeys(
        bench.TASKS, 200
    )
    assert pl.concat(prompts.values())["prompt_uid"].n_unique() == 600
    dialog_groups = 0
    for table in prompts.values():
        sizes = table.group_by("group", maintain_order=True).agg(
            pl.len().alias("rows"),
            pl.col("history").n_unique().alias("histories"),
            pl.col("cue_type").first(),
        )
        whole = sizes.head(-1)  # the task's last group may be cut short
        dialog = whole.filter(pl.col("cue_type") == "dialog")
        dialog_groups += dialog.height
        # The runner batches by exact prefix: each history is its own group of 4 base prompts.
        assert set(dialog["rows"]) <= {4} and set(dialog["histories"]) <= {1}
        assert set(whole["histories"]) <= {1}
        assert table.group_by("history").len()["len"].max() == 4
        for text in table.filter(pl.col("cue_type") == "dialog")["text"]:
            assert text.startswith("USER: Can you help me think through") and len(text) > 2400
    assert dialog_groups > 0
