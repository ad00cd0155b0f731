"""Validation of the study configuration against its JSON schema, with defaults filled in."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from cueaudit.errors import InputError


def _is_integer(checker: Any, instance: Any) -> bool:
    # JSON Schema counts 2.0 as an integer; a count, seed or size written as a float is a typo
    # that would fail later (range(2.0)) or name a different file (seed0.0), so refuse it.
    return isinstance(instance, int) and not isinstance(instance, bool)


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

    type_checker = validator_class.TYPE_CHECKER.redefine("integer", _is_integer)
    return jsonschema.validators.extend(
        validator_class, {"properties": set_defaults}, type_checker=type_checker
    )


def _copy(value: Any) -> Any:
    return yaml.safe_load(yaml.safe_dump(value))


def _key(path: Iterator[Any] | Any) -> str:
    parts = [str(p) for p in path]
    return ".".join(parts) if parts else "(top level)"


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        return f"{error.message} (allowed: {', '.join(sorted(error.schema.get('properties', {})))})"
    if error.validator == "pattern" and "description" in error.schema:
        return f"{error.instance!r} is not valid (expected {error.schema['description']})"
    if error.validator == "oneOf" and "description" in error.schema:
        return f"expected {error.schema['description']}"
    return error.message


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a JSON or YAML config file (as Snakemake does: JSON first), refusing what a plain
    loader lets through.

    A YAML syntax error is reported with its line and column, and a key given twice in one
    mapping (where YAML and JSON silently keep the last value) with both lines and its dotted
    key.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(source, f"cannot read the config file: {error}") from None
    try:
        value = json.loads(text, object_pairs_hook=_unique_pairs)
    except _RepeatedKey as repeated:
        # Valid JSON has tabs only between tokens, where a space is the same to YAML, so the
        # YAML reader can point at the lines.
        _check_yaml_keys(text.replace("\t", " "), source)
        raise InputError(
            source, f"key '{repeated.key}' given twice (only the last one would count)"
        ) from None
    except ValueError:
        value = _load_yaml(text, source)
    if value is None:
        raise InputError(source, "the file is empty (it must hold the config's keys)")
    if not isinstance(value, dict):
        raise InputError(
            source, f"the top level must be a mapping of keys, not {type(value).__name__}"
        )
    return value


class _RepeatedKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _RepeatedKey(key)
        seen[key] = value
    return seen


def check_yaml_duplicate_keys(text: str, source: str) -> None:
    """Refuse a YAML mapping that gives a key twice (plain YAML keeps the last one silently),
    naming both lines and the key path; syntax errors are left to the caller's parser."""
    _check_yaml_keys(text, source)


def _check_yaml_keys(text: str, source: str) -> None:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError:
        return
    if node is not None:
        _check_duplicate_keys(node, (), source)


def _load_yaml(text: str, source: str) -> Any:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as error:
        raise InputError(source, _syntax_error(error)) from None
    if node is None:
        return None
    _check_duplicate_keys(node, (), source)
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:  # a bad tag or value found only when constructing
        raise InputError(source, _syntax_error(error)) from None


def check_config_files(paths: Iterable[str | Path]) -> None:
    """Read every existing config file strictly (see ``load_config_file``)."""
    for path in paths:
        if Path(path).is_file():
            load_config_file(path)


#: The top-level keys of a complete study config (``cues`` is required by the schema too).
COMPLETE_KEYS = ("cues", "models", "seeds")


def is_complete_config(path: str | Path) -> bool:
    """Whether a ``--configfile`` is a study config of its own (it holds cues, models and
    seeds, like config/paper.yaml) rather than an override of config/config.yaml: Snakemake
    would merge it into the default, keeping the default's models, tasks and studies."""
    loaded = load_config_file(path) if Path(path).is_file() else None
    return isinstance(loaded, Mapping) and all(key in loaded for key in COMPLETE_KEYS)


def stop_on_bad_configfiles(argv: Sequence[str]) -> None:
    """Exit with the message of the first ``--configfile`` on Snakemake's command line
    ``argv`` that cannot be read (see ``load_config_file``).

    Snakemake loads these files while it parses its command line, before it reads the
    Snakefile, and reports a syntax error without the file or the line (a missing file or a
    folder with a traceback), so the workflow profile (profiles/default) calls this first.
    Anything that is not a Snakemake command line is left for Snakemake to report.
    """
    try:
        from snakemake.cli import get_argument_parser

        configfiles = get_argument_parser().parse_args(list(argv)).configfile
    except (Exception, SystemExit):
        return
    try:
        for path in configfiles:
            load_config_file(path)
    except InputError as error:
        sys.exit(f"Error: {error}")


def _syntax_error(error: yaml.MarkedYAMLError) -> str:
    mark = error.problem_mark or error.context_mark
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    what = "; ".join(str(part) for part in (error.context, error.problem) if part)
    return f"YAML syntax error{where}: {what}"


def _check_duplicate_keys(node: yaml.Node, path: tuple[str, ...], source: str) -> None:
    if isinstance(node, yaml.MappingNode):
        first_line: dict[tuple[str, str], int] = {}
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = (key_node.tag, key_node.value)
                line = key_node.start_mark.line + 1
                if key in first_line:
                    raise InputError(
                        source,
                        f"key '{key_node.value}' given twice, at lines {first_line[key]} and "
                        f"{line} (only the last one would count)",
                        ".".join((*path, key_node.value)),
                    )
                first_line[key] = line
                _check_duplicate_keys(value_node, (*path, key_node.value), source)
            else:
                _check_duplicate_keys(value_node, path, source)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _check_duplicate_keys(item, (*path, str(index)), source)


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


