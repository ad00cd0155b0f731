"""Validation of the study configuration against its JSON schema, with defaults filled in."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from cueaudit.errors import InputError


def _with_defaults(validator_class: type[jsonschema.protocols.Validator]) -> Any:
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(
        validator: Any, properties: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
    ) -> Iterator[jsonschema.ValidationError]:
        if isinstance(instance, MutableMapping):
            for name, subschema in properties.items():
                if "default" in subschema and name not in instance:
                    instance[name] = _copy(subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def _copy(value: Any) -> Any:
    return yaml.safe_load(yaml.safe_dump(value))


def _key(path: Iterator[Any] | Any) -> str:
    parts = [str(p) for p in path]
    return ".".join(parts) if parts else "(top level)"


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        return f"{error.message} (allowed: {', '.join(sorted(error.schema.get('properties', {})))})"
    return error.message


def validate_config(config: MutableMapping[str, Any], schema_path: str | Path) -> None:
    """Check ``config`` in place against the schema, filling in schema defaults.

    Raises InputError listing every violation by its dotted key, e.g.
    ``models.smollm2.backend: 'vllm' is not one of ['hf']``.
    """
    schema = yaml.safe_load(Path(schema_path).read_text(encoding="utf-8"))
    validator = _with_defaults(jsonschema.Draft202012Validator)(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    problems = [f"config key {_key(e.absolute_path)}: {_describe(e)}" for e in errors]
    if not problems:
        problems = list(_semantic_problems(config))
    if problems:
        raise InputError("config", "invalid configuration:\n  " + "\n  ".join(problems))


#: Study blocks of the config; a study runs when its block is present.
STUDIES = ("probing", "decision")


def _semantic_problems(config: Mapping[str, Any]) -> Iterator[str]:
    if not any(study in config for study in STUDIES):
        yield f"config: give at least one study block ({', '.join(STUDIES)})"
    for name, model in config["models"].items():
        has_gguf_package = "gguf_package" in model
        # An API model is named by openai.model; local weights need a folder or a package.
        if model["backend"] != "openai" and not has_gguf_package and "path" not in model:
            yield f"config key models.{name}: give 'path' (folder or model id) or 'gguf_package'"
        if has_gguf_package and "gguf_file" not in model:
            yield f"config key models.{name}.gguf_file: required with gguf_package"


def check_input_files(config: Mapping[str, Any], base_dir: str | Path = ".") -> None:
    """Fail before any job when a configured resource file or folder does not exist."""
    base = Path(base_dir)
    missing = [
        f"config key {key}: not found: {path}"
        for key, path in _resource_paths(config)
        if not (base / path).exists()
    ]
    if missing:
        raise InputError("config", "missing input files:\n  " + "\n  ".join(missing))


def _resource_paths(config: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for task, spec in (config.get("probing") or {}).get("tasks", {}).items():
        yield f"probing.tasks.{task}.base_prompts", spec["base_prompts"]
    decision = config.get("decision") or {}
    for key in ("profiles", "name_pairs", "hobbies", "neighbourhoods", "demographic_terms"):
        if key in decision:
            yield f"decision.{key}", decision[key]
    if "preregistration" in decision:
        yield "decision.preregistration", decision["preregistration"]
    if "prompts" in decision.get("design", {}):
        yield "decision.design.prompts", decision["design"]["prompts"]
    for arm, block in (decision.get("extensions") or {}).items():
        if "prompts" in block.get("design", {}):
            yield f"decision.extensions.{arm}.design.prompts", block["design"]["prompts"]
    cues = config.get("cues", {})
    names = cues.get("names")
    if names:
        for source, path in names["lists"].items():
            yield f"cues.names.lists.{source}", path
        for source, spec in (names.get("derive") or {}).items():
            if isinstance(spec, Mapping) and "path" in spec:
                yield f"cues.names.derive.{source}.path", spec["path"]
    for source, spec in (cues.get("dialog") or {}).items():
        if isinstance(spec, Mapping):
            for field in ("path", "survey", "conversations"):
                if field in spec:
                    yield f"cues.dialog.{source}.{field}", spec[field]
