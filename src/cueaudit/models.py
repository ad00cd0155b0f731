"""Model preparation: resolve a configured model to a local folder that loads fast."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cueaudit.errors import InputError
from cueaudit.inference.core import API_SAMPLING_KEYS, SAMPLING_KEYS, Decoding
from cueaudit.io import atomic_directory

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
    with atomic_directory(out_dir) as tmp:
        return _prepare_into(name, spec, tmp)


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
    if spec["backend"] == "openai":
        manifest["generation_config"] = None
    elif manifest["load_path"] == ".":  # saved here: name the final folder, not the .partial
        final = tmp.name.removesuffix(".partial")
        manifest["generation_config"] = generation_defaults(tmp, shown=final)
    else:
        manifest["generation_config"] = generation_defaults(manifest["load_path"])
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest


#: Neutral values of the sampling parameters transformers applies when neither the model nor
#: the caller sets them (``GenerationConfig._get_default_generation_params`` in transformers 5;
#: the attribute defaults of ``GenerationConfig`` before it). Used only when that is missing.
FRAMEWORK_DEFAULTS: dict[str, Any] = {
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 50,
    "min_p": None,
    "repetition_penalty": 1.0,
}
#: Sampling settings of a generation config that no backend here applies, with their neutral
#: values: a model setting one of them otherwise is sampled without it (logged, recorded).
NOT_APPLIED: dict[str, Any] = {
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "top_h": None,
    "no_repeat_ngram_size": 0,
    "encoder_repetition_penalty": 1.0,
}
_RANGES = {  # key: (lowest, highest, lowest allowed?)
    "temperature": (0.0, None, False),
    "top_p": (0.0, 1.0, False),
    "top_k": (0, None, True),
    "min_p": (0.0, 1.0, True),
    "repetition_penalty": (0.0, None, False),
}


def generation_defaults(path: str | Path, shown: str | None = None) -> dict[str, Any]:
    """The sampling parameters a model samples with under transformers when the caller sets
    none: its generation config (``generation_config.json`` of the folder or hub snapshot, else
    the one transformers derives from ``config.json``), unset values filled with the framework
    defaults, exactly as ``generate`` resolves them.

    Returns ``{"source": where they came from, "sampling": {key: value} for
    cueaudit.inference.core.SAMPLING_KEYS (None: not applied), "not_applied": {key: value}}``.
    ``do_sample`` is not read: the studies always sample, at the configured temperature.
    ``shown`` names the folder in ``source`` and in errors (default: ``path``).
    """
    from transformers import AutoConfig, GenerationConfig

    offline_hub()
    where, name = str(path), shown or str(path)
    try:
        config = GenerationConfig.from_pretrained(where)
        source = f"{name}/generation_config.json"
    except (OSError, ValueError) as error:
        if isinstance(error, ValueError) or (Path(where) / "generation_config.json").is_file():
            # there, but unreadable (not JSON) or refused by transformers
            message = f"cannot read the model's generation config ({error})"
            raise InputError(f"{name}/generation_config.json", message) from error
        try:
            config = GenerationConfig.from_model_config(AutoConfig.from_pretrained(where))
            source = f"{name}/config.json (no generation_config.json)"
        except (OSError, ValueError) as error:
            message = f"cannot read the model's generation config ({error})"
            raise InputError(name, message) from error
    global_defaults = getattr(GenerationConfig, "_get_default_generation_params", None)
    framework = global_defaults() if global_defaults is not None else FRAMEWORK_DEFAULTS
    sampling: dict[str, Any] = {}
    for key in FRAMEWORK_DEFAULTS:
        value = getattr(config, key, None)
        sampling[key] = value if value is not None else framework.get(key)
        _check_range(key, sampling[key], source)
    not_applied = {
        key: getattr(config, key)
        for key, neutral in NOT_APPLIED.items()
        if getattr(config, key, None) not in (None, neutral)
    }
    if not_applied:
        log.warning("%s sets %s, which cueaudit's samplers do not apply", source, not_applied)
    return {"source": source, "sampling": sampling, "not_applied": not_applied}


def _check_range(key: str, value: Any, source: str) -> None:
    if value is None:
        return
    low, high, closed = _RANGES[key]
    if (value < low if closed else value <= low) or (high is not None and value > high):
        bound = f"{'>=' if closed else '>'} {low}" + (f" and <= {high}" if high is not None else "")
        raise InputError(source, f"{key} is {value!r}; it must be {bound}", key)


def sampling_defaults(manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """The model's own sampling parameters recorded in a prepared model's manifest (None for
    API models: what is not configured is left to the API)."""
    if "generation_config" not in manifest:
        raise InputError(
            MANIFEST,
            f"the manifest of {manifest.get('name')} records no generation config and "
            "transformers is not installed to read it; rerun the prepare_model rule",
            "generation_config",
        )
    recorded = manifest["generation_config"]
    return dict(recorded["sampling"]) if recorded else None


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
    if "generation_config" not in manifest:  # written before the defaults were recorded
        if manifest["backend"] == "openai":
            manifest["generation_config"] = None
        elif importlib.util.find_spec("transformers") is not None:
            manifest["generation_config"] = generation_defaults(manifest["resolved_path"])
        # else (an environment without transformers, e.g. the analysis one): left unknown
    return manifest


def resolved_sampling(decoding: Mapping[str, Any], manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling parameters a prepared model's inference jobs apply, resolved as the
    runner resolves them (cueaudit.inference.core.backend_decoding): the config's ``decoding``
    block over the model's generation config; for API models only the keys the API accepts,
    None where not sent. This is what the provenance records."""
    keys = API_SAMPLING_KEYS if manifest["backend"] == "openai" else SAMPLING_KEYS
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
