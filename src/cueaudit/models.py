"""Model preparation: resolve a configured model to a local folder that loads fast."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cueaudit.errors import InputError

MANIFEST = "cueaudit-model.json"
log = logging.getLogger(__name__)


def offline_hub() -> None:
    """Never reach the model hub at run time."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


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
    out = Path(out_dir)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)  # left by a killed earlier attempt
    tmp.mkdir(parents=True)
    try:
        manifest = _prepare_into(name, spec, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return manifest


def _prepare_into(name: str, spec: Mapping[str, Any], tmp: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = {"name": name, "backend": spec["backend"]}
    if spec["backend"] == "openai":
        # Nothing to download: the identity is the dated model snapshot at its endpoint.
        openai = spec.get("openai", {})
        model = openai.get("model", name)
        base_url = openai.get("base_url") or "https://api.openai.com/v1"
        manifest |= {"source": base_url, "weights_sha256": None, "load_path": None}
        manifest["model_id"] = f"openai:{model}@{base_url}"
    else:
        gguf = gguf_source(spec)
        if gguf is not None:
            _convert_gguf(gguf, tmp, spec.get("dtype", "float32"))
            digest = file_sha256(gguf)
            manifest |= {"source": str(gguf), "weights_sha256": digest, "load_path": "."}
            manifest["model_id"] = f"sha256:{digest}"
        elif "path" not in spec:
            raise InputError("config", "a model needs 'path' or 'gguf_file'", "path")
        else:
            manifest |= {"source": spec["path"], "weights_sha256": None, "load_path": spec["path"]}
            manifest["model_id"] = resolve_model_id(spec["path"], spec.get("revision"))
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest


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


def load_manifest(model_dir: str | Path) -> dict[str, Any]:
    path = Path(model_dir) / MANIFEST
    if not path.is_file():
        raise InputError(str(path), "model folder has no manifest; rerun the prepare_model rule")
    manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    load_path = manifest["load_path"]
    manifest["resolved_path"] = str(Path(model_dir)) if load_path == "." else load_path
    if "model_id" not in manifest:  # manifests written before model ids were recorded
        digest = manifest.get("weights_sha256")
        manifest["model_id"] = f"sha256:{digest}" if digest else manifest["source"]
    return manifest
