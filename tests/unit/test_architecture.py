"""The shape docs/architecture.md promises: the shared parts never import a study, no two
parts of the library import each other, no shared file names a study, the schema's
enumerations are the registries', and every module the architecture page names exists."""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cueaudit.config import study_schema
from cueaudit.decision.analysis.registry import ANALYSES as DECISION_ANALYSES
from cueaudit.decision.analysis.registry import FIGURES as DECISION_FIGURES
from cueaudit.studies import STUDIES
from tests.helpers.worked_example import tracked_files

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "src" / "cueaudit"
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
#: The registry of studies is where the studies meet; it is not a shared part.
REGISTRY_MODULE = "studies"
STUDY_PACKAGES = frozenset(STUDIES)


def _part(module: str) -> str:
    """The part of the library a module belongs to: ``cueaudit.inference.hf`` -> ``inference``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _module_name(path: Path, library: Path) -> str:
    return ".".join(path.relative_to(library.parent).with_suffix("").parts).removesuffix(
        ".__init__"
    )


def _imports(path: Path, library: Path) -> Iterator[tuple[int, str]]:
    """Every ``cueaudit`` module ``path`` imports, at the top or inside a function."""
    module = _module_name(path, library)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        yield from ((node.lineno, name) for name in names if name.startswith("cueaudit"))


def import_graph(library: Path = LIBRARY) -> dict[str, dict[str, list[str]]]:
    """part -> the other parts it imports -> where (``file:line``)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(library.rglob("*.py")):
        source = _part(_module_name(path, library))
        for line, name in _imports(path, library):
            target = _part(name)
            if target != source:
                where = f"{path.relative_to(library.parent)}:{line}"
                graph.setdefault(source, {}).setdefault(target, []).append(where)
    return graph


