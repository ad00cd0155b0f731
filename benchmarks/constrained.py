"""Constrained decoding on the packaged SmolLM2-135M, CPU: llguidance vs xgrammar vs outlines-core.

For the ranking schema of the tests (four integer ranks in 1..4, ties allowed) and each library:

* ``compile_ms``: compiling the schema into a grammar (median of fresh compiles, no cache);
  ``tokenizer_ms``: the one-off preparation of the tokenizer's vocabulary;
* ``enforces_bounds``: whether, after ``{"ranks": [``, exactly the tokens 1..4 are allowed;
* ``mask_us_per_token``: filling one row's token bitmask and accepting the next token,
  replayed over 50 rankings in the generated layout; ``batch_mask_us_per_row``: the engine's
  whole masking step (fill, unpack, ``-inf``) on a batch of 50 rows, per row;
* end to end, HFEngine on 50 ranking prompts (``max_new_tokens`` 48): seconds per prompt and
  per generated token with the library's grammar, schema-valid share (``jsonschema``) and the
  tokens an answer needs; the same prompts unconstrained are the baselines, at 48 new tokens
  and at the tokens a constrained answer needs (``unconstrained_16``: equal work but the mask).
  Each configuration runs ``--rounds`` times, round-robin, and the fastest run is reported
  (the runs are kept): a shared machine's other load then weighs on all alike.

    pip install llguidance==1.9.1 xgrammar==0.2.8 outlines-core==0.2.14
    python benchmarks/constrained.py [--threads 2] [--out benchmarks/results/constrained.json]
                                     [--smoke]

``--smoke`` runs every step once on 2 prompts with ``max_new_tokens`` 20 and 1 thread
(seconds), with the libraries that are installed (llguidance at least: the engine's own), so
CI notices when the benchmark stops running; its times mean nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import jsonschema  # noqa: E402
import torch  # noqa: E402
from common import begin_results, default_out, footer, write_results  # noqa: E402

from cueaudit.inference.constrained import (  # noqa: E402
    JSON_LAYOUT,
    Grammars,
    GuidanceGrammars,
    Matcher,
    bitmask_words,
    blocked_tokens,
    mask_logits,
)
from cueaudit.inference.core import AnswerSpec, Request, backend_decoding, canonical_json  # noqa: E402
from cueaudit.inference.hf import HFEngine  # noqa: E402
from cueaudit.models import prepare_model  # noqa: E402
from tests.conftest import SMOLLM2_SPEC  # noqa: E402
from tests.unit.test_constrained import RANKING, ranking_prompt  # noqa: E402

PROMPTS = 50
MAX_NEW_TOKENS = 48
#: --smoke: prompts, max_new_tokens, rounds, threads (one: a shared CI machine's cores).
SMOKE = (2, 20, 1, 1)
#: Each library's module, to tell which are installed.
MODULES = {"llguidance": "llguidance", "xgrammar": "xgrammar", "outlines-core": "outlines_core"}


class XGrammarMatcher:
    def __init__(self, matcher: Any) -> None:
        self._matcher = matcher

    def fill(self, bitmask: torch.Tensor, row: int) -> None:
        self._matcher.fill_next_token_bitmask(bitmask, row)

    def accept(self, token: int) -> None:
        if not self._matcher.accept_token(token):
            raise RuntimeError(f"xgrammar rejected token {token}")

    @property
    def done(self) -> bool:
        return bool(self._matcher.is_terminated())


class XGrammarGrammars:
    name = "xgrammar"

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: list[int]) -> None:
        import xgrammar

        self._xgr = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=stop_ids
        )
        self._compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self._compiled: dict[str, Any] = {}

    def compile(self, schema: str) -> Any:
        separators = (JSON_LAYOUT["item_separator"], JSON_LAYOUT["key_separator"])
        return self._compiler.compile_json_schema(
            schema, any_whitespace=False, separators=separators
        )

    def matcher(self, schema: str) -> Matcher:
        if schema not in self._compiled:
            self._compiled[schema] = self.compile(schema)
        return XGrammarMatcher(self._xgr.GrammarMatcher(self._compiled[schema]))


class OutlinesMatcher:
    def __init__(self, guide: Any) -> None:
        self._guide = guide

    def fill(self, bitmask: torch.Tensor, row: int) -> None:
        words = bitmask[row : row + 1]
        self._guide.write_mask_into(words.data_ptr(), words.numel(), words.element_size())

    def accept(self, token: int) -> None:
        self._guide.advance(token)

    @property
    def done(self) -> bool:
        return bool(self._guide.is_finished())


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: the byte each vocabulary character stands for."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


class OutlinesGrammars:
    name = "outlines-core"

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: list[int]) -> None:
        from outlines_core import Vocabulary

        decoder = _byte_decoder()
        special = set(tokenizer.all_special_ids)
        tokens: dict[bytes, list[int]] = {}
        for text, token in tokenizer.get_vocab().items():
            if token not in special:
                tokens.setdefault(bytes(decoder[c] for c in text), []).append(token)
        self._vocabulary = Vocabulary(stop_ids[0], tokens)
        self._indexes: dict[str, Any] = {}

    def compile(self, schema: str) -> Any:
        from outlines_core import Index
        from outlines_core.json_schema import build_regex_from_schema

        return Index(build_regex_from_schema(schema, whitespace_pattern=r" ?"), self._vocabulary)

    def matcher(self, schema: str) -> Matcher:
        from outlines_core import Guide

        if schema not in self._indexes:
            self._indexes[schema] = self.compile(schema)
        return OutlinesMatcher(Guide(self._indexes[schema]))


def timed(action: Callable[[], Any]) -> tuple[Any, float]:
    tick = time.perf_counter()
    result = action()
    return result, time.perf_counter() - tick


def compile_ms(grammars: Any, schema: str, repeats: int = 5) -> float:
    return 1000 * statistics.median(
        timed(lambda: grammars.compile(schema))[1] for _ in range(repeats)
    )


def allowed_after(grammars: Grammars, schema: str, tokenizer: Any, prefix: str, vocab: int) -> list:
    matcher = grammars.matcher(schema)
    for token in tokenizer.encode(prefix, add_special_tokens=False):
        matcher.accept(token)
    bitmask = torch.zeros((1, bitmask_words(vocab)), dtype=torch.int32)
    matcher.fill(bitmask, 0)
    allowed = (~blocked_tokens(bitmask, vocab)[0]).nonzero()[0].tolist()
    return sorted(tokenizer.decode([t]) for t in allowed)


def mask_cost_us(grammars: Grammars, schema: str, answers: list[list[int]], vocab: int) -> float:
    """Fill one row's bitmask and accept the token, per token, over real answers."""
    bitmask = torch.zeros((1, bitmask_words(vocab)), dtype=torch.int32)
    steps = 0
    tick = time.perf_counter()
    for tokens in answers:
        matcher = grammars.matcher(schema)
        for token in tokens:
            matcher.fill(bitmask, 0)
            matcher.accept(token)
            steps += 1
    return 1e6 * (time.perf_counter() - tick) / steps


