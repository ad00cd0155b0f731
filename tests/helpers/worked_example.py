"""The worked examples of docs/architecture.md, applied as written to a copy of the repository
(the tests of "Adding a cue type" and "Adding a decision analysis")."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs/architecture.md"


def code_blocks(heading: str, languages: list[str]) -> list[str]:
    """The code blocks of the page's section ``heading``, which must be in ``languages``."""
    section = PAGE.read_text(encoding="utf-8").split(f"\n## {heading}\n")[1]
    blocks = re.findall(r"^```(\w+)\n(.*?)^```", section.split("\n## ")[0], re.DOTALL | re.M)
    assert [language for language, _ in blocks] == languages
    return [code for _, code in blocks]


def tracked_files() -> list[str]:
    """The repository's files as git sees them: tracked, and untracked but not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [path for path in listed.stdout.splitlines() if (ROOT / path).exists()]


def copy_repository(target: Path) -> None:
    """The repository's files as git sees them, without results/."""
    for relative in tracked_files():
        source = ROOT / relative
        if source.is_file() and not relative.startswith("results/"):
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / relative)


def insert_after(text: str, anchor: str, addition: str) -> str:
    """``addition`` after ``anchor``, which must be in ``text`` once."""
    assert text.count(anchor) == 1, f"{anchor!r} is not in the file exactly once"
    return text.replace(anchor, anchor + addition)


def changed_files(repo: Path) -> set[str]:
    """Files of the copy that the repository lacks or holds with other bytes."""
    return {
        str(path.relative_to(repo))
        for path in repo.rglob("*")
        if path.is_file()
        and not (
            (ROOT / path.relative_to(repo)).is_file()
            and (ROOT / path.relative_to(repo)).read_bytes() == path.read_bytes()
        )
    }
