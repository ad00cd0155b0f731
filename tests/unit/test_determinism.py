"""Greedy decoding and determinism on record, on the real packaged SmolLM2.

Greedy decoding (``decoding.temperature: 0``) takes the most likely token on every backend,
whatever the seed. Every inference job answers a few of its fresh prompts again alone and
records in its shard's parquet metadata how many came back identical and the largest
option-score difference; the database and the report read that record.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
import torch
import yaml

from cueaudit.config import config_warnings, validate_config
from cueaudit.errors import InputError
from cueaudit.inference.cache import ResponseCache, read_part
from cueaudit.inference.core import AnswerSpec, Decoding, Option, Request, backend_decoding
from cueaudit.inference.determinism import (
    DETERMINISM_SCHEMA,
    determinism_table,
    option_difference,
    pick,
    read_record,
    recheck,
)
from cueaudit.inference.hf import HFEngine
from cueaudit.inference.openai_backend import OpenAIBackend
from cueaudit.inference.openai_protocol import OpenAISettings, generation_from_body
from cueaudit.inference.runner import run_shard
from cueaudit.store import build_database
from cueaudit.studies import STUDIES
from tests.helpers.fault_proxy import CannedServer
from tests.helpers.inference import (
    llama_openai_config,
    llama_server,
    llama_server_available,
    llama_settings,
    prompt_table,
)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
YES_NO = AnswerSpec(options=(Option("Yes", ("Yes", "yes")), Option("No", ("No", "no"))))


def default_config(**decoding: Any) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["decoding"] = {**config["decoding"], **decoding}
    return config


@pytest.fixture(scope="module")
def engine(smollm2_dir: Path) -> HFEngine:
    return HFEngine(str(smollm2_dir), device="cpu")


def requests(n: int, seed: int = 0, answer: AnswerSpec = YES_NO) -> list[Request]:
    rows = prompt_table(n_names=2).select("prompt_uid", "text", "cue", "cue_value").rows()[:n]
    return [
        Request(uid, text, seed, cache_key=uid, group=f"{cue}\x1f{value}", answer=answer)
        for uid, text, cue, value in rows
    ]


def answers(engine: HFEngine, reqs: list[Request], decoding: Decoding) -> dict[str, Any]:
    return {r.uid: g for batch in engine.generate(reqs, decoding) for r, g in batch}


# --- greedy decoding ----------------------------------------------------------------------


def test_the_schema_accepts_temperature_zero_and_refuses_below(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = default_config(temperature=0)
    with caplog.at_level(logging.WARNING):
        validate_config(config, SCHEMA, STUDIES)  # was refused: exclusiveMinimum 0
    assert config["decoding"]["determinism_checks"] == 2  # the schema's default
    assert "greedy" not in caplog.text  # one seed: nothing repeats
    with pytest.raises(InputError, match=r"decoding\.temperature: -0\.5 is less than the minimum"):
        validate_config(default_config(temperature=-0.5), SCHEMA, STUDIES)
    with pytest.raises(InputError, match=r"decoding\.determinism_checks: -1 is less than"):
        validate_config(default_config(determinism_checks=-1), SCHEMA, STUDIES)


def test_greedy_with_several_seeds_warns_that_they_repeat(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = default_config(temperature=0)
    config["seeds"] = [0, 1, 2]
    with caplog.at_level(logging.WARNING, logger="cueaudit.config"):
        validate_config(config, SCHEMA, STUDIES)
    assert "0 is greedy decoding" in caplog.text
    assert "seeds 0, 1, 2" in caplog.text and "Give one seed" in caplog.text
    sampled = default_config(temperature=1.0)
    sampled["seeds"] = [0, 1, 2]
    validate_config(sampled, SCHEMA, STUDIES)
    assert config_warnings(sampled) == []


def test_greedy_ignores_the_filters_and_is_on_record(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        greedy = Decoding.from_config(
            {"temperature": 0, "top_p": 0.9, "repetition_penalty": 1.1}, 8, {"top_k": 50}
        )
    assert greedy.greedy and (greedy.top_p, greedy.top_k, greedy.min_p) == (None, None, None)
    assert greedy.repetition_penalty == 1.1  # it changes which token is the most likely
    assert "top_p = 0.9" in caplog.text and "top_k" not in caplog.text  # the config's only
    assert greedy.sampling()["greedy"] is True
    assert greedy.cache_fields() == {
        "temperature": 0.0,
        "top_p": None,
        "top_k": None,
        "max_new_tokens": 8,
        "repetition_penalty": 1.1,
        "greedy": True,
    }
    # Sampled decoding keeps the keys (and cache keys) it always had.
    assert "greedy" not in Decoding(1.0, 1.0, 50, 8).cache_fields()
    assert "greedy" not in Decoding(1.0, 1.0, 50, 8).sampling()
    with pytest.raises(InputError, match=r"decoding\.temperature"):
        Decoding(temperature=-1.0)


def test_the_openai_backend_sends_temperature_zero_without_top_p() -> None:
    backend = OpenAIBackend(OpenAISettings(model="m"))
    decoding = backend_decoding(backend, {"temperature": 0, "top_p": 0.5}, 4)
    body = backend.body(Request("u", "q", 0), decoding)
    assert body["temperature"] == 0 and "top_p" not in body


def test_greedy_gives_the_argmax_tokens_whatever_the_seed(engine: HFEngine) -> None:
    """The engine's greedy answers are transformers' own greedy search (``do_sample`` false),
    the same under every seed; the option scores are those of sampled decoding."""
    greedy = Decoding(temperature=0.0, max_new_tokens=5)
    by_seed = [answers(engine, requests(4, seed), greedy) for seed in (0, 1)]
    for request in requests(4):
        ids = engine.tokenizer(
            engine.render(request.text, request.answer),
            add_special_tokens=False,
            return_tensors="pt",
        ).input_ids
        with torch.inference_mode():
            out = engine.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=False,
                max_new_tokens=5,
                pad_token_id=engine.pad_id,
            )
        new = out[0, ids.shape[1] :].tolist()
        want = engine.tokenizer.decode(
            [t for t in new if t not in engine.stop_ids], skip_special_tokens=True
        )
        for answer in by_seed:
            assert answer[request.uid].completion == want
            assert answer[request.uid].completion_tokens == len(new)
    sampled = [answers(engine, requests(4, seed), Decoding(max_new_tokens=5)) for seed in (0, 1)]
    # Sampling is not greedy: the seeds' samples differ, and differ from the argmax.
    assert any(sampled[0][u].completion != sampled[1][u].completion for u in sampled[0])
    assert any(sampled[0][u].completion != by_seed[0][u].completion for u in sampled[0])
    for uid, answer in by_seed[0].items():
        assert answer.option_logprobs == sampled[0][uid].option_logprobs


# --- determinism on record ----------------------------------------------------------------


def run_job(
    engine: HFEngine, tmp: Path, decoding: dict[str, Any], name: str = "0", n: int = 6
) -> tuple[pl.DataFrame, Path]:
    prompts = tmp / "prompts.parquet"
    if not prompts.exists():
        prompt_table(n_names=2).head(n).write_parquet(prompts)
    out = tmp / "responses" / name / "0.parquet"
    responses = run_shard(
        prompts_path=prompts,
        shard=0,
        n_shards=1,
        model_dir=tmp,
        model_name="smollm2",
        model_spec={"backend": "hf"},
        task="healthcare",
        seed=0,
        decoding=decoding,
        max_new_tokens=6,
        out_path=out,
        answer=YES_NO,
        cache_dir=tmp / "cache" / name,
        backend=engine,
    )
    return responses, out


def test_a_job_records_its_answers_re_answered_alone(engine: HFEngine, tmp_path: Path) -> None:
    checked, out = run_job(engine, tmp_path, {"temperature": 1.0, "determinism_checks": 3})
    record = read_record(out)
    assert record is not None
    assert (record["model"], record["seed"], record["task"], record["backend"]) == (
        "smollm2",
        0,
        "healthcare",
        "hf",
    )
    # float32 on the CPU: the answers alone are the answers in the batch.
    assert record["fresh"] == 6 and record["checked"] == 3 and record["identical"] == 3
    assert 0.0 <= record["max_option_logprob_diff"] < 1e-4
    assert record["note"] is None and record["system_fingerprints"] is None
    # The re-answers reach neither the cache nor the shard: one cached row per prompt, and
    # the same answers as a job that checks none.
    cached = ResponseCache(tmp_path / "cache" / "0", "smollm2", 0, "healthcare", 0, 1)
    assert cached.lookup(checked["cache_key"]).height == 6
    assert len(list((tmp_path / "cache" / "0").rglob("*.parquet"))) == 1
    plain, plain_out = run_job(engine, tmp_path, {"temperature": 1.0}, name="plain")
    assert plain.drop("seconds", "generated").equals(checked.drop("seconds", "generated"))
    assert read_record(plain_out)["note"] == "decoding.determinism_checks is 0"  # type: ignore[index]
    # Served from the cache, nothing is re-answered, and the record says so.
    _, again = run_job(engine, tmp_path, {"temperature": 1.0, "determinism_checks": 3})
    rerun = read_record(again)
    assert rerun is not None and (rerun["fresh"], rerun["checked"]) == (0, 0)
    assert "cache" in rerun["note"]


def test_the_check_sees_answers_that_change(engine: HFEngine) -> None:
    """Re-answers under another seed (a stand-in for a batch-dependent model) are counted as
    not identical, so the check can fail; the same seed gives identical answers."""
    decoding = Decoding(max_new_tokens=8)
    reqs = requests(3)
    first = {uid: g.row() for uid, g in answers(engine, reqs, decoding).items()}
    same = recheck(engine, reqs, first, decoding)
    assert (same.checked, same.identical) == (3, 3)
    reseeded = [dataclasses.replace(r, seed=7) for r in reqs]
    moved = recheck(engine, reseeded, first, decoding)
    assert moved.checked == 3 and moved.identical < 3
    # Option scores do not depend on the seed.
    assert moved.max_option_logprob_diff is not None and moved.max_option_logprob_diff < 1e-4


def test_option_differences_and_the_chosen_prompts() -> None:
    assert option_difference('{"a":-1.0,"b":-2.0}', '{"a":-1.5,"b":-2.0,"c":0}') == 0.5
    assert option_difference('{"a":-Infinity}', '{"a":-Infinity}') == 0.0
    assert option_difference('{"a":-Infinity}', '{"a":-3.0}') == float("inf")
    assert option_difference(None, '{"a":-1.0}') is None
    reqs = requests(6)
    assert pick(reqs, 3) == pick(reqs[::-1], 3) and len(pick(reqs, 3)) == 3


def test_the_database_has_a_determinism_row_per_shard(tmp_path: Path) -> None:
    rows = {
        "prompt_uid": ["p1", "p2"],
        "model": ["m", "m"],
        "seed": [0, 0],
        "task": ["t", "t"],
        "completion": ["Yes", "No"],
        "system_fingerprint": ["fp_1", "fp_2"],
    }
    recorded = tmp_path / "m" / "seed0" / "t" / "0.parquet"
    recorded.parent.mkdir(parents=True)
    record = {
        "model": "m",
        "seed": 0,
        "task": "t",
        "shard": 0,
        "n_shards": 2,
        "backend": "openai",
        "fresh": 2,
        "checked": 2,
        "identical": 1,
        "max_option_logprob_diff": 0.25,
        "system_fingerprints": {"fp_1": 1, "fp_2": 1},
        "note": None,
    }
    pl.DataFrame(rows).write_parquet(
        recorded, metadata={"cueaudit.determinism": json.dumps(record)}
    )
    old = tmp_path / "m" / "seed0" / "t" / "1.parquet"
    pl.DataFrame(rows).drop("system_fingerprint").write_parquet(old)
    table = determinism_table([old, recorded])
    assert table.columns == list(DETERMINISM_SCHEMA)
    assert table.row(0, named=True) == {
        **record,
        "system_fingerprints": '{"fp_1":1,"fp_2":1}',
    }
    assert table.row(1, named=True)["shard"] == 1
    assert table.row(1, named=True)["checked"] is None
    assert "no record" in table.row(1, named=True)["note"]
    outcomes = tmp_path / "outcomes.parquet"
    pl.DataFrame({"prompt_uid": ["p1"], "model": ["m"], "seed": [0], "task": ["t"]}).write_parquet(
        outcomes
    )
    prompts = tmp_path / "prompts.parquet"
    pl.DataFrame({"prompt_uid": ["p1", "p2"], "task": ["t", "t"]}).write_parquet(prompts)
    db = tmp_path / "db.duckdb"
    build_database(db, prompts=[prompts], responses=[recorded, old], outcomes=[outcomes])
    with duckdb.connect(str(db), read_only=True) as con:
        stored = con.sql("SELECT * FROM determinism ORDER BY shard").pl()
    assert stored.equals(table)


def test_fingerprints_are_kept_and_old_cache_parts_read(tmp_path: Path) -> None:
    body = {
        "choices": [{"message": {"content": "Yes"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        "system_fingerprint": "fp_44709d6fcb",
    }
    assert generation_from_body(body).system_fingerprint == "fp_44709d6fcb"
    assert generation_from_body({**body, "system_fingerprint": None}).system_fingerprint is None
    # A cache part written before fingerprints were kept is still served.
    old = {
        "cache_key": ["k"],
        "prompt_uid": ["u"],
        "completion": ["Yes"],
        "prompt_tokens": [3],
        "completion_tokens": [1],
        "finish_reason": ["stop"],
        "option_logprobs": [None],
        "tool_calls": [None],
        "constrained": [False],
        "seconds": [0.1],
        "backend": ["openai"],
        "created": [1.0],
        "generated": [1.0],
    }
    part = tmp_path / "old.parquet"
    pl.DataFrame(
        old, schema_overrides={"option_logprobs": pl.String, "tool_calls": pl.String}
    ).write_parquet(part)
    frame = read_part(part)
    assert frame["system_fingerprint"].to_list() == [None]
    assert frame["completion"].to_list() == ["Yes"]


def api_job(tmp: Path, url: str, decoding: dict[str, Any], n: int = 4) -> tuple[pl.DataFrame, Path]:
    """A shard of ``n`` prompts through the OpenAI backend at ``url`` (key CUEAUDIT_TEST_KEY)."""
    prompts = tmp / "prompts.parquet"
    prompt_table().head(n).write_parquet(prompts)
    spec = {"backend": "openai", "openai": {**llama_openai_config(url), "concurrency": 2}}
    out = tmp / "responses" / "0.parquet"
    responses = run_shard(
        prompts_path=prompts,
        shard=0,
        n_shards=1,
        model_dir=tmp,
        model_name="api",
        model_spec=spec,
        task="healthcare",
        seed=0,
        decoding=decoding,
        max_new_tokens=4,
        out_path=out,
        cache_dir=tmp / "cache",
        backend=OpenAIBackend.from_spec({"model_id": f"openai:smollm2@{url}"}, spec),
    )
    return responses, out


def test_api_fingerprints_reach_the_cache_the_shard_and_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An endpoint answering as OpenAI's does (a ``system_fingerprint`` in every body), over
    HTTP through the real client: each answer keeps it, and the record counts them."""
    monkeypatch.setenv("CUEAUDIT_TEST_KEY", "sk-test")
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "smollm2",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Yes"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
    }
    with CannedServer(200, json.dumps(body).encode()) as server:
        responses, out = api_job(tmp_path, server.url, {"temperature": 0, "determinism_checks": 2})
        assert server.hits == 4 + 2  # the answers, then two of them again
    assert responses["system_fingerprint"].to_list() == ["fp_44709d6fcb"] * 4
    cached = ResponseCache(tmp_path / "cache", "api", 0, "healthcare", 0, 1)
    assert (
        cached.lookup(responses["cache_key"])["system_fingerprint"].to_list()
        == ["fp_44709d6fcb"] * 4
    )
    record = read_record(out)
    assert record is not None and record["system_fingerprints"] == {"fp_44709d6fcb": 4}
    assert (record["backend"], record["checked"], record["identical"]) == ("openai", 2, 2)
    assert record["max_option_logprob_diff"] is None  # no logprobs asked


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not llama_server_available():
        pytest.skip("llama-cpp-python[server] not installed (bash scripts/install.sh --test)")
    with llama_server(tmp_path_factory.mktemp("llama") / "server.log") as url:
        yield url


