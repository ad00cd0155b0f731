"""Integrity of inputs and outputs: unique prompt uids, no path from data outside its folder,
no cue text in base prompts or names, no leftovers of failed writes, clear limits."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from cueaudit.cues.names import load_name_list, names_from_derived
from cueaudit.errors import InputError
from cueaudit.inference.cache import ResponseCache
from cueaudit.inference.core import Decoding, Request
from cueaudit.inference.openai_backend import OpenAIBackend, RetryableError
from cueaudit.inference.runner import check_context, context_limit
from cueaudit.io import atomic_path, check_within, safe_component, write_csv, write_text
from cueaudit.models import prepare_model
from cueaudit.probing.base_prompts import load_base_prompts, load_kearney_prompts
from cueaudit.probing.expansion import UID_COLUMNS, cue_variants, expand_prompts
from cueaudit.probing.export import export_replication
from cueaudit.prompts import check_unique_uids
from tests.helpers.fault_proxy import FaultProxy
from tests.helpers.inference import CountingBackend, llama_settings, prompt_table, run_test_shard


def _csv(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# -- 1. two base prompts with one text would share every prompt uid ----------------------


def test_repeated_base_prompt_text_names_the_file_line_and_both_ids(tmp_path: Path) -> None:
    path = _csv(
        tmp_path,
        "dup_text.csv",
        "base_id,text\nh-1,Should I see a doctor?\nh-2,Is rest enough?\n"
        "h-3,Should I see a doctor?\n",
    )
    with pytest.raises(InputError) as info:
        load_base_prompts(path, "healthcare")
    assert str(info.value) == (
        f"{path}: field 'text': line 4: the text of base_id 'h-3' repeats that of base_id "
        "'h-1' (line 2); both would get the same prompt uids"
    )


def test_a_prompt_table_with_a_repeated_uid_is_refused() -> None:
    table = pl.DataFrame(
        {
            "prompt_uid": ["u1", "u2", "u1"],
            "task": ["legal"] * 3,
            "base_id": ["b1", "b2", "b3"],
            "cue": ["none"] * 3,
            "cue_value": [None, None, None],
        }
    )
    with pytest.raises(InputError) as info:
        check_unique_uids(table, "legal prompts", UID_COLUMNS)
    assert str(info.value) == (
        "legal prompts: field 'prompt_uid': 1 prompt uids are shared by several rows; u1 by 2 "
        "rows (task='legal', base_id='b1', cue='none', cue_value=None; task='legal', "
        "base_id='b3', cue='none', cue_value=None)"
    )
    assert check_unique_uids(table.head(2), "legal prompts").height == 2


def test_the_expansion_checks_uids_of_base_tables_not_from_the_loader() -> None:
    base = pl.DataFrame(
        {"base_id": ["b1", "b2"], "task": ["legal"] * 2, "text": ["Same text?", "Same text?"]}
    )
    names = pl.DataFrame(
        {"name": ["Ana"], "race": ["White"], "gender": ["female"], "source": ["rosenman"]}
    )
    with pytest.raises(InputError, match=r"prompt table of task 'legal': field 'prompt_uid': 2 "):
        expand_prompts(base, cue_variants(names), "legal")
    table = expand_prompts(base.head(1), cue_variants(names), "legal")
    assert table["prompt_uid"].n_unique() == table.height == 2


# -- 2. values from data files never leave their output folder ----------------------------


@pytest.mark.parametrize("value", ["rosenman", "elder_hayes", "gpt-5.2", "smollm2-135m", "0"])
def test_safe_components_pass(value: str) -> None:
    assert safe_component(value, "source", "names.csv") == value


@pytest.mark.parametrize("value", ["../../x", "a/b", "a\\b", "..", ".hidden", "", "a\nb", "x y"])
def test_unsafe_components_are_refused(value: str) -> None:
    with pytest.raises(InputError) as info:
        safe_component(value, "source", "names.csv", line=7)
    assert str(info.value) == (
        f"names.csv: field 'source': line 7: {value!r} becomes part of output file names and "
        "must be 1 to 128 of letters, digits, '_', '-', '+' and '.', not starting with '.'"
    )


def test_a_name_source_with_a_path_is_refused_at_load(tmp_path: Path) -> None:
    path = _csv(
        tmp_path,
        "evil.csv",
        "name,race,gender,source\nAna,White,female,../../x\n",
    )
    with pytest.raises(InputError) as info:
        load_name_list(path)
    assert str(info.value).startswith(
        f"{path}: field 'source': line 2: '../../x' becomes part of output file names"
    )
    derived = tmp_path / "derived.parquet"
    pl.DataFrame(
        {"name": ["Ana"], "race": ["White"], "gender": ["female"], "source": ["../x"]}
    ).write_parquet(derived)
    with pytest.raises(InputError, match=r"derived\.parquet: field 'source': row 1: '\.\./x'"):
        names_from_derived(derived)


def test_the_writer_refuses_a_path_outside_its_root(tmp_path: Path) -> None:
    root = tmp_path / "results" / "replication"
    escape = root / "prompts" / ".." / ".." / ".." / "escaped.csv"
    with pytest.raises(InputError) as info:
        write_csv(pl.DataFrame({"a": [1]}), escape, root=root)
    assert str(info.value) == (
        f"{escape}: output path resolves to {(tmp_path / 'escaped.csv')}, outside its output "
        f"folder {root}"
    )
    assert not (tmp_path / "escaped.csv").exists()
    assert list(tmp_path.rglob("*")) == []  # not even the folders were made
    inside = root / "prompts" / "ok.txt"
    write_text("fine", inside, root=root)
    assert inside.read_text(encoding="utf-8") == "fine"
    assert check_within(root / "a" / ".." / "b", root) == root / "a" / ".." / "b"
    # A folder linked elsewhere on purpose (a shared cache) is still inside its root.
    shared = tmp_path / "shared"
    shared.mkdir()
    (root / "linked").symlink_to(shared, target_is_directory=True)
    write_text("shared", root / "linked" / "a.txt", root=root)
    assert (shared / "a.txt").read_text(encoding="utf-8") == "shared"


def test_the_export_writes_no_file_outside_its_folder(tmp_path: Path) -> None:
    # A cue id built from a crafted name source, as if the loader had let it through.
    prompts = pl.DataFrame(
        {
            "prompt_uid": ["u1"],
            "task": ["legal"],
            "base_id": ["b1"],
            "cue": ["name_../../../../../escaped"],
            "cue_type": ["name"],
            "cue_source": ["x"],
            "race": ["White"],
            "gender": ["female"],
            "cue_value": ["Ana"],
            "text": ["Should I sue?"],
        }
    )
    prompts_path = tmp_path / "prompts.parquet"
    prompts.write_parquet(prompts_path)
    out = tmp_path / "results" / "replication"
    with pytest.raises(InputError, match=r"outside its output folder"):
        export_replication(out, prompts=[prompts_path], outcomes=[], task_outcomes={})
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["prompts.parquet"]


def test_the_cache_refuses_model_and_task_names_with_paths(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"config: field 'model': '\.\./m' becomes part"):
        ResponseCache(tmp_path, "../m", 0, "legal", 0, 1)
    with pytest.raises(InputError, match=r"config: field 'task': 'a/b' becomes part"):
        ResponseCache(tmp_path, "m", 0, "a/b", 0, 1)


# -- 3. no cue text inside base prompts or names -------------------------------------------


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("[MEMORY: User is Black]\nUSER: Should I sue?", "MEMORY:"),
        ("Should I sue? USER: yes", "USER:"),
        ("MODEL: I can help. Should I sue?", "MODEL:"),
    ],
)
def test_a_base_prompt_with_cue_text_is_refused(tmp_path: Path, text: str, tag: str) -> None:
    quoted = text.replace('"', '""')
    path = _csv(tmp_path, "cued.csv", f'base_id,text\nl-1,Is it legal?\nl-2,"{quoted}"\n')
    with pytest.raises(InputError) as info:
        load_base_prompts(path, "legal")
    line = 3  # the record's first line, where its quoted field starts
    assert str(info.value) == (
        f"{path}: field 'text': line {line}: the text of 'l-2' contains the cue template text "
        f"{tag!r}; a base prompt must not carry a cue (it would contaminate the no-cue baseline)"
    )


def test_a_kearney_prompt_with_cue_text_is_refused(tmp_path: Path) -> None:
    path = _csv(tmp_path, "legal_prompts.csv", "prompts\nIs it legal?\nUSER: Can I sue?\n")
    with pytest.raises(InputError) as info:
        load_kearney_prompts(path, "legal")
    assert str(info.value).startswith(
        f"{path}: field 'prompts': line 3: the text of 'legal-00002' contains the cue template "
        "text 'USER:'"
    )


@pytest.mark.parametrize(
    ("cell", "fragment"),
    [
        ('"Ana\nBell"', "'Ana\\nBell' contains the control character '\\n'"),
        ("Ana\tBell", "'Ana\\tBell' contains the control character '\\t'"),
        ("Ana] USER: hi", "'Ana] USER: hi' contains ']', which would break out of the cue"),
        ("{value}", "'{value}' contains '{', which would break out of the cue"),
        ("Ana USER: hi", "'Ana USER: hi' contains the cue template text 'USER:'"),
        ("MODEL : Ana", "'MODEL : Ana' contains the cue template text 'MODEL :'"),
    ],
)
def test_a_name_with_template_text_is_refused(tmp_path: Path, cell: str, fragment: str) -> None:
    path = _csv(tmp_path, "names.csv", f"name,race,gender,source\n{cell},White,female,x\n")
    with pytest.raises(InputError) as info:
        load_name_list(path)
    line = 2  # the record's first line, however many lines its quoted field spans
    assert str(info.value) == f"{path}: field 'name': line {line}: {fragment}" + (
        " template '[MEMORY: ...]'" if "break out" in fragment else ""
    )


def test_ordinary_names_still_load(tmp_path: Path) -> None:
    path = _csv(
        tmp_path,
        "names.csv",
        "name,race,gender,source\nJosé,White,male,x\nO'Brien,White,male,x\n"
        "Mary-Jane,White,female,x\nDe'Andre,Black,male,x\n",
    )
    assert load_name_list(path)["name"].to_list() == ["José", "O'Brien", "Mary-Jane", "De'Andre"]


# -- 4. leftovers and limits ---------------------------------------------------------------

KILLED_WRITE = """
import os, signal, sys
from cueaudit.io import atomic_path
with atomic_path(sys.argv[1]) as tmp:
    tmp.write_text("half", encoding="utf-8")
    print(tmp, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_atomic_write_leaves_no_temp_after_the_next_write(tmp_path: Path) -> None:
    target = tmp_path / "table.csv"
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WRITE, str(target)], capture_output=True, text=True
    )
    assert done.returncode == -signal.SIGKILL
    leftover = Path(done.stdout.strip())
    assert leftover.is_file() and leftover.parent == tmp_path and not target.exists()
    # Named .table.csv.<host>-<pid>-<random>.tmp; the killed writer's pid runs no more.
    writer = leftover.name.removeprefix(".table.csv.").rsplit("-", 1)[0]
    # Our own live write of the same target, and a dead writer's temp of another target
    # (table.csv.bak), are left alone.
    other = tmp_path / f".table.csv.bak.{writer}-abcd1234.tmp"
    other.write_text("other", encoding="utf-8")
    with atomic_path(target) as live:
        with atomic_path(target) as second:
            second.write_text("new", encoding="utf-8")
        assert live.exists() and not leftover.exists() and other.exists()
        live.write_text("newer", encoding="utf-8")
    assert target.read_text(encoding="utf-8") == "newer"
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name, "table.csv"]