def batch_mask_us(grammars: Grammars, schema: str, rows: int, vocab: int) -> float:
    """The engine's masking step for a batch at the grammar's start, per row (median of 20)."""
    logits = torch.zeros((rows, vocab), dtype=torch.float64)
    matchers = [grammars.matcher(schema) for _ in range(rows)]

    def once() -> None:
        mask_logits(logits, matchers)

    return 1e6 * statistics.median(timed(once)[1] for _ in range(20)) / rows


def end_to_end(
    engine: HFEngine, requests: list[Request], max_new_tokens: int
) -> tuple[dict[str, Any], float]:
    decoding = backend_decoding(engine, {}, max_new_tokens)  # the model's own defaults
    out, seconds = timed(
        lambda: [(r, g) for batch in engine.generate(requests, decoding) for r, g in batch]
    )
    tokens = [g.completion_tokens for _, g in out]
    valid = 0
    for _, g in out:
        try:
            jsonschema.validate(json.loads(g.completion), RANKING)
            valid += 1
        except (json.JSONDecodeError, jsonschema.ValidationError):
            pass
    summary = {
        "completion_tokens_max": max(tokens),
        "completion_tokens_mean": sum(tokens) / len(tokens),
        "completion_tokens_total": sum(tokens),
        "schema_valid": valid / len(out),
        "examples": [g.completion for _, g in out[:3]],
    }
    return summary, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="timed runs per configuration")
    parser.add_argument("--model-dir", default="/tmp/cueaudit-bench/smollm2-135m")
    parser.add_argument("--out", type=Path, default=None, help="the JSON (default: results/)")
    parser.add_argument("--smoke", action="store_true", help="2 prompts, once, 1 thread")
    args = parser.parse_args()
    n_prompts, max_new_tokens = PROMPTS, MAX_NEW_TOKENS
    if args.smoke:
        n_prompts, max_new_tokens, args.rounds, args.threads = SMOKE
    results: dict[str, Any] = begin_results(args.smoke)
    torch.set_num_threads(args.threads)
    model_dir = Path(args.model_dir)
    if not (model_dir / "cueaudit-model.json").is_file():
        prepare_model("smollm2-135m", SMOLLM2_SPEC, model_dir)
    engine = HFEngine(str(model_dir))
    vocab = int(engine.model.get_output_embeddings().weight.shape[0])
    tokenizer, stops = engine.tokenizer, sorted(engine.stop_ids)
    schema = canonical_json(RANKING)
    spec = AnswerSpec(json_schema=schema)
    constrained = [
        Request(f"rank-{k}", ranking_prompt(k), 0, answer=spec) for k in range(n_prompts)
    ]
    free = [Request(f"rank-{k}", ranking_prompt(k), 0) for k in range(n_prompts)]
    factories = {
        "llguidance": GuidanceGrammars,
        "xgrammar": XGrammarGrammars,
        "outlines-core": OutlinesGrammars,
    }
    if args.smoke:  # the full run needs all three; a smoke run those installed
        missing = [n for n in factories if n != "llguidance" and not _installed(MODULES[n])]
        results["libraries_skipped"] = {name: "not installed" for name in missing}
        factories = {n: f for n, f in factories.items() if n not in missing}
    libraries: dict[str, dict[str, Any]] = {}
    grammars_of: dict[str, Grammars] = {}
    for name, factory in factories.items():
        grammars, setup = timed(lambda factory=factory: factory(tokenizer, vocab, stops))
        grammars_of[name] = grammars
        libraries[name] = {
            "tokenizer_ms": 1000 * setup,
            "compile_ms": compile_ms(grammars, schema),
            "enforces_bounds": allowed_after(grammars, schema, tokenizer, '{"ranks": [', vocab)
            == ["1", "2", "3", "4"],
            "batch_mask_us_per_row": batch_mask_us(grammars, schema, n_prompts, vocab),
        }
    engine.grammars = grammars_of["llguidance"]
    first, _ = end_to_end(engine, constrained, max_new_tokens)
    needed = first["completion_tokens_max"]
    replay = [
        tokenizer.encode(
            json.dumps({"ranks": [(k + j) % 4 + 1 for j in range(4)]}), add_special_tokens=False
        )
        for k in range(n_prompts)
    ]
    for name, grammars in grammars_of.items():
        libraries[name]["mask_us_per_token"] = mask_cost_us(grammars, schema, replay, vocab)
    # Configurations timed round-robin, so that other load on the machine spreads over all.
    runs: dict[str, tuple[Grammars | None, list[Request], int]] = {
        "unconstrained": (None, free, max_new_tokens),
        f"unconstrained_{needed}": (None, free, needed),
        **{name: (g, constrained, max_new_tokens) for name, g in grammars_of.items()},
    }
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    summaries: dict[str, dict[str, Any]] = {}
    for _ in range(args.rounds):
        for name, (grammars, requests, budget) in runs.items():
            if grammars is not None:
                engine.grammars = grammars
            summaries[name], took = end_to_end(engine, requests, budget)
            seconds[name].append(took)
    for name, summary in summaries.items():
        best = min(seconds[name])
        summary |= {
            "seconds_per_prompt": best / n_prompts,
            "seconds_per_token": best / summary["completion_tokens_total"],
            "seconds_runs": seconds[name],
        }
    results |= {
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, float32), CPU",
        "threads": args.threads,
        "rounds": args.rounds,
        "schema": RANKING,
        "prompts": n_prompts,
        "max_new_tokens": max_new_tokens,
        "tokens_needed": needed,
        "unconstrained": summaries["unconstrained"],
        f"unconstrained_{needed}": summaries[f"unconstrained_{needed}"],
        "libraries": {name: libraries[name] | summaries[name] for name in grammars_of},
    }
    print(json.dumps(results, indent=2))
    out = args.out or default_out("constrained", args.smoke)
    write_results(out, results)
    print(f"wrote {out}")


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _ms(value: float) -> str:
    return f"{value:.2f} ms" if value < 10 else f"{value:.0f} ms"


