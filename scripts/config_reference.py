"""Write docs/configuration-reference.md from the config schemas.

    python scripts/config_reference.py            # rewrite the page
    python scripts/config_reference.py --check    # exit 1 if the page is not what they render

The page lists every key of the shared schema and of each registered study's block schema
(cueaudit.config_reference.render over cueaudit.config.study_schema).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cueaudit.config import study_schema  # noqa: E402
from cueaudit.config_reference import render  # noqa: E402
from cueaudit.studies import STUDIES  # noqa: E402

SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
PAGE = ROOT / "docs/configuration-reference.md"


def reference() -> str:
    """The page the schemas render now."""
    return render(study_schema(SCHEMA, STUDIES))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check the page is up to date")
    args = parser.parse_args(argv)
    text = reference()
    if args.check:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.relative_to(ROOT)} is stale: run python scripts/config_reference.py")
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