def circles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Every import circle between parts, each as the parts along it (first one repeated)."""
    found = []
    for start in sorted(graph):
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for target in sorted(graph.get(node, {})):
                if target == start:
                    found.append([*path, start])
                elif target not in path and target > start:
                    stack.append((target, [*path, target]))
    return found


def test_the_shared_parts_never_import_a_study_or_the_registry() -> None:
    offending = [
        f"{where}: {source} imports {target}"
        for source, targets in import_graph().items()
        if source not in STUDY_PACKAGES and source != REGISTRY_MODULE
        for target, places in targets.items()
        if target in STUDY_PACKAGES or target == REGISTRY_MODULE
        for where in places
    ]
    assert offending == []


def test_no_study_imports_another() -> None:
    graph = import_graph()
    offending = [
        f"{where}: {study} imports {other}"
        for study in STUDY_PACKAGES
        for other, places in graph.get(study, {}).items()
        if other in STUDY_PACKAGES
        for where in places
    ]
    assert offending == []


def test_no_two_parts_of_the_library_import_each_other() -> None:
    graph = import_graph()
    described = [
        " -> ".join(circle)
        + "  ("
        + "; ".join(graph[a][b][0] for a, b in itertools.pairwise(circle))
        + ")"
        for circle in circles(graph)
    ]
    assert described == []


def test_the_import_checks_can_fail(tmp_path: Path) -> None:
    library = tmp_path / "cueaudit"
    for part, body in {
        "config": "from cueaudit.probing.study import STUDY\n",
        "models": "from cueaudit.inference.core import Request\n",
        "inference/core": "from cueaudit import models\n",
        "probing/study": "",
    }.items():
        path = library / f"{part}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    graph = import_graph(library)
    assert graph["config"] == {"probing": ["cueaudit/config.py:1"]}
    assert graph["models"] == {"inference": ["cueaudit/models.py:1"]}
    assert circles(graph) == [["inference", "models", "inference"]]


#: Shared files that must not name a study: they read every study from the registry.
STUDY_BLIND_FILES = (
    "src/cueaudit/config.py",
    "src/cueaudit/store.py",
    "src/cueaudit/report.py",
    "src/cueaudit/study.py",
    "workflow/rules/common.smk",
    "workflow/rules/database.smk",
    "workflow/rules/inference.smk",
    "workflow/rules/parsing.smk",
    "workflow/scripts/build_database.py",
    "workflow/schemas/config.schema.yaml",
)


@pytest.mark.parametrize("relative", STUDY_BLIND_FILES)
def test_a_shared_file_names_no_study(relative: str) -> None:
    text = (ROOT / relative).read_text(encoding="utf-8")
    named = [
        f"line {number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        for study in STUDIES
        if re.search(rf"\b{study}\b", line)
    ]
    assert named == []


def _enum(schema: dict, *path: str) -> list[str]:
    node = schema
    for key in path:
        node = node[key]
    return list(node["enum"])


def test_the_schema_enumerates_what_the_registries_hold() -> None:
    from cueaudit.cues import REGISTRY as CUE_TYPES
    from cueaudit.decision.formats import DOMAINS
    from cueaudit.decision.tasks import TASKS
    from cueaudit.inference.backends import BACKENDS
    from cueaudit.parsing.kinds import KINDS

    schema = study_schema(SCHEMA, STUDIES)
    model = schema["properties"]["models"]["additionalProperties"]["properties"]
    assert sorted(_enum(model, "backend")) == sorted(BACKENDS)
    probing_task = schema["properties"]["probing"]["properties"]["tasks"]["additionalProperties"]
    assert set(_enum(probing_task["properties"], "outcome")) <= set(KINDS)
    design = schema["$defs"]["decision_design"]["properties"]
    assert _enum(design["domains"], "items") == list(DOMAINS)
    assert _enum(design["tasks"], "items") == list(TASKS)
    cue_blocks = set(schema["properties"]["cues"]["properties"])
    assert cue_blocks == {cue_type.config_key for cue_type in CUE_TYPES}


def test_each_study_block_has_its_schema_and_the_shared_one_has_none() -> None:
    shared = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    assert not set(shared["properties"]) & set(STUDIES)
    composed = study_schema(SCHEMA, STUDIES)
    for name, study in STUDIES.items():
        assert composed["properties"][name]["type"] == "object", study.schema


#: A backticked file or folder name in the architecture page (``hf.py``, ``decision/analysis/``,
#: ``workflow/rules/common.smk``).
_NAMED_PATH = re.compile(r"`([A-Za-z0-9_./<>-]+?(?:\.(?:py|smk|yaml|md|rst|R)|/))`")
#: A backticked dotted module (``cueaudit.decision.views``).
_NAMED_MODULE = re.compile(r"`(cueaudit(?:\.[a-z_][a-z0-9_]*)+)")


def missing_from_architecture(text: str, files: list[str]) -> list[str]:
    """The files, folders and modules the page names that the repository does not have (a
    bare name counts when some file or folder ends with it; ``<placeholders>`` are skipped)."""
    folders = {str(Path(f).parent) + "/" for f in files} | {
        str(parent) + "/" for f in files for parent in Path(f).parents
    }
    every = [*files, *folders]
    missing = []
    for name in _NAMED_PATH.findall(text):
        if "<" in name or name.startswith("results/"):
            continue
        bare = name.removeprefix("./")
        if not any(path == bare or path.endswith("/" + bare) for path in every):
            missing.append(name)
    for module in _NAMED_MODULE.findall(text):
        path = "src/" + module.replace(".", "/")
        # a module, a package, or a name defined in a module
        known = {f"{path}.py", f"{path}/__init__.py", f"{path.rpartition('/')[0]}.py"}
        if not known & set(files):
            missing.append(module)
    return missing


def test_every_module_the_architecture_page_names_exists() -> None:
    text = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    assert missing_from_architecture(text, tracked_files()) == []


def test_the_architecture_check_can_fail() -> None:
    files = ["src/cueaudit/inference/hf.py", "src/cueaudit/inference/__init__.py"]
    text = "`hf.py`, `inference/`, `cueaudit.inference.hf`, `gone.py`, `cueaudit.inference.gone`"
    assert missing_from_architecture(text, files) == ["gone.py", "cueaudit.inference.gone"]


_RULE = re.compile(r"^(?:(?:rule|checkpoint) (\w+):|use rule \w+ as (\w+))", re.MULTILINE)


def unknown_profile_rules(profile: dict, rules: set[str]) -> list[str]:
    """Rule names a profile's ``groups``, ``set-resources`` and ``set-threads`` give that no
    rule of the workflow has (Snakemake ignores them: a renamed rule silently loses its
    partition, GPU or group)."""
    named = [
        rule
        for key in ("groups", "set-resources", "set-threads")
        for rule in profile.get(key) or {}
    ]
    return sorted(set(named) - rules)


def test_every_rule_a_profile_names_exists() -> None:
    sources = [ROOT / "Snakefile", *sorted((ROOT / "workflow/rules").rglob("*.smk"))]
    rules = {
        name for path in sources for names in _RULE.findall(path.read_text()) for name in names
    } - {""}
    # the decision analyses' and figures' rules are generated from their registry
    rules |= {row.rule for row in DECISION_ANALYSES.values()}
    rules |= {f"plot_decision_{name}" for name in DECISION_FIGURES}
    assert {"generate_responses", "generate_seed_responses", "estimate_decision_contrasts"} <= rules
    for path in sorted((ROOT / "profiles").glob("*/config*.yaml")):
        assert unknown_profile_rules(yaml.safe_load(path.read_text()), rules) == [], path
    misspelt = {"groups": {"estimate_decision_contrast": "decision_analysis"}}
    assert unknown_profile_rules(misspelt, rules) == ["estimate_decision_contrast"]


#: Library code that may start processes: inference (vLLM's engine, spawned where it runs
#: apart). A script importing it, or handing work to processes (``workers=``: the
#: specification curve's relabellings), runs under a __main__ guard, since a spawned process
#: imports the script again, without Snakemake's `snakemake` object.
#: Modules whose work may spawn processes: inference (vLLM's engine), the decision analyses
#: (the specification curve's workers).
SPAWNING = {"cueaudit.inference.runner", "cueaudit.decision.analysis.registry"}


def _script_imports(script: Path) -> set[str]:
    """The ``cueaudit`` modules a workflow script imports (absolute imports only)."""
    return {
        node.module
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cueaudit")
    }


def _hands_out_work(script: Path) -> bool:
    tree = ast.parse(script.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.keyword) and node.arg == "workers" for node in ast.walk(tree))


def _unguarded_work(script: Path) -> list[int]:
    """Lines of the script's top level that run outside an ``if __name__ == "__main__":``."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    lines = []
    for node in tree.body:
        if isinstance(node, ast.Import) and [a.name for a in node.names] == ["_library"]:
            continue
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            continue
        lines.append(node.lineno)
    return lines


