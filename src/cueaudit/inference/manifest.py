"""The manifest of a prepared model folder: what the backends read to load and identify it.

``cueaudit.models.prepare_model`` writes ``cueaudit-model.json`` once per model: its name,
backend, ``source``, ``weights_sha256``, ``load_path`` (``"."``: the folder itself; a path or
hub id; null for a model behind an API), ``model_id`` (the identity in response-cache keys) and
``generation_config`` (:func:`cueaudit.inference.generation_config.generation_defaults`; null
for a model behind an API).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cueaudit.errors import InputError
from cueaudit.inference.generation_config import generation_defaults

MANIFEST = "cueaudit-model.json"


def load_manifest(model_dir: str | Path) -> dict[str, Any]:
    """The manifest of a prepared model folder, with ``resolved_path`` (where the weights load
    from on this machine; None for a model behind an API) and the fields older manifests lack."""
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
        if manifest["resolved_path"] is None:  # no local weights: the API's defaults apply
            manifest["generation_config"] = None
        elif importlib.util.find_spec("transformers") is not None:
            manifest["generation_config"] = generation_defaults(manifest["resolved_path"])
        # else (an environment without transformers, e.g. the analysis one): left unknown
    return manifest


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
