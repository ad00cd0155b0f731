"""Decoding defaults from the model: resolution, what each backend applies, cache key, provenance.

The sampling parameters a run uses are the config's ``decoding`` block over the model's own
generation config (its ``generation_config.json``, else transformers' defaults). A tiny
LLaMA-shaped model whose generation config is LLaMA-3.1-8B-Instruct's (temperature 0.6, top_p
0.9) and the packaged SmolLM2 (no sampling values in its config) are run through the real HF
engine and runner.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
import torch

from cueaudit.errors import InputError
from cueaudit.inference import hf as hf_module
from cueaudit.inference import hf_decoding
from cueaudit.inference import manifest as manifest_module
from cueaudit.inference.cache import cache_key
from cueaudit.inference.core import Decoding, Request, backend_decoding
from cueaudit.inference.generation_config import generation_defaults
from cueaudit.inference.manifest import load_manifest, sampling_defaults
from cueaudit.inference.openai_backend import OpenAIBackend
from cueaudit.inference.openai_protocol import OpenAISettings
from cueaudit.inference.runner import run_shard
from cueaudit.inference.sampling import SamplingParams, filtered_probs, penalise_repeats
from cueaudit.inference.vllm_backend import build_requests
from cueaudit.models import model_provenance, prepare_model, resolved_sampling
from cueaudit.store import provenance_table
from tests.conftest import SMOLLM2_SPEC
from tests.helpers.inference import BASES, prompt_table

#: LLaMA-3.1-8B-Instruct's generation_config.json (meta-llama/Llama-3.1-8B-Instruct on the hub).
LLAMA_31_GENERATION_CONFIG = {
    "bos_token_id": 128000,
    "do_sample": True,
    "eos_token_id": [128001, 128008, 128009],
    "temperature": 0.6,
    "top_p": 0.9,
    "transformers_version": "4.42.3",
}
#: The paper's decoding block (config/config.yaml): temperature 1, the rest from the model.
PAPER_DECODING = {"temperature": 1.0}


@pytest.fixture(scope="module")
def llama_like_dir(tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path) -> Path:
    """A one-layer random LLaMA (SmolLM2's tokenizer) with LLaMA-3.1-8B-Instruct's
    generation_config.json, prepared as a local-folder model."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    root = tmp_path_factory.mktemp("llama")
    folder = root / "weights"
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "generation_config.json").write_text(json.dumps(LLAMA_31_GENERATION_CONFIG))
    out = root / "llama-like"
    prepare_model("llama-like", {"backend": "hf", "path": str(folder)}, out)
    return out


# --- resolution ---------------------------------------------------------------------------


def test_model_generation_config_is_read_and_framework_defaults_fill_the_rest(
    llama_like_dir: Path, smollm2_dir: Path
) -> None:
    llama = load_manifest(llama_like_dir)["generation_config"]
    assert llama["source"].endswith("weights/generation_config.json")
    # top_p and temperature from the model's file; top_k and the penalty from transformers.
    assert llama["sampling"] == {
        "temperature": 0.6,
        "top_p": 0.9,
        "top_k": 50,
        "min_p": None,
        "repetition_penalty": 1.0,
    }
    # SmolLM2's config sets no sampling value: transformers' defaults throughout.
    smol = load_manifest(smollm2_dir)["generation_config"]
    assert smol["source"] == "smollm2-135m/generation_config.json"
    assert smol["sampling"] == {
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 50,
        "min_p": None,
        "repetition_penalty": 1.0,
    }
    assert smol["not_applied"] == {}


def test_config_keys_override_the_model_key_by_key(llama_like_dir: Path) -> None:
    manifest = load_manifest(llama_like_dir)
    paper = resolved_sampling(PAPER_DECODING, manifest)
    assert (paper["temperature"], paper["top_p"], paper["top_k"]) == (1.0, 0.9, 50)
    # null is "the model's", as absent is
    model_temperature = resolved_sampling({"temperature": None, "top_p": None}, manifest)
    assert (model_temperature["temperature"], model_temperature["top_p"]) == (0.6, 0.9)
    overridden = resolved_sampling({"temperature": 1.0, "top_p": 0.95, "top_k": 0}, manifest)
    assert (overridden["top_p"], overridden["top_k"]) == (0.95, 0)