def test_scripts_that_may_start_processes_run_under_a_main_guard() -> None:
    scripts = sorted((ROOT / "workflow/scripts").glob("*.py"))
    spawning = [s for s in scripts if _script_imports(s) & SPAWNING or _hands_out_work(s)]
    names = {s.name for s in spawning}
    assert {
        "generate_responses.py",
        "generate_seed_responses.py",
        "run_decision_analysis.py",
    } <= names
    unguarded = {s.name: lines for s in spawning if (lines := _unguarded_work(s))}
    assert not unguarded, f"work outside `if __name__ == '__main__':` (script: lines): {unguarded}"


def test_the_main_guard_check_sees_work_outside_the_guard(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text("import _library\nfrom cueaudit.io import setup_logging\nrun()\n")
    assert _unguarded_work(script) == [2, 3]
    script.write_text("import _library\nif __name__ == '__main__':\n    run()\n")
    assert _unguarded_work(script) == []


#: A module longer than this says in its docstring why it is one module.
LONG_MODULE_LINES = 500


def long_modules_without_a_reason(library: Path) -> list[str]:
    """The library's modules over :data:`LONG_MODULE_LINES` lines whose docstring does not
    say "One module on purpose"."""
    found = []
    for path in sorted(library.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > LONG_MODULE_LINES:
            docstring = ast.get_docstring(ast.parse(text)) or ""
            if "One module on purpose" not in docstring:
                found.append(str(path.relative_to(library)))
    return found


def test_a_long_module_says_why_it_is_one(tmp_path: Path) -> None:
    assert long_modules_without_a_reason(LIBRARY) == []
    long = tmp_path / "long.py"
    long.write_text('"""A long module."""\n' + "x = 1\n" * LONG_MODULE_LINES)
    (tmp_path / "short.py").write_text('"""Short."""\n')
    assert long_modules_without_a_reason(tmp_path) == ["long.py"]
    long.write_text('"""A long module.\n\nOne module on purpose: ..."""\n' + "x = 1\n" * 600)
    assert long_modules_without_a_reason(tmp_path) == []