def test_old_temps_of_other_hosts_are_removed_and_recent_ones_kept(tmp_path: Path) -> None:
    target = tmp_path / "t.parquet"
    old = tmp_path / ".t.parquet.otherhost-123-abcd1234.tmp"
    recent = tmp_path / ".t.parquet.otherhost-124-abcd1235.tmp"
    legacy = tmp_path / ".t.parquet.k2j4h5g6.tmp"  # named before temps carried host and pid
    for path in (old, recent, legacy):
        path.write_text("x", encoding="utf-8")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (two_days_ago, two_days_ago))
    os.utime(legacy, (two_days_ago, two_days_ago))
    write_text("t", target)
    assert sorted(p.name for p in tmp_path.iterdir()) == [recent.name, "t.parquet"]


def test_a_failed_model_preparation_leaves_no_partial_folder(tmp_path: Path) -> None:
    out = tmp_path / "models" / "m"
    with pytest.raises(InputError, match=r"config: field 'path': a model needs 'path' or"):
        prepare_model("m", {"backend": "hf"}, out)
    assert not out.exists() and not (tmp_path / "models" / "m.partial").exists()
    with pytest.raises(InputError, match=r"nowhere\.gguf: field 'gguf_file': GGUF file not found"):
        prepare_model(
            "m", {"backend": "hf", "path": str(tmp_path), "gguf_file": "nowhere.gguf"}, out
        )
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == []


def test_a_killed_preparations_partial_folder_is_replaced(tmp_path: Path) -> None:
    out = tmp_path / "models" / "gpt"
    partial = tmp_path / "models" / "gpt.partial"
    partial.mkdir(parents=True)
    (partial / "half-written.safetensors").write_bytes(b"\0" * 8)
    spec = {"backend": "openai", "openai": {"model": "gpt-x", "base_url": "http://h/v1"}}
    manifest = prepare_model("gpt", spec, out)
    assert manifest["model_id"] == "openai:gpt-x@http://h/v1"
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["gpt"]
    assert sorted(p.name for p in out.iterdir()) == ["cueaudit-model.json"]


def test_the_give_up_error_names_the_endpoint_and_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUEAUDIT_TEST_KEY", "sk-test")
    request = [Request("uid-give-up", "Hi?", 0)]
    with FaultProxy("http://127.0.0.1:9/v1", p500=1.0) as proxy:
        backend = OpenAIBackend(llama_settings(proxy.url, max_retries=1, give_up_after_s=600))
        with pytest.raises(RetryableError) as error:
            list(backend.generate(request, Decoding(max_new_tokens=2)))
    assert str(error.value).startswith(
        f"{proxy.url} (model smollm2): request uid-give-up: gave up after 2 tries in "
    )
    assert "(last: HTTP 500; max_retries 1, give_up_after_s 600)" in str(error.value)


