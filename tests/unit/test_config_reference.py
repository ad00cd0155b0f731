"""docs/configuration-reference.md is what the schemas render (scripts/config_reference.py), and
the renderer lists every key with its type, default and description."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import Any

import yaml

from cueaudit.config import study_schema
from cueaudit.config_reference import describe_type, render
from cueaudit.studies import STUDIES

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
PAGE = ROOT / "docs/configuration-reference.md"


def _script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "config_reference", ROOT / "scripts/config_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_reference_is_what_the_schemas_render() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(study_schema(SCHEMA, STUDIES)), (
        "docs/configuration-reference.md is stale: run python scripts/config_reference.py"
    )


def test_the_check_fails_on_a_changed_schema(monkeypatch: Any) -> None:
    script = _script()
    assert script.main(["--check"]) == 0
    schema = study_schema(SCHEMA, STUDIES)
    changed = copy.deepcopy(schema)
    changed["properties"]["seeds"]["description"] = "a new description"
    monkeypatch.setattr(script, "reference", lambda: render(changed))
    assert script.main(["--check"]) == 1


def test_every_key_has_a_row_with_its_type_default_and_description() -> None:
    page = render(study_schema(SCHEMA, STUDIES))
    rows = {
        line.split(" | ")[0].removeprefix("| ").strip("`"): line
        for line in page.splitlines()
        if line.startswith("| `")
    }
    assert rows["models.<model>.openai.logprobs"] == (
        "| `models.<model>.openai.logprobs` | boolean | `false` | request top logprobs: "
        "first-token option scores (P(Yes), P(rating), P(label)); required where a study's "
        "analyses read option scores (the workflow says which, before any job) |"
    )
    assert rows["probing.tasks.<task>.outcome"] == (
        '| `probing.tasks.<task>.outcome` | one of `"binary"`, `"usd"` |  | *required* |'
    )
    # a $ref listed twice: the second time points at the first
    assert "the keys of `decision.design`" in rows["decision.extensions.<arm>.design"]
    assert "decision.design.bundles_per_type.position_balanced" in rows
    # a placeholder outside a code span is escaped, so Markdown does not read it as a tag
    assert "models.&lt;m>.seeds" in rows["seeds"]
    # every study's block is a section
    for study in STUDIES:
        assert f"## `{study}`" in page


def test_types_in_words() -> None:
    assert describe_type({"type": ["integer", "null"], "minimum": 1}) == "integer ≥ 1 or null"
    assert (
        describe_type({"oneOf": [{"type": "integer", "minimum": 1}, {"const": "auto"}]})
        == 'integer ≥ 1 or `"auto"`'
    )
    assert describe_type({"type": "array", "items": {"enum": ["a", "b"]}}) == (
        'list of one of `"a"`, `"b"`'
    )


def _keys_with_spaces(node: Any, path: str = "") -> list[str]:
    if isinstance(node, dict):
        found = [f"{path}: {key!r}" for key in node if isinstance(key, str) and " " in key]
        return found + [k for key, v in node.items() for k in _keys_with_spaces(v, f"{path}.{key}")]
    if isinstance(node, list):
        return [k for item in node for k in _keys_with_spaces(item, path)]
    return []


def test_no_description_is_cut_short_by_a_comma_in_flow_yaml() -> None:
    """``{description: a, b}`` in a YAML flow mapping is the description "a" and a key "b":
    the reference showed "use the Batch API (50% price" until the descriptions were quoted."""
    assert _keys_with_spaces(yaml.safe_load("p: {description: use it (50% price, up to 24 h)}"))
    for path in sorted(SCHEMA.parent.glob("*.schema.yaml")):
        assert _keys_with_spaces(yaml.safe_load(path.read_text(encoding="utf-8"))) == [], path
