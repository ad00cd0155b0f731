"""Validation of the study configuration against its JSON schema, with defaults filled in."""

from __future__ import annotations

import functools
import itertools
import json
import logging
import sys
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import jsonschema
import yaml

from cueaudit.errors import InputError
from cueaudit.inference.backends import BACKENDS
from cueaudit.study import Study, enabled_studies

log = logging.getLogger(__name__)

#: The workflow's schemas in the checkout the library runs from (Snakemake puts its src/ first
#: on the path); :func:`schema_defaults` reads them for blocks that were never validated.
SCHEMA_DIR: Final = Path(__file__).resolve().parents[2] / "workflow" / "schemas"


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


def validate_config(
    config: MutableMapping[str, Any], schema_path: str | Path, studies: Mapping[str, Study]
) -> None:
    """Check ``config`` in place against the schema, filling in schema defaults.

    The schema is the shared one at ``schema_path`` with each registered study's block schema
    (its :attr:`Study.schema`, a file beside it) as the property of that study's name. Raises
    InputError listing every violation by its dotted key, e.g.
    ``models.smollm2.backend: 'tgi' is not one of ['hf', 'vllm', 'openai']``; once the schema
    holds, the semantic checks of the shared keys and of each study that runs.
    """
    validator = _with_defaults(jsonschema.Draft202012Validator)(study_schema(schema_path, studies))
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    problems = [f"config key {_key(e.absolute_path)}: {_describe(e)}" for e in errors]
    if not problems:
        problems = list(_semantic_problems(config, studies))
    if problems:
        raise InputError("config", "invalid configuration:\n  " + "\n  ".join(problems))
    for warning in config_warnings(config):
        log.warning("%s", warning)


@functools.cache
def schema_defaults(schema_file: str, *keys: str) -> Mapping[str, Any]:
    """The defaults validation fills into the object at ``keys`` of ``schema_file`` (a study's
    block schema in :data:`SCHEMA_DIR`, and the keys below it): the one place code reads a
    default from, for a block handed to it unvalidated (a test's, the planner's arm). Only the
    object's own ``properties`` are read, not a ``$ref``'d one's."""
    node: Mapping[str, Any] = yaml.safe_load((SCHEMA_DIR / schema_file).read_text("utf-8"))
    for key in keys:
        node = node["properties"][key]
    properties = node.get("properties", {})
    defaults = {name: sub["default"] for name, sub in properties.items() if "default" in sub}
    return MappingProxyType(defaults)


#: More response shards than this (each an inference job, on Slurm a submission) are warned of.
MANY_SHARDS: Final = 1000


def shards_warning(shards_by_task: Mapping[str, int], keys: Mapping[str, str]) -> str | None:
    """A warning when the run has more than :data:`MANY_SHARDS` response shards in all
    (``shards_by_task``: task -> its shards over every model and seed), naming the tasks with
    the most and the config key (``keys``: task -> dotted key) that sets each one's shards."""
    total = sum(shards_by_task.values())
    if total <= MANY_SHARDS:
        return None
    largest = sorted(shards_by_task.items(), key=lambda item: -item[1])[:3]
    named = "; ".join(f"{task}: {n} ({keys.get(task, 'shards')})" for task, n in largest)
    return (
        f"{total} response shards, each with its own jobs (on Slurm, submissions): {named}. "
        "Fewer shards per task make fewer, longer jobs; a shard is worth its own job when its "
        "prompts take minutes"
    )


def config_warnings(config: Mapping[str, Any]) -> list[str]:
    """What a valid config does that its author may not mean: greedy decoding with more than
    one seed (every seed answers the same, so the seeds beyond the first repeat the answers;
    the analyses keep seeds apart, so they are repeated work, not more evidence)."""
    if (config.get("decoding") or {}).get("temperature") != 0:
        return []
    repeated = {m: seeds for m in config["models"] if len(seeds := seeds_of(config, m)) > 1}
    if not repeated:
        return []
    runs = "; ".join(f"{m}: seeds {', '.join(map(str, s))}" for m, s in repeated.items())
    return [
        "config key decoding.temperature: 0 is greedy decoding, which draws nothing from the "
        f"seed, so every seed gives the same answers ({runs}); the seeds beyond the first "
        "repeat the first one's answers (API models may still vary). Give one seed "
        "(seeds: [0]) or sample (temperature > 0)"
    ]


