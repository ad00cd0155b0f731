"""Regenerate benchmarks/README.md's tables from the benchmarks' JSON.

Every block between ``<!-- table: NAME -->`` and ``<!-- /table -->`` becomes
``render_table(json.load(benchmarks/results/NAME.json))`` of the module benchmarks/NAME.py;
a block whose JSON is missing says so. Everything outside the blocks is left as it is. A
benchmark's ``--smoke`` run writes its JSON under the temp folder, so only full runs reach the
tables.

    python benchmarks/readme.py            # rewrite the README in place
    python benchmarks/readme.py --check    # exit 1 if the README is not what the JSON renders
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parent
README = BENCHMARKS / "README.md"
RESULTS = BENCHMARKS / "results"

BLOCK = re.compile(
    r"(?P<open><!-- table: (?P<name>[A-Za-z0-9_]+) -->\n)(?P<body>.*?)(?P<close><!-- /table -->)",
    re.DOTALL,
)


def _module(name: str) -> ModuleType:
    """benchmarks/NAME.py, imported (its main() does not run)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(
        BENCHMARKS / f"{name}.py"
    ):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    if spec is None or spec.loader is None:
        raise FileNotFoundError(BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def render_block(name: str, results_dir: Path = RESULTS) -> str:
    """The Markdown of one block: NAME's table from its JSON, or a line saying it is missing."""
    path = results_dir / f"{name}.json"
    if not path.is_file():
        return f"Not measured yet: run `python benchmarks/{name}.py`."
    results = json.loads(path.read_text(encoding="utf-8"))
    return _module(name).render_table(results).strip("\n")


def blocks(text: str) -> list[str]:
    """The names of the README's blocks, in order."""
    return [m["name"] for m in BLOCK.finditer(text)]


def render(text: str, results_dir: Path = RESULTS) -> str:
    """``text`` (a README) with every block replaced by what its JSON renders."""

    def replace(match: re.Match[str]) -> str:
        body = render_block(match["name"], results_dir)
        return f"{match['open']}{body}\n{match['close']}"

    return BLOCK.sub(replace, text)


def differing(text: str, results_dir: Path = RESULTS) -> list[str]:
    """The names of the blocks of ``text`` that are not what their JSON renders."""
    old = list(BLOCK.finditer(text))
    new = list(BLOCK.finditer(render(text, results_dir)))
    return [a["name"] for a, b in zip(old, new, strict=True) if a["body"] != b["body"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    text = args.readme.read_text(encoding="utf-8")
    if not blocks(text):
        print(f"{args.readme}: no <!-- table: NAME --> blocks", file=sys.stderr)
        return 1
    new = render(text)
    if args.check:
        stale = differing(text)
        if stale or new != text:
            print(
                f"{args.readme} is not what the JSON renders: block(s) {', '.join(stale)}; "
                "run python benchmarks/readme.py",
                file=sys.stderr,
            )
            return 1
        print(f"{args.readme}: {len(blocks(text))} blocks up to date")
        return 0
    if new != text:
        args.readme.write_text(new, encoding="utf-8")
        print(f"rewrote {args.readme}: {', '.join(blocks(text))}")
    else:
        print(f"{args.readme}: up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
