"""Every backend, built from its config block by name; each is imported only when asked for.

A new backend is one module with a class that answers the ``Backend`` protocol
(cueaudit.inference.core) and has ``from_spec(manifest, spec, state_dir)``, plus one row here
and one value in the config schema's ``backend`` enum.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from pathlib import Path
from typing import Any, Final

from cueaudit.errors import InputError
from cueaudit.inference.core import Backend
from cueaudit.models import load_manifest

#: backend name -> (module, class)
BACKENDS: Final = {
    "hf": ("cueaudit.inference.hf", "HFEngine"),
    "openai": ("cueaudit.inference.openai_backend", "OpenAIBackend"),
    "vllm": ("cueaudit.inference.vllm_backend", "VLLMBackend"),
}


def build_backend(
    model_dir: str | Path, spec: Mapping[str, Any], state_dir: Path | None = None
) -> Backend:
    """The configured backend of a prepared model folder (``state_dir``: resumable job state)."""
    name = spec["backend"]
    if name not in BACKENDS:
        raise InputError(
            "config", f"unknown backend {name!r} (known: {sorted(BACKENDS)})", "backend"
        )
    module, cls = BACKENDS[name]
    backend: Backend = getattr(import_module(module), cls).from_spec(
        load_manifest(model_dir), spec, state_dir
    )
    return backend