def test_a_greedy_job_on_the_llama_server_is_checked_and_keeps_what_it_serves(
    llama_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real OpenAI-compatible test server: greedy decoding goes on the wire as temperature
    0, two answers are asked again alone, and each answer keeps the ``system_fingerprint``
    the server sends (llama-cpp-python 0.3 sends none: null, as in its raw response)."""
    monkeypatch.setenv("CUEAUDIT_TEST_KEY", "sk-test")
    responses, out = api_job(tmp_path, llama_url, {"temperature": 0, "determinism_checks": 2})
    backend = OpenAIBackend(llama_settings(llama_url))
    body = backend.body(Request("u", "Say yes.", 0), Decoding(temperature=0.0, max_new_tokens=2))
    assert body["temperature"] == 0.0 and "top_p" not in body
    raw = (
        backend.client(asynchronous=False)
        .chat.completions.create(
            model=body.pop("model"), messages=body.pop("messages"), extra_body=body
        )
        .model_dump()
    )
    served = raw.get("system_fingerprint") or None
    assert responses["system_fingerprint"].to_list() == [served] * responses.height
    record = read_record(out)
    assert record is not None and record["backend"] == "openai"
    assert record["fresh"] == 4 and record["checked"] == 2 and record["identical"] <= 2
    assert record["system_fingerprints"] == ({served: 4} if served else None)
