"""Model preparation: resolve a configured model to a folder with a manifest, once.

A model with local weights gets a folder that loads fast (GGUF weights de-quantised there), a
weight hash as its id and its generation config; a model behind an API (a backend whose
registry row has no local weights) gets the identity its backend names. The manifest's format
and its reader are cueaudit.inference.manifest; a prepared model's provenance record is here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cueaudit.errors import InputError
from cueaudit.inference.backends import backend_class, backend_entry
from cueaudit.inference.core import Decoding
from cueaudit.inference.generation_config import generation_defaults, offline_hub
from cueaudit.inference.manifest import MANIFEST, load_manifest, sampling_defaults
from cueaudit.io import atomic_directory

log = logging.getLogger(__name__)

#: A folder of de-quantised GGUF weights shared by every preparation on this machine (set it
#: to skip the conversion in each new working directory; unset, nothing is shared).
MODEL_CACHE_ENV = "CUEAUDIT_MODEL_CACHE"


def package_dir(package: str) -> Path:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(
            "config", f"package '{package}' is not installed (pip install it)", "gguf_package"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def gguf_source(spec: Mapping[str, Any]) -> Path | None:
    """Path of the GGUF file a model spec names, or None for a regular model folder / id."""
    if "gguf_file" not in spec:
        return None
    folder = package_dir(spec["gguf_package"]) if "gguf_package" in spec else Path(spec["path"])
    path = folder / spec["gguf_file"]
    if not path.is_file():
        raise InputError(str(path), "GGUF file not found", "gguf_file")
    return path


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def prepare_model(name: str, spec: Mapping[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """Write ``out_dir`` with a manifest; GGUF weights are de-quantised and saved there once.

    Regular folders and hub ids are not copied: the manifest points at them. The work
    happens in ``<out_dir>.partial``, removed when preparation fails (and, after a killed
    attempt, when the next one starts), so a failure never leaves a folder behind.
    """
    offline_hub()
    with atomic_directory(out_dir) as tmp:
        return _prepare_into(name, spec, tmp)


def _prepare_into(name: str, spec: Mapping[str, Any], tmp: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = {"name": name, "backend": spec["backend"]}
    if backend_entry(spec["backend"]).local_weights:
        manifest |= _local_weights(spec, tmp)
    else:
        source, model_id = backend_class(spec["backend"]).remote_model(name, spec)
        manifest |= {"source": source, "weights_sha256": None, "load_path": None}
        manifest |= {"model_id": model_id, "generation_config": None}  # the API's defaults
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest


def _local_weights(spec: Mapping[str, Any], tmp: Path) -> dict[str, Any]:
    """The manifest fields of local weights: GGUF de-quantised into ``tmp``, else a folder or
    hub id pointed at."""
    gguf = gguf_source(spec)
    if gguf is not None:
        digest = file_sha256(gguf)
        _converted_gguf(gguf, digest, tmp, spec.get("dtype", "float32"))
        final = tmp.name.removesuffix(".partial")  # saved here: name the final folder
        return {
            "source": str(gguf),
            "weights_sha256": digest,
            "load_path": ".",
            "model_id": f"sha256:{digest}",
            "generation_config": generation_defaults(tmp, shown=final),
        }
    if "path" not in spec:
        raise InputError("config", "a model needs 'path' or 'gguf_file'", "path")
    return {
        "source": spec["path"],
        "weights_sha256": None,
        "load_path": spec["path"],
        "model_id": resolve_model_id(spec["path"], spec.get("revision")),
        "generation_config": generation_defaults(spec["path"]),
    }


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf", ".json", ".model", ".jinja")


def folder_digest(folder: Path) -> str:
    """SHA-256 over the weight, config and tokenizer files of a local model folder."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix in WEIGHT_SUFFIXES and path.name != MANIFEST:
            digest.update(f"{path.relative_to(folder)}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()


def resolve_model_id(path: str, revision: str | None = None) -> str:
    """Identity of a model's weights for the response cache: never a mutable name.

    A local folder is hashed; a hub id resolves (offline, from the local hub cache) to the
    commit hash of the snapshot it loads, so ``main`` moving to new weights changes the id.
    """
    folder = Path(path)
    if folder.is_dir():
        return f"sha256:{folder_digest(folder)}"
    try:
        from huggingface_hub import snapshot_download

        snapshot = snapshot_download(path, revision=revision, local_files_only=True)
    except Exception as error:  # hub errors have many types
        raise InputError(
            "config",
            f"model '{path}' is neither a local folder nor in the local hub cache ({error}); "
            "download it once with `hf download` on a node with network access",
            "path",
        ) from error
    return f"hf:{path}@{Path(snapshot).name}"


def _converted_gguf(gguf: Path, digest: str, out: Path, dtype: str) -> None:
    """De-quantise ``gguf`` into ``out``, or copy an earlier conversion of the same file,
    dtype and transformers version from the folder named by $CUEAUDIT_MODEL_CACHE (copied, not
    linked: nothing written in a prepared folder can reach the cache)."""
    cache = os.environ.get(MODEL_CACHE_ENV)
    if not cache:
        _convert_gguf(gguf, out, dtype)
        return
    import transformers

    entry = Path(cache) / f"{digest}-{dtype}-transformers{transformers.__version__}"
    if not entry.is_dir():
        entry.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
        try:
            _convert_gguf(gguf, stage, dtype)
            stage.rename(entry)
        except OSError:
            if not entry.is_dir():  # else another job stored the same conversion first
                raise
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    log.info("de-quantised weights from the model cache %s", entry)
    shutil.copytree(entry, out, dirs_exist_ok=True)


def _convert_gguf(gguf: Path, out: Path, dtype: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("de-quantising %s", gguf)
    torch_dtype = torch.float32 if dtype == "auto" else getattr(torch, dtype)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch_dtype
    )
    # The weights are de-quantised in memory; drop the GGUF quantizer so they can be saved.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    log.info("saved %s (%d parameters)", out, sum(p.numel() for p in model.parameters()))


def resolved_sampling(decoding: Mapping[str, Any], manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling parameters a prepared model's inference jobs apply, resolved as the
    runner resolves them (cueaudit.inference.core.backend_decoding): the config's ``decoding``
    block over the model's generation config, limited to the keys its backend applies (its
    registry row's ``sampling_keys``; an API's others are None: not sent). This is what the
    provenance records."""
    keys = backend_entry(manifest["backend"]).sampling_keys
    return Decoding.from_config(decoding, 1, sampling_defaults(manifest), keys).sampling()


def model_provenance(
    model_dir: str | Path, spec: Mapping[str, Any], decoding: Mapping[str, Any]
) -> dict[str, Any]:
    """A prepared model's provenance record (the ``provenance`` table of the database): its
    id, manifest (without this machine's path), config block, the config's ``decoding`` block
    and the sampling parameters its jobs applied (:func:`resolved_sampling`; null with a
    ``decoding_note`` for a manifest from before the model's defaults were recorded, read
    where transformers is not installed)."""
    manifest = load_manifest(model_dir)
    manifest.pop("resolved_path")  # where this machine keeps the weights, not what they are
    record: dict[str, Any] = {
        "model_id": manifest["model_id"],
        "manifest": manifest,
        "spec": dict(spec),
        "decoding": None,
        "decoding_config": dict(decoding),
    }
    try:
        record["decoding"] = resolved_sampling(decoding, manifest)
    except InputError as error:
        record["decoding_note"] = str(error)
    return record