class _WordTokenizer:
    """One token per whitespace-separated word; no known limit of its own."""

    model_max_length = int(1e30)

    def __call__(self, texts: list[str], add_special_tokens: bool = False) -> dict[str, Any]:
        return {"input_ids": [list(range(len(t.split()))) for t in texts]}


class _LocalBackend(CountingBackend):
    """A counting backend with a tokenizer and a model folder, as the HF backend has."""

    def __init__(self, model_path: Path) -> None:
        super().__init__()
        self.model_path = str(model_path)
        self.tokenizer = _WordTokenizer()


def _model_folder(tmp_path: Path, context: int) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"model_type": "llama", "max_position_embeddings": context}), encoding="utf-8"
    )
    return folder


def _run(tmp: Path, backend: CountingBackend, table: pl.DataFrame, max_new_tokens: int) -> Path:
    prompts = tmp / "prompts.parquet"
    table.write_parquet(prompts)
    out = tmp / "out" / "responses.parquet"
    run_test_shard(
        tmp,
        backend,
        max_new_tokens=max_new_tokens,
        out_path=out,
    )
    return out


def test_a_prompt_longer_than_the_context_is_refused_before_generating(tmp_path: Path) -> None:
    table = prompt_table(n_names=1)
    # <user>...</user> wraps each prompt; the longest has two dialog histories (~120 words).
    words = [len(f"<user>{t}</user>".split()) for t in table["text"].to_list()]
    longest = max(words)
    uid = table["prompt_uid"][words.index(longest)]
    backend = _LocalBackend(_model_folder(tmp_path, longest + 7))
    assert context_limit(backend) == (
        longest + 7,
        f"{tmp_path / 'model' / 'config.json'}: max_position_embeddings",
    )
    with pytest.raises(InputError) as info:
        _run(tmp_path, backend, table, max_new_tokens=8)
    n_over = sum(n + 8 > longest + 7 for n in words)
    assert str(info.value) == (
        f"{tmp_path / 'prompts.parquet'}: field 'text': {n_over} of {table.height} prompts to "
        f"generate do not fit the model's context of {longest + 7} tokens "
        f"({tmp_path / 'model' / 'config.json'}: "
        f"max_position_embeddings); the longest, prompt_uid {uid}, has {longest} prompt tokens "
        f"+ max_new_tokens 8 = {longest + 8}"
    )
    assert backend.calls == 0
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()
    # Exactly at the limit is fine.
    out = _run(tmp_path, backend, table, max_new_tokens=7)
    assert backend.calls == pl.read_parquet(out).height == table.height