def study_schema(schema_path: str | Path, studies: Mapping[str, Study]) -> dict[str, Any]:
    """The shared schema with every study's block schema under ``properties.<study>`` and
    the blocks' ``$defs`` beside the shared ones."""
    path = Path(schema_path)
    schema: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    definitions = schema.setdefault("$defs", {})
    for study in studies.values():
        block_path = path.parent / study.schema
        block: dict[str, Any] = yaml.safe_load(block_path.read_text(encoding="utf-8"))
        block.pop("$schema", None)
        own = block.pop("$defs", {})
        clash = sorted(set(own) & set(definitions))
        if clash or study.name in schema["properties"]:
            raise ValueError(
                f"{block_path}: names taken by the shared schema: {clash or study.name}"
            )
        definitions.update(own)
        schema["properties"][study.name] = block
    return schema


def seeds_of(config: Mapping[str, Any], model: str) -> list[int]:
    """The seeds ``model`` runs: ``models.<model>.seeds``, else the top-level ``seeds``."""
    return list(config["models"][model].get("seeds") or config["seeds"])


def unknown_models(config: Mapping[str, Any], key: str, models: Iterable[str]) -> Iterator[str]:
    """A problem naming ``key`` when ``models`` lists a model that ``models:`` does not define."""
    unknown = [model for model in models if model not in config["models"]]
    if unknown:
        yield (
            f"config key {key}: unknown models {', '.join(map(repr, unknown))} "
            f"(models has: {', '.join(config['models'])})"
        )


def _semantic_problems(config: Mapping[str, Any], studies: Mapping[str, Study]) -> Iterator[str]:
    running = enabled_studies(studies, config)
    if not running:
        yield f"config: give at least one study block ({', '.join(studies)})"
    for name, model in config["models"].items():
        has_gguf_package = "gguf_package" in model
        # An API model is named by openai.model; local weights need a folder or a package.
        local_weights = BACKENDS[model["backend"]].local_weights
        if local_weights and not has_gguf_package and "path" not in model:
            yield f"config key models.{name}: give 'path' (folder or model id) or 'gguf_package'"
        # A model behind an API is set up by the backend's own block: no endpoint or model
        # name is assumed (without it, api.openai.com and the config key would be).
        if not local_weights and model["backend"] not in model:
            yield (
                f"config key models.{name}.{model['backend']}: required with backend "
                f"{model['backend']} (at least model: the model's name at the endpoint; "
                "base_url: the endpoint, null for api.openai.com)"
            )
        if not local_weights and model.get("inference_jobs") == "per_seed":
            yield (
                f"config key models.{name}.inference_jobs: per_seed starts a local engine once "
                f"per seed; backend {model['backend']} has none (drop the key)"
            )
        if has_gguf_package and "gguf_file" not in model:
            yield f"config key models.{name}.gguf_file: required with gguf_package"
    for study in running:
        yield from study.problems(config)


#: Resource keys that may name a folder (SSA's yobYYYY.txt files); every other one is a file.
FOLDER_KEYS = frozenset({"cues.names.derive.ssa.path"})


def check_input_files(
    config: Mapping[str, Any], studies: Mapping[str, Study], base_dir: str | Path = "."
) -> None:
    """Fail before any job when a configured resource file (of the shared cue resources or of
    a study that runs) does not exist or is a folder."""
    base = Path(base_dir)
    problems = []
    paths = [_cue_resource_paths(config)]
    paths += [study.resource_paths(config) for study in enabled_studies(studies, config)]
    for key, path in itertools.chain.from_iterable(paths):
        target = base / path
        if not target.exists():
            problems.append(f"config key {key}: not found: {path}")
        elif target.is_dir() and key not in FOLDER_KEYS:
            problems.append(f"config key {key}: a folder, not a file: {path}")
    if problems:
        raise InputError("config", "unusable input files:\n  " + "\n  ".join(problems))


def _cue_resource_paths(config: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
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
