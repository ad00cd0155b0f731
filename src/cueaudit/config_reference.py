"""The configuration reference: every key of the joined config schema as Markdown tables.

:func:`render` turns the schema that :func:`cueaudit.config.study_schema` joins (the shared
``workflow/schemas/config.schema.yaml`` with each study's block schema under its name) into
``docs/configuration-reference.md``: one table per top-level key, a row per key with its type,
its default and its description. The schemas hold the defaults and the descriptions, so the
page is generated from them, never edited by hand; ``scripts/config_reference.py`` writes it
and a unit test fails when the committed page is not what the schemas render.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

Schema = Mapping[str, Any]
#: A ``<`` that Markdown would read as the start of an HTML tag (``<task>``), not ``< 1``.
_TAG_START: Final = re.compile(r"<(?=[A-Za-z/!])")

#: The name shown for a free key (``additionalProperties``) below these keys.
PLACEHOLDERS: Final[Mapping[str, str]] = {
    "models": "<model>",
    "tasks": "<task>",
    "extensions": "<arm>",
    "lists": "<source>",
    "components": "<placeholder>",
    "rule_probabilities": "<rule>",
    "max_new_tokens": "<format or task>",
    "columns": "<column>",
}
HEADER: Final = """\
# Configuration reference

<!-- Generated from workflow/schemas/*.schema.yaml by `python scripts/config_reference.py`:
do not edit by hand (tests/unit/test_config_reference.py fails when it is stale). -->

Every key of `config/config.yaml`, from the schemas that check it before any job runs
(`workflow/schemas/config.schema.yaml` for the shared keys, `workflow/schemas/<study>.schema.yaml`
for each study's block). A key left out takes its default; a key without a default is optional
unless it says *required*. `<model>`, `<task>` and the like stand for names of your choosing.
How the keys fit together: [configuration.md](configuration.md).
"""


def _code(value: Any) -> str:
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _bounds(schema: Schema) -> str:
    parts = []
    for key, sign in (
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
    ):
        if key in schema:
            parts.append(f"{sign} {schema[key]}")
    return " " + ", ".join(parts) if parts else ""


def describe_type(schema: Schema) -> str:
    """A schema's accepted values in words: ``integer ≥ 1 or null``, ``one of `a`, `b```."""
    if "const" in schema:
        return _code(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(_code(value) for value in schema["enum"])
    kind = schema.get("type")
    if kind is None:
        for combinator in ("oneOf", "anyOf"):
            if combinator in schema:
                return " or ".join(describe_type(option) for option in schema[combinator])
        return "object" if "properties" in schema else "any"
    kinds = [kind] if isinstance(kind, str) else list(kind)
    words = []
    for name in kinds:
        if name in ("integer", "number"):
            words.append(name + _bounds(schema))
        elif name == "array" and isinstance(schema.get("items"), Mapping):
            words.append(f"list of {describe_type(schema['items'])}")
        else:
            words.append(str(name))
    return " or ".join(words)


def _cell(text: str) -> str:
    """``text`` for a table cell: one line, ``|`` escaped, and ``<`` outside code spans
    escaped so that a placeholder such as <task> is not read as an HTML tag."""
    spans = text.replace("\n", " ").split("`")
    spans[::2] = [_TAG_START.sub("&lt;", span) for span in spans[::2]]
    return "`".join(spans).replace("|", "\\|")


def _row(path: str, schema: Schema, required: bool) -> str:
    default = _code(schema["default"]) if "default" in schema else ""
    description = str(schema.get("description", ""))
    if required:
        description = "*required*" + (f"; {description}" if description else "")
    return (
        f"| `{path}` | {_cell(describe_type(schema))} | {_cell(default)} | {_cell(description)} |"
    )


def _object_branch(schema: Schema) -> Schema | None:
    """The object alternative of a ``oneOf`` whose other alternatives are plain values
    (``bundles_per_type``: an integer or a mapping per type), whose keys are rows too."""
    options = [o for o in schema.get("oneOf", ()) if isinstance(o, Mapping) and "properties" in o]
    return options[0] if len(options) == 1 else None


class _Walker:
    def __init__(self, root: Schema) -> None:
        self.definitions: Schema = root.get("$defs", {})
        self.expanded: dict[str, str] = {}

    def resolve(self, schema: Schema, path: str) -> tuple[Schema, str | None]:
        """``schema`` with its ``$ref`` followed (its own keys win, and its own ``properties``
        add to the definition's keys: ``decision.design`` gives their defaults), and the path
        where that definition was first listed when it was listed before."""
        reference = schema.get("$ref")
        if reference is None:
            return schema, None
        name = str(reference).rpartition("/")[2]
        definition = self.definitions[name]
        merged = {**definition, **{k: v for k, v in schema.items() if k != "$ref"}}
        if "properties" in schema:
            own = schema["properties"]
            merged["properties"] = {
                key: {**child, **own.get(key, {})}
                for key, child in definition.get("properties", {}).items()
            }
        first = self.expanded.setdefault(name, path)
        return merged, (first if first != path else None)

    def rows(self, path: str, schema: Schema, required: bool = False) -> Iterator[str]:
        schema, seen_at = self.resolve(schema, path)
        if seen_at is not None:
            note = f"the keys of `{seen_at}`"
            text = schema.get("description")
            described = {**schema, "description": f"{text}; {note}" if text else note}
            yield _row(path, {**described, "type": "object"}, required)
            return
        yield _row(path, schema, required)
        yield from self.children(path, _object_branch(schema) or schema)

    def children(self, path: str, schema: Schema) -> Iterator[str]:
        needed = set(schema.get("required", ()))
        for key, child in schema.get("properties", {}).items():
            yield from self.rows(f"{path}.{key}", child, key in needed)
        free = schema.get("additionalProperties")
        if isinstance(free, Mapping):
            name = PLACEHOLDERS.get(path.rpartition(".")[2], "<name>")
            names = schema.get("propertyNames", {})
            if "enum" in names:
                allowed = ", ".join(f"`{value}`" for value in names["enum"])
                note = f"`{name}` is one of {allowed}"
            elif "pattern" in names:
                note = f"`{name}` matches `{names['pattern']}`"
            else:
                note = ""
            if note:
                text = free.get("description")
                free = {**free, "description": f"{text}; {note}" if text else note}
            yield from self.rows(f"{path}.{name}", free)
        items = schema.get("items")
        if isinstance(items, Mapping) and items.get("properties"):
            yield from self.children(f"{path}[]", items)


def render(schema: Schema) -> str:
    """The configuration reference page of the joined schema ``schema``."""
    walker = _Walker(schema)
    needed = set(schema.get("required", ()))
    sections = [HEADER]
    for key, child in schema.get("properties", {}).items():
        rows = list(walker.rows(key, child, key in needed))
        lines = [f"## `{key}`", "", "| key | type | default | description |", "|---|---|---|---|"]
        lines += rows
        sections.append("\n".join(lines) + "\n")
    return "\n".join(sections)