def seeds_of(config: Mapping[str, Any], model: str) -> list[int]:
    """The seeds ``model`` runs: ``models.<model>.seeds``, else the top-level ``seeds``."""
    return list(config["models"][model].get("seeds") or config["seeds"])


def race_prediction_runs(config: Mapping[str, Any]) -> dict[str, list[int]]:
    """Model -> seeds of the race-prediction task: ``probing.race_prediction.models``
    (default: all) with each model's seeds, restricted to ``probing.race_prediction.seeds``
    when given. Empty when the task is off."""
    spec = config["probing"].get("race_prediction") or {}
    if not spec.get("enabled"):
        return {}
    only = spec.get("seeds")
    runs = {}
    for model in spec.get("models") or list(config["models"]):
        runs[model] = [s for s in seeds_of(config, model) if only is None or s in only]
    return runs


def regression_seeds(config: Mapping[str, Any]) -> dict[str, int]:
    """Model -> the one seed whose responses enter Tables 5-7 (one response per prompt, as
    the paper): ``probing.analysis.regression_seed``, else each model's first race-prediction
    seed."""
    chosen = (config["probing"].get("analysis") or {}).get("regression_seed")
    return {
        model: seeds[0] if chosen is None else chosen
        for model, seeds in race_prediction_runs(config).items()
        if seeds
    }


#: The probing study's derived task: its prompts are results/prompts/race_prediction.parquet.
RACE_PREDICTION = "race_prediction"


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
    if "probing" in config:
        yield from _probing_problems(config)
    if "decision" in config:
        yield from _decision_problems(config)


def _probing_problems(config: Mapping[str, Any]) -> Iterator[str]:
    tasks = config["probing"]["tasks"]
    for task in tasks:
        if task == RACE_PREDICTION:
            yield (
                f"config key probing.tasks.{task}: the name is reserved for the race-prediction "
                "task (set it up under probing.race_prediction)"
            )
    for task in config["probing"]["race_prediction"]["tasks"]:
        if task not in tasks:
            yield (
                f"config key probing.race_prediction.tasks: unknown task '{task}' "
                f"(probing.tasks has: {', '.join(sorted(tasks))})"
            )
    if "names" not in config["cues"]:
        yield "config key cues.names: required by the probing study (the name cues)"
    yield from _race_prediction_problems(config)


def _race_prediction_problems(config: Mapping[str, Any]) -> Iterator[str]:
    spec = config["probing"]["race_prediction"]
    models = config["models"]
    unknown = [model for model in spec.get("models") or [] if model not in models]
    if unknown:
        yield (
            f"config key probing.race_prediction.models: unknown models "
            f"{', '.join(map(repr, unknown))} (models has: {', '.join(models)})"
        )
        return
    if not spec["enabled"]:
        return
    runs = race_prediction_runs(config)
    for seed in spec.get("seeds") or []:
        if not any(seed in seeds_of(config, model) for model in runs):
            yield (
                f"config key probing.race_prediction.seeds: seed {seed} is not a seed of any "
                f"race-prediction model ({', '.join(runs)})"
            )
    for model, seeds in runs.items():
        if not seeds:
            yield (
                f"config key probing.race_prediction.seeds: model {model!r} runs none of them "
                f"(its seeds: {seeds_of(config, model)})"
            )
    chosen = config["probing"]["analysis"].get("regression_seed")
    for model, seeds in runs.items():
        if chosen is not None and seeds and chosen not in seeds:
            yield (
                f"config key probing.analysis.regression_seed: {chosen} has no race predictions "
                f"of model {model!r} (its race-prediction seeds: {seeds})"
            )


def _decision_problems(config: Mapping[str, Any]) -> Iterator[str]:
    decision = config["decision"]
    if "primary" in decision["extensions"]:
        yield (
            "config key decision.extensions.primary: 'primary' is the pre-registered design's "
            "arm; give the extension another name"
        )
    blocks = {"decision.models": decision}
    blocks.update(
        {f"decision.extensions.{arm}.models": b for arm, b in decision["extensions"].items()}
    )
    for key, block in blocks.items():
        unknown = [model for model in block.get("models", []) if model not in config["models"]]
        if unknown:
            yield (
                f"config key {key}: unknown models {', '.join(map(repr, unknown))} "
                f"(models has: {', '.join(config['models'])})"
            )


#: Resource keys that may name a folder (SSA's yobYYYY.txt files); every other one is a file.
FOLDER_KEYS = frozenset({"cues.names.derive.ssa.path"})


def check_input_files(config: Mapping[str, Any], base_dir: str | Path = ".") -> None:
    """Fail before any job when a configured resource file does not exist or is a folder."""
    base = Path(base_dir)
    problems = []
    for key, path in _resource_paths(config):
        target = base / path
        if not target.exists():
            problems.append(f"config key {key}: not found: {path}")
        elif target.is_dir() and key not in FOLDER_KEYS:
            problems.append(f"config key {key}: a folder, not a file: {path}")
    if problems:
        raise InputError("config", "unusable input files:\n  " + "\n  ".join(problems))


def _resource_paths(config: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for task, spec in (config.get("probing") or {}).get("tasks", {}).items():
        if "base_prompts" in spec:
            yield f"probing.tasks.{task}.base_prompts", spec["base_prompts"]
        augment = spec.get("augment") or {}
        if "templates" in augment:
            yield f"probing.tasks.{task}.augment.templates", augment["templates"]
        for name, path in (augment.get("components") or {}).items():
            yield f"probing.tasks.{task}.augment.components.{name}", path
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
