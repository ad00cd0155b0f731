"""The README stays a front door: its two commands verbatim, its "Audit your own model" snippets
well-formed (tests/e2e/test_readme_own_model.py runs them), and every link of the README and
docs/ pointing at a file and heading that exist."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
import yaml

from tests.helpers.readme import README, ROOT, job_table, parse_dry_run, readme_snippets, snippets

#: The README's commands, as .ci/run and a new user run them.
MAIN_JOB = "bash scripts/install.sh && .venv/bin/snakemake --cores 2"
TESTS = "bash scripts/install.sh --test && .venv/bin/python -m pytest -n 2"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_gives_the_two_commands_verbatim() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    assert [block.strip() for block in blocks[:2]] == [MAIN_JOB, TESTS]


def test_the_readme_is_a_front_door() -> None:
    """What cueaudit is comes first, and "Audit your own model" within the first screenful
    (the README before this issue: 239 long lines, 6,402 words, no such section)."""
    text = README.read_text(encoding="utf-8")
    assert text.splitlines()[2].startswith("cueaudit audits how large language models")
    before = text[: text.index("\n## Audit your own model\n")]
    assert len(before.split()) < 400
    assert len(text.splitlines()) < 200


def test_every_dry_run_has_its_config_and_every_file_parses() -> None:
    found = readme_snippets()
    dry_runs = {name for kind, name in found if kind == "dry-run"}
    files = {name for kind, name in found if kind == "file"}
    assert dry_runs == {"my-endpoint.yaml", "my-vllm.yaml", "my-study.yaml"}
    assert dry_runs <= files
    for (kind, name), body in found.items():
        if kind == "dry-run":
            run = parse_dry_run(body)
            assert run.command[:2] == ["--configfile", name] and "-n" in run.command
            inference = {
                "generate_responses",
                "generate_seed_responses",
                "generate_api_responses",
            } & set(run.jobs)
            assert inference and "prepare_model" in run.jobs, name
        elif name.endswith(".yaml"):
            config = yaml.safe_load(body)
            assert {"cues", "models", "seeds"} <= set(config), name
        elif name.endswith(".csv"):
            rows = list(csv.DictReader(io.StringIO(body)))
            assert rows and set(rows[0]) == {"base_id", "text"}, name


def test_the_snippet_reader_refuses_a_broken_marker() -> None:
    good = "<!-- snippet: file a.yaml -->\n```yaml\nx: 1\n```\n<!-- /snippet -->\n"
    assert snippets(good) == {("file", "a.yaml"): "x: 1\n"}
    with pytest.raises(ValueError, match="without its fenced block"):
        snippets(good.replace("<!-- /snippet -->", ""))
    with pytest.raises(ValueError, match="unknown kind"):
        snippets(good.replace("file a.yaml", "config a.yaml"))
    with pytest.raises(ValueError, match="shows its job table's total"):
        parse_dry_run("$ snakemake -n\njob  count\ngenerate_responses  2\n")


def test_the_job_table_is_read_from_snakemake_output() -> None:
    output = (
        "Building DAG of jobs...\nJob stats:\njob                   count\n"
        "------------------  -------\nprepare_model             1\n"
        "generate_responses        2\ntotal                     3\n\nReasons:\n"
    )
    assert job_table(output) == ({"prepare_model": 1, "generate_responses": 2}, 3)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def broken_links(page: Path) -> list[str]:
    """The relative links of a Markdown page whose file, or heading in it, does not exist."""
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.MULTILINE)
            if anchor not in {_slug(h) for h in headings}:
                broken.append(target)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_points_at_a_file_and_heading_that_exist(page: Path) -> None:
    assert broken_links(page) == []


def test_the_link_check_can_fail(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# A heading, here\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-heading-here) [gone](gone.md) [bad](other.md#nope) "
        "[web](https://example.org) [self](#top)\n# Top\n",
        encoding="utf-8",
    )
    assert broken_links(page) == ["gone.md", "other.md#nope"]