def test_a_backend_may_state_its_context_and_api_backends_are_not_checked() -> None:
    class Stated(CountingBackend):
        context_length = 4

        def count_tokens(self, prompts: Iterable[str]) -> Iterator[int]:
            return (len(p) for p in prompts)

    with pytest.raises(InputError) as info:
        check_context(Stated(), [("u1", "ab"), ("u2", "abc")], 2, "p")
    assert str(info.value) == (
        "p: field 'text': 1 of 2 prompts to generate do not fit the model's context of 4 tokens "
        "(fake backend); the longest, prompt_uid u2, has 3 prompt tokens + max_new_tokens 2 = 5"
    )
    check_context(Stated(), [("u1", "ab")], 2, "p")
    api = OpenAIBackend(llama_settings("http://127.0.0.1:9/v1"))
    assert context_limit(api) is None
    check_context(api, [("u1", "word " * 10**6)], 2, "p")


# -- 5. a corrupt cache part is quarantined; only its rows are recomputed -------------------


def _rows(keys: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "cache_key": key,
            "prompt_uid": f"uid-{key}",
            "completion": f"answer {key}",
            "prompt_tokens": 3,
            "completion_tokens": 2,
            "finish_reason": "stop",
            "option_logprobs": None,
            "tool_calls": None,
            "constrained": False,
            "seconds": 0.1,
            "backend": "fake",
            "created": 1.0,
        }
        for key in keys
    ]


def test_a_truncated_cache_part_is_quarantined_and_the_others_still_hit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = ResponseCache(tmp_path, "m", 0, "legal", 0, 1)
    cache.write(_rows(["k1", "k2"]))
    bad = cache.write(_rows(["k3", "k4"]))
    cache.write(_rows(["k5"]))
    assert bad is not None
    bad.write_bytes(bad.read_bytes()[:-40])
    with caplog.at_level(logging.WARNING, logger="cueaudit.inference.cache"):
        found = cache.lookup(["k1", "k2", "k3", "k4", "k5"])
    assert sorted(found["cache_key"].to_list()) == ["k1", "k2", "k5"]
    quarantined = bad.with_name(bad.name + ".corrupt")
    assert quarantined.is_file() and not bad.exists()
    assert cache.quarantined == [quarantined]
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith(
        f"cache: unreadable part {bad} moved to {quarantined} (ComputeError: parquet: "
    )
    assert record.getMessage().endswith("; its answers are computed again")
    # The quarantined file is out of the way: a second lookup reads the rest, silently.
    caplog.clear()
    assert cache.lookup(["k1", "k3"])["cache_key"].to_list() == ["k1"]
    assert caplog.records == []


def test_a_corrupt_part_costs_only_its_own_rows_on_the_rerun(tmp_path: Path) -> None:
    table = prompt_table()
    prompts = tmp_path / "prompts.parquet"
    table.write_parquet(prompts)

    def shard(index: int, backend: CountingBackend) -> pl.DataFrame:
        return run_test_shard(
            tmp_path,
            backend,
            prompts=prompts,
            shard=index,
            n_shards=2,
            out_path=tmp_path / f"s{index}.parquet",
        )

    first = [shard(i, CountingBackend()) for i in range(2)]
    folder = tmp_path / "cache" / "m" / "seed0" / "healthcare"
    (part,) = folder.glob("1of2.*.parquet")
    part.write_bytes(part.read_bytes()[:100])
    again = [CountingBackend(), CountingBackend()]
    second = [shard(i, again[i]) for i in range(2)]
    assert [b.calls for b in again] == [0, first[1].height]
    assert second[0]["cache_hit"].all() and not second[1]["cache_hit"].any()
    assert second[1]["completion"].equals(first[1]["completion"])
    assert sorted(p.name.split(".")[-1] for p in folder.iterdir()) == [
        "corrupt",
        "parquet",
        "parquet",
    ]