def test_a_folder_without_generation_config_gets_transformers_defaults(
    tmp_path: Path, llama_like_dir: Path
) -> None:
    folder = tmp_path / "no-generation-config"
    folder.mkdir()
    shutil.copy(llama_like_dir.parent / "weights" / "config.json", folder / "config.json")
    got = generation_defaults(folder)
    assert got["source"].endswith("config.json (no generation_config.json)")
    assert got["sampling"] == {
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 50,
        "min_p": None,
        "repetition_penalty": 1.0,
    }


def test_an_invalid_model_value_names_the_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "generation_config.json").write_text(json.dumps({"top_p": 1.5}))
    with pytest.raises(InputError, match=r"generation_config\.json.*top_p is 1\.5"):
        generation_defaults(tmp_path)
    (tmp_path / "generation_config.json").write_text('{"top_p": 0.9,')
    with pytest.raises(InputError, match=r"generation_config\.json: cannot read"):
        generation_defaults(tmp_path)


def test_unapplied_model_settings_are_recorded(tmp_path: Path) -> None:
    (tmp_path / "generation_config.json").write_text(
        json.dumps({"typical_p": 0.95, "top_k": 20, "repetition_penalty": 1.05, "min_p": 0.05})
    )
    got = generation_defaults(tmp_path)
    assert got["not_applied"] == {"typical_p": 0.95}
    sampling = got["sampling"]
    assert (sampling["top_k"], sampling["repetition_penalty"], sampling["min_p"]) == (
        20,
        1.05,
        0.05,
    )


# --- the runner: what is applied and what is hashed ---------------------------------------


def _run(model_dir: Path, tmp: Path, decoding: dict[str, Any], name: str) -> pl.DataFrame:
    prompts = tmp / "prompts.parquet"
    if not prompts.exists():
        prompt_table(n_names=1, bases=BASES[:2]).write_parquet(prompts)
    return run_shard(
        prompts_path=prompts,
        shard=0,
        n_shards=1,
        model_dir=model_dir,
        model_name=name,
        model_spec={"backend": "hf", "device": "cpu", "dtype": "float32"},
        task="healthcare",
        seed=0,
        decoding=decoding,
        max_new_tokens=2,
        out_path=tmp / "out" / f"{name}.parquet",
        cache_dir=tmp / "cache",
    )


def _expected_keys(
    model_dir: Path, responses: pl.DataFrame, decoding: dict[str, Any], prompts: Path
) -> list[str]:
    """The cache keys recomputed by hand from the resolved values (not the runner's code)."""
    engine = hf_module.HFEngine.from_spec(load_manifest(model_dir), {"device": "cpu"})
    identity = engine.identity()
    texts = dict(pl.read_parquet(prompts).select("prompt_uid", "text").iter_rows())
    return [
        cache_key(identity, decoding, engine.render(texts[uid]), uid, 0)
        for uid in responses["prompt_uid"].to_list()
    ]


