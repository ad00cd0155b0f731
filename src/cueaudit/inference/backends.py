"""Every backend, built from its config block by name; each is imported only when asked for.

A new backend is one module with a class that answers the ``Backend`` protocol
(cueaudit.inference.core) and has ``from_spec(manifest, spec, state_dir)``, plus one row here
and one value in the config schema's ``backend`` enum. A backend without local weights (a
model behind an API) also has ``remote_model(name, spec)``: the ``(source, model_id)`` that
identify the model in its manifest (cueaudit.models.prepare_model).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any, Final

from cueaudit.errors import InputError
from cueaudit.inference.core import API_SAMPLING_KEYS, SAMPLING_KEYS, Backend
from cueaudit.inference.manifest import load_manifest


@dataclass(frozen=True)
class BackendEntry:
    """Where a backend's class lives, and what preparing and recording its models needs to know
    without importing it (its heavy dependencies load with the class)."""

    module: str
    cls: str
    #: Whether its models are weights on this machine (prepared into a folder, hashed, with a
    #: generation config); False for a model behind an API, named by ``remote_model``.
    local_weights: bool = True
    #: The sampling parameters it applies (cueaudit.inference.core.backend_decoding).
    sampling_keys: tuple[str, ...] = SAMPLING_KEYS
    #: How its models' inference is cut into jobs unless a model says (``inference_jobs``):
    #: "per_seed" where the engine is slow to start, so that it starts once per model x seed.
    inference_jobs: str = "per_task"


BACKENDS: Final = {
    "hf": BackendEntry("cueaudit.inference.hf", "HFEngine"),
    "openai": BackendEntry(
        "cueaudit.inference.openai_backend",
        "OpenAIBackend",
        local_weights=False,
        sampling_keys=API_SAMPLING_KEYS,
    ),
    "vllm": BackendEntry(
        "cueaudit.inference.vllm_backend", "VLLMBackend", inference_jobs="per_seed"
    ),
}


def backend_entry(name: str) -> BackendEntry:
    """The registry row of a backend, or InputError naming the known ones."""
    if name not in BACKENDS:
        raise InputError(
            "config", f"unknown backend {name!r} (known: {sorted(BACKENDS)})", "backend"
        )
    return BACKENDS[name]


def inference_jobs(spec: Mapping[str, Any]) -> str:
    """ "per_task" or "per_seed": a model's ``inference_jobs``, else its backend's default."""
    return spec.get("inference_jobs") or backend_entry(spec["backend"]).inference_jobs


def backend_class(name: str) -> Any:
    """The class of a backend, imported now."""
    entry = backend_entry(name)
    return getattr(import_module(entry.module), entry.cls)


def build_backend(
    model_dir: str | Path, spec: Mapping[str, Any], state_dir: Path | None = None
) -> Backend:
    """The configured backend of a prepared model folder (``state_dir``: resumable job state)."""
    backend: Backend = backend_class(spec["backend"]).from_spec(
        load_manifest(model_dir), spec, state_dir
    )
    return backend