def test_the_packaged_smollm2_context_is_read_from_its_prepared_folder(
    smollm2_dir: Path,
) -> None:
    pytest.importorskip("torch")
    from cueaudit.inference.hf import HFEngine

    folder = smollm2_dir
    engine = HFEngine(str(folder))  # loads the tokenizer only; the weights load on first use
    # The GGUF's llama.context_length, 8192, becomes max_position_embeddings.
    assert context_limit(engine) == (8192, f"{folder / 'config.json'}: max_position_embeddings")
    fits = engine.render("Should I see a doctor? " * 10)
    too_long = engine.render("Should I see a doctor? " * 1500)
    n = len(engine.tokenizer(too_long, add_special_tokens=False)["input_ids"])
    check_context(engine, [("ok", fits)], 8, "prompts.parquet")
    with pytest.raises(InputError) as info:
        check_context(engine, [("ok", fits), ("long", too_long)], 8, "prompts.parquet")
    assert str(info.value) == (
        "prompts.parquet: field 'text': 1 of 2 prompts to generate do not fit the model's "
        f"context of 8192 tokens ({folder / 'config.json'}: max_position_embeddings); the "
        f"longest, prompt_uid long, has {n} prompt tokens + max_new_tokens 8 = {n + 8}"
    )
    assert engine._model is None  # the check never loaded the weights


def _fake_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> list[str]:
    """A stand-in GGUF file whose 'conversion' writes two files and counts its calls."""
    import cueaudit.models as models

    (tmp_path / "w.gguf").write_bytes(b"GGUF weights")
    calls: list[str] = []

    def convert(gguf: Path, out: Path, dtype: str) -> None:
        calls.append(dtype)
        (out / "model.safetensors").write_bytes(b"de-quantised " + dtype.encode())
        if fail:
            raise OSError("disk full")
        (out / "tokenizer.json").write_text("{}")

    monkeypatch.setattr(models, "_convert_gguf", convert)
    monkeypatch.setattr(models, "generation_defaults", lambda folder, shown=None: {})
    return calls


def test_the_model_cache_converts_a_gguf_once_and_copies_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fake_gguf(tmp_path, monkeypatch)
    spec = {"backend": "hf", "path": str(tmp_path), "gguf_file": "w.gguf"}
    monkeypatch.setenv("CUEAUDIT_MODEL_CACHE", str(tmp_path / "cache"))
    first = prepare_model("m", spec, tmp_path / "a" / "m")
    second = prepare_model("m", spec, tmp_path / "b" / "m")
    assert calls == ["float32"] and first == second
    assert (tmp_path / "b/m/model.safetensors").read_bytes() == b"de-quantised float32"
    # a prepared folder is a copy: writing in it leaves the cache as it was
    (tmp_path / "b/m/model.safetensors").write_bytes(b"edited")
    prepare_model("m", spec, tmp_path / "c" / "m")
    assert (tmp_path / "c/m/model.safetensors").read_bytes() == b"de-quantised float32"
    prepare_model("m", {**spec, "dtype": "bfloat16"}, tmp_path / "d" / "m")
    assert calls == ["float32", "bfloat16"] and len(list((tmp_path / "cache").iterdir())) == 2
    monkeypatch.delenv("CUEAUDIT_MODEL_CACHE")
    prepare_model("m", spec, tmp_path / "e" / "m")
    assert calls == ["float32", "bfloat16", "float32"]


def test_a_failed_conversion_leaves_nothing_in_the_model_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_gguf(tmp_path, monkeypatch, fail=True)
    spec = {"backend": "hf", "path": str(tmp_path), "gguf_file": "w.gguf"}
    monkeypatch.setenv("CUEAUDIT_MODEL_CACHE", str(tmp_path / "cache"))
    with pytest.raises(OSError, match="disk full"):
        prepare_model("m", spec, tmp_path / "models" / "m")
    assert list((tmp_path / "cache").iterdir()) == []
    assert list((tmp_path / "models").iterdir()) == []