def test_runner_applies_and_hashes_the_models_top_p(
    tmp_path: Path, llama_like_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[SamplingParams] = []
    real = hf_decoding.filtered_probs

    def spy(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
        seen.append(params)
        return real(logits, params)

    with pytest.MonkeyPatch.context() as patch, caplog.at_level(logging.INFO):
        patch.setattr(hf_decoding, "filtered_probs", spy)
        paper = _run(llama_like_dir, tmp_path, PAPER_DECODING, "llama")
    assert seen and {(p.temperature, p.top_p, p.top_k) for p in seen} == {(1.0, 0.9, 50)}
    assert "top_p=0.9" in caplog.text
    applied = {"temperature": 1.0, "top_p": 0.9, "top_k": 50, "max_new_tokens": 2}
    prompts = tmp_path / "prompts.parquet"
    assert paper["cache_key"].to_list() == _expected_keys(llama_like_dir, paper, applied, prompts)
    # An override in the config wins, and is what the key holds.
    overridden = _run(llama_like_dir, tmp_path, {**PAPER_DECODING, "top_p": 0.95}, "llama")
    assert not overridden["cache_hit"].any()
    assert overridden["cache_key"].to_list() == _expected_keys(
        llama_like_dir, overridden, {**applied, "top_p": 0.95}, prompts
    )


def test_provenance_records_the_values_used_per_model(
    tmp_path: Path, llama_like_dir: Path, smollm2_dir: Path
) -> None:
    llama = _run(llama_like_dir, tmp_path, PAPER_DECODING, "llama")
    spec = {"backend": "hf", "device": "cpu"}
    provenance = {
        "llama": model_provenance(llama_like_dir, spec, PAPER_DECODING),
        "smollm2": model_provenance(smollm2_dir, SMOLLM2_SPEC, PAPER_DECODING),
    }
    con = duckdb.connect()
    con.register("responses", llama)
    con.register("outcomes", llama.select("model", "seed", "task", "prompt_uid"))
    table = provenance_table(con, provenance)
    assert table.height == 1 and table["n_model_calls"].item() == llama.height
    recorded = json.loads(table["provenance"].item())
    assert recorded["decoding"] == {
        "temperature": 1.0,
        "top_p": 0.9,
        "top_k": 50,
        "min_p": None,
        "repetition_penalty": 1.0,
    }
    assert recorded["decoding_config"] == PAPER_DECODING
    assert recorded["manifest"]["generation_config"]["sampling"]["temperature"] == 0.6
    assert "resolved_path" not in recorded["manifest"]
    assert provenance["smollm2"]["decoding"] == {
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 50,
        "min_p": None,
        "repetition_penalty": 1.0,
    }
    # A manifest from before the defaults were recorded, read without transformers.
    folder = tmp_path / "old"
    folder.mkdir()
    manifest = load_manifest(llama_like_dir)
    for key in ("generation_config", "resolved_path"):
        manifest.pop(key)
    (folder / "cueaudit-model.json").write_text(json.dumps(manifest))
    with pytest.MonkeyPatch.context() as patch:
        real = manifest_module.importlib.util.find_spec
        patch.setattr(
            manifest_module.importlib.util,
            "find_spec",
            lambda name, *a: None if name == "transformers" else real(name, *a),
        )
        old = model_provenance(folder, spec, PAPER_DECODING)
    assert old["decoding"] is None and "rerun the prepare_model rule" in old["decoding_note"]


def test_smollm2_keys_are_the_keys_cached_answers_were_made_with(
    tmp_path: Path, smollm2_dir: Path
) -> None:
    """SmolLM2 resolves to the values the config used to spell out (1.0 / 50), so the keys of
    the golden baseline's cache are unchanged."""
    manifest = load_manifest(smollm2_dir)
    assert sampling_defaults(manifest) is not None
    old_block = {"temperature": 1.0, "top_p": 1.0, "top_k": 50}
    resolved = Decoding.from_config(PAPER_DECODING, 4, sampling_defaults(manifest))
    # the key the old config's spelled-out block gave, byte for byte
    assert resolved.cache_fields() == Decoding.from_config(old_block, 4).cache_fields()
    assert resolved.cache_fields() == {**old_block, "max_new_tokens": 4}
    assert resolved_sampling(PAPER_DECODING, manifest) == {
        **old_block,
        "min_p": None,
        "repetition_penalty": 1.0,
    }


def test_new_parameters_enter_the_key_only_when_they_change_sampling() -> None:
    base = Decoding(temperature=1.0, top_p=1.0, top_k=50, max_new_tokens=8)
    neutral = Decoding(1.0, 1.0, 50, 8, min_p=0.0, repetition_penalty=1.0)
    assert neutral.cache_fields() == base.cache_fields()
    penalised = Decoding(1.0, 1.0, 50, 8, repetition_penalty=1.1)
    assert penalised.cache_fields() == {**base.cache_fields(), "repetition_penalty": 1.1}
    assert Decoding(1.0, 1.0, 50, 8, min_p=0.05).cache_fields()["min_p"] == 0.05
    # integers and floats of the same value hash alike
    assert Decoding.from_config({"top_p": 1, "top_k": 50.0, "temperature": 1}, 8) == base


# --- each backend -------------------------------------------------------------------------


def test_sampler_matches_transformers_logits_processors() -> None:
    """Temperature, top-k, top-p, min-p and the repetition penalty as transformers applies
    them (its own processors, in generate's order), on random logits."""
    from transformers.generation.logits_process import (
        MinPLogitsWarper,
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    torch.manual_seed(1)
    logits = torch.randn(3, 40, dtype=torch.float64) * 3
    history = torch.tensor([[1, 5, 5, 7], [0, 2, 3, 4], [39, 38, 1, 0]])
    cases = [
        SamplingParams(0.6, 0.9, 50),
        SamplingParams(1.0, 1.0, 5),
        SamplingParams(0.7, 0.8, 20, min_p=0.05, repetition_penalty=1.05),
        SamplingParams(1.3, None, None, min_p=0.2, repetition_penalty=1.5),
    ]
    for params in cases:
        reference = logits.clone()
        if params.repetition_penalty:
            processor = RepetitionPenaltyLogitsProcessor(params.repetition_penalty)
            reference = processor(history, reference)
        reference = TemperatureLogitsWarper(params.temperature)(history, reference)
        if params.top_k:
            reference = TopKLogitsWarper(params.top_k)(history, reference)
        if params.top_p is not None and params.top_p < 1.0:
            reference = TopPLogitsWarper(params.top_p)(history, reference)
        if params.min_p:
            reference = MinPLogitsWarper(params.min_p)(history, reference)
        seen = torch.zeros(logits.shape, dtype=torch.bool)
        seen[torch.arange(3).unsqueeze(1), history] = True
        ours = filtered_probs(penalise_repeats(logits, seen, params.repetition_penalty), params)
        assert torch.allclose(ours, torch.softmax(reference, dim=-1), atol=1e-12), params


def test_hf_repetition_penalty_sees_the_prompt_and_the_answer(
    llama_like_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = hf_module.HFEngine.from_spec(load_manifest(llama_like_dir), {"device": "cpu"})
    masks: list[torch.Tensor] = []
    real = hf_decoding.penalise_repeats

    def spy(logits: torch.Tensor, seen: torch.Tensor, penalty: float | None) -> torch.Tensor:
        masks.append(seen.clone())
        return real(logits, seen, penalty)

    monkeypatch.setattr(hf_decoding, "penalise_repeats", spy)
    request = Request("u1", BASES[0], 0)
    decoding = Decoding(1.0, 0.9, 50, 3, repetition_penalty=1.3)
    [(_, generation)] = next(iter(engine.generate([request], decoding)))
    ids = engine.tokenizer(engine.render(BASES[0]), add_special_tokens=False)["input_ids"]
    assert len(masks) == generation.completion_tokens
    assert set(torch.nonzero(masks[0][0]).flatten().tolist()) == set(ids)
    if len(masks) > 1:  # the first drawn token joins the penalised set
        assert int(masks[1].sum()) >= int(masks[0].sum())


def no_forms(form: str) -> list[int]:
    raise AssertionError(f"a request without options tokenised the form {form!r}")


def test_vllm_gets_the_resolved_values_and_only_those() -> None:
    resolved = Decoding.from_config(
        PAPER_DECODING,
        8,
        {"temperature": 0.6, "top_p": 0.9, "top_k": 50, "min_p": None, "repetition_penalty": 1.0},
    )
    sampling = build_requests([(Request("u", "q", 0), [1, 2])], resolved, no_forms)[0].sampling
    assert {k: sampling[k] for k in ("temperature", "top_p", "top_k", "repetition_penalty")} == {
        "temperature": 1.0,
        "top_p": 0.9,
        "top_k": 50,
        "repetition_penalty": 1.0,
    }
    assert "min_p" not in sampling
    unset = build_requests([(Request("u", "q", 0), [1])], Decoding(temperature=None), no_forms)[0]
    assert not {"temperature", "top_p", "top_k", "min_p"} & set(unset.sampling)


def test_openai_sends_only_what_the_config_sets(caplog: pytest.LogCaptureFixture) -> None:
    backend = OpenAIBackend(OpenAISettings(model="m"))
    with caplog.at_level(logging.WARNING):
        decoding = backend_decoding(backend, {"temperature": 1.0, "top_k": 40}, 16)
    assert decoding.sampling() == {
        "temperature": 1.0,
        "top_p": None,
        "top_k": None,
        "min_p": None,
        "repetition_penalty": None,
    }
    assert "decoding.top_k = 40 is not applied" in caplog.text
    body = backend.body(Request("u1", "Hi?", 0), decoding)
    assert body["temperature"] == 1.0 and "top_p" not in body and "top_k" not in body
    nothing = backend.body(Request("u1", "Hi?", 0), backend_decoding(backend, {}, 16))
    assert "temperature" not in nothing and "top_p" not in nothing
    nucleus = backend_decoding(backend, {"temperature": 1.0, "top_p": 0.9}, 16)
    assert backend.body(Request("u1", "Hi?", 0), nucleus)["top_p"] == 0.9
    manifest = {"backend": "openai", "generation_config": None}
    assert resolved_sampling({"temperature": 1.0, "top_k": 40}, manifest) == decoding.sampling()