def render_table(results: dict[str, Any]) -> str:
    """The README's table: per library, set-up, masking cost, speed and validity; then the
    unconstrained baselines."""
    libs = results["libraries"]
    names = list(libs)
    header = " | ".join(f"{n} (chosen)" if n == "llguidance" else n for n in names)

    def row(label: str, cell: Any) -> str:
        return f"| {label} | " + " | ".join(cell(libs[n]) for n in names) + " |"

    def valid(lib: dict[str, Any]) -> str:
        share = f"{lib['schema_valid']:.0%}"
        return share if lib["enforces_bounds"] else f"{share} (integer bounds ignored)"

    lines = [
        f"| | {header} |",
        "|---|" + "---:|" * len(names),
        row("compile the ranking schema", lambda lib: _ms(lib["compile_ms"])),
        row("one-off tokenizer set-up", lambda lib: _ms(lib["tokenizer_ms"])),
        row("mask fill + accept, per token", lambda lib: f"{lib['mask_us_per_token']:.1f} µs"),
        row("engine masking step, per row", lambda lib: f"~{lib['batch_mask_us_per_row']:.0f} µs"),
        row("seconds per prompt, constrained", lambda lib: f"{lib['seconds_per_prompt']:.3f}"),
        row("schema-valid answers", valid),
        row(
            "tokens per answer, mean (max)",
            lambda lib: f"{lib['completion_tokens_mean']:.1f} ({lib['completion_tokens_max']})",
        ),
    ]
    free, needed = results["unconstrained"], results["tokens_needed"]
    equal = results[f"unconstrained_{needed}"]
    chosen = libs.get("llguidance")
    cost = ""
    if chosen:
        ratio = chosen["seconds_per_prompt"] / equal["seconds_per_prompt"] - 1
        cost = f", so the constraint (llguidance) costs about {ratio:.0%} at equal length"
    skipped = results.get("libraries_skipped") or {}
    lines += [
        "",
        f"{results['prompts']} prompts, `max_new_tokens` {results['max_new_tokens']}, "
        + (
            f"fastest of {len(free['seconds_runs'])} runs"
            if len(free["seconds_runs"]) > 1
            else "one run"
        )
        + ". Without the constraint, the same prompts took "
        f"{free['seconds_per_prompt']:.3f} s each at {results['max_new_tokens']} new tokens, "
        f"and {free['schema_valid']:.0%} of the answers were schema-valid. At {needed} new "
        f"tokens (what a constrained answer needs) they took {equal['seconds_per_prompt']:.3f} s"
        f"{cost}." + (f" Not measured: {', '.join(skipped)} (not installed)." if skipped else ""),
        "",
        footer(results),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
