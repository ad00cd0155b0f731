"""Base-prompt augmentation (§3.1): the paper's counts, the resampling rule, the shipped
components and the errors of bad component files."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from cueaudit.config import check_input_files, validate_config
from cueaudit.errors import InputError
from cueaudit.probing.augmentation import augment_files, run_augmentation
from cueaudit.probing.base_prompts import load_base_prompts
from cueaudit.studies import STUDIES
from tests.conftest import ROOT, SnakemakeRunner, tiny_config, write_config

COMPONENTS = ROOT / "resources/prompts/components"
SHIPPED = ROOT / "resources/prompts"
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
YES_NO = "Respond with either 'Yes' or 'No' and no additional text."


def write_part(path: Path, rows: list[tuple[str, str]], header: tuple[str, ...] = ("id", "text")):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


def paper_components(tmp_path: Path) -> dict[str, tuple[Path, Path, int | None]]:
    """Synthetic components of the paper's sizes: task -> (templates, component, total)."""
    symptoms = [
        (f"s{i:03d}", f"I have had symptom {i} for a day. {{question}} {YES_NO}")
        for i in range(185)
    ]
    questions = [(f"q{i:02d}", f"Should I see care option {i}?") for i in range(24)]
    profiles = [
        (f"p{i:03d}", f"I have a job offer to work as job {i} in {{city}}. What salary?")
        for i in range(100)
    ]
    scenarios = [
        (f"l{i:03d}", f"I live in {{city}}. Is scenario {i} legal? {YES_NO}") for i in range(197)
    ]
    return {
        "healthcare": (
            write_part(tmp_path / "h/symptoms.csv", symptoms),
            write_part(tmp_path / "h/questions.csv", questions),
            None,
        ),
        "salary": (
            write_part(tmp_path / "s/profiles.csv", profiles),
            write_part(
                tmp_path / "s/cities.csv", [(f"c{i:02d}", f"City {i}, ST") for i in range(66)]
            ),
            5000,
        ),
        "legal": (
            write_part(tmp_path / "l/scenarios.csv", scenarios),
            write_part(
                tmp_path / "l/cities.csv", [(f"c{i:02d}", f"Town {i}, State") for i in range(63)]
            ),
            5000,
        ),
    }


def build(parts: tuple[Path, Path, int | None], task: str, seed: int = 0) -> pl.DataFrame:
    templates, component, total = parts
    name = "question" if task == "healthcare" else "city"
    return augment_files(task, templates, {name: component}, total=total, seed=seed)


def test_the_papers_component_sizes_give_its_counts(tmp_path: Path) -> None:
    parts = paper_components(tmp_path)
    healthcare = build(parts["healthcare"], "healthcare")
    assert healthcare.height == 4440 == 185 * 24
    assert healthcare.select("template_id", "question_id").n_unique() == 4440
    salary = build(parts["salary"], "salary")
    legal = build(parts["legal"], "legal")
    assert salary.height == legal.height == 5000
    # each profile 5000 / 100 = 50 of the 66 cities; each scenario 25 or 26 of the 63
    assert set(salary.group_by("template_id").len()["len"]) == {50}
    per_scenario = Counter(legal.group_by("template_id").len()["len"].to_list())
    assert per_scenario == {25: 197 - 5000 % 197, 26: 5000 % 197}
    assert legal["template_id"].n_unique() == 197
    for frame in (healthcare, salary, legal):
        ids = [c for c in frame.columns if c.endswith("_id") and c != "base_id"]
        assert frame.select(ids).n_unique() == frame.height  # no repeated pair
        assert frame["base_id"].n_unique() == frame["text"].n_unique() == frame.height
        assert not frame["text"].str.contains(r"\{").any()
    # the text is the template with the component filled in
    row = salary.filter(pl.col("base_id") == salary["base_id"][0]).row(0, named=True)
    number = int(row["city_id"][1:])
    job = int(row["template_id"][1:])
    assert (
        row["text"] == f"I have a job offer to work as job {job} in City {number}, ST. What salary?"
    )
    assert row["base_id"] == f"salary-{row['template_id']}-{row['city_id']}"


def test_resampling_is_seeded_and_independent_of_file_order(tmp_path: Path) -> None:
    parts = paper_components(tmp_path)
    first = build(parts["legal"], "legal", seed=0)
    assert first.equals(build(parts["legal"], "legal", seed=0))
    other = build(parts["legal"], "legal", seed=1)
    assert set(other["base_id"]) != set(first["base_id"])
    templates, cities, total = parts["legal"]
    lines = templates.read_text().splitlines()
    shuffled = write_part(
        tmp_path / "l/reversed.csv", [tuple(next(csv.reader([x]))) for x in reversed(lines[1:])]
    )
    reordered = build((shuffled, cities, total), "legal", seed=0)
    assert set(reordered["base_id"]) == set(first["base_id"])
    # a template keeps its cities when another template is dropped (it is seeded by its id)
    fewer = write_part(tmp_path / "l/fewer.csv", [tuple(next(csv.reader([x]))) for x in lines[2:]])
    dropped = build((fewer, cities, 196 * 25), "legal", seed=0)
    # (each gets 25 now; those that had 26 keep 25 of their 26)
    counts = dict(first.group_by("template_id").len().iter_rows())
    had_26 = [t for t, n in counts.items() if n == 26 and t != "l000"]
    assert len(had_26) >= 70
    for template in [*had_26[:5], "l100", "l196"]:
        kept = set(dropped.filter(pl.col("template_id") == template)["city_id"])
        before = set(first.filter(pl.col("template_id") == template)["city_id"])
        assert len(kept) == 25 and kept <= before


def test_total_beyond_the_distinct_pairs_is_refused(tmp_path: Path) -> None:
    templates, cities, _ = paper_components(tmp_path)["salary"]
    with pytest.raises(InputError) as err:
        augment_files("salary", templates, {"city": cities}, total=6601)
    assert str(err.value) == (
        "config: field 'probing.tasks.salary.augment.total': total 6601: must be between 1 and "
        "the 100 templates x 66 combinations = 6600 distinct prompts"
    )
    assert augment_files("salary", templates, {"city": cities}, total=6600).height == 6600


def shipped(task: str, total: int | None = None, seed: int = 0) -> pl.DataFrame:
    templates, name, component = {
        "healthcare": ("healthcare/symptoms.csv", "question", "healthcare/questions.csv"),
        "salary": ("salary/profiles.csv", "city", "salary/cities.csv"),
        "legal": ("legal/scenarios.csv", "city", "legal/cities.csv"),
    }[task]
    return augment_files(
        task, COMPONENTS / templates, {name: COMPONENTS / component}, total=total, seed=seed
    )


def test_the_shipped_components_reproduce_the_shipped_sample() -> None:
    # healthcare: 10 symptom templates x 3 questions, the sample itself in its order
    sample = load_base_prompts(SHIPPED / "healthcare.csv", "healthcare")
    assert shipped("healthcare")["text"].to_list() == sample["text"].to_list()
    for task in ("salary", "legal"):
        sample = load_base_prompts(SHIPPED / f"{task}.csv", task)
        crossed = shipped(task)
        # 8 templates x all 12 cities: a superset of the sample's 3 cities per template
        assert crossed.height == 96
        assert set(sample["text"]) <= set(crossed["text"])
        # every component is used by the sample
        used = crossed.filter(pl.col("text").is_in(sample["text"].implode()))
        assert used["template_id"].n_unique() == 8 and used["city_id"].n_unique() == 12
        drawn = shipped(task, total=24, seed=0)
        assert set(drawn.group_by("template_id").len()["len"]) == {3}


def test_the_rule_output_is_a_base_prompt_file(tmp_path: Path) -> None:
    out = tmp_path / "results/prompts/base/legal.csv"
    written = run_augmentation(
        "legal",
        COMPONENTS / "legal/scenarios.csv",
        {"city": COMPONENTS / "legal/cities.csv"},
        out,
        total=24,
        seed=0,
    )
    back = load_base_prompts(out, "legal")
    assert back.equals(written.select("base_id", "task", "text"))
    assert pl.read_csv(out).columns == ["base_id", "task", "text", "template_id", "city_id"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing-column", "id,prompt\nc1,Boston\n", "field 'text': required column missing"),
        ("empty", "", "file is empty"),
        ("header-only", "id,text\n", "no data rows below the header"),
        (
            "duplicate-id",
            "id,text\nc1,Boston\nc2,Austin\nc1,Denver\n",
            "field 'id': line 4: duplicate id 'c1' (first at line 2)",
        ),
        ("empty-id", "id,text\n,Boston\n", "field 'id': line 2: empty id"),
        ("empty-text", "id,text\nc1,\n", "field 'text': line 2: empty text for id 'c1'"),
        (
            "repeated-text",
            "id,text\nc1,Boston\nc2,Boston\n",
            "field 'text': line 3: the text of id 'c2' repeats line 2",
        ),
        (
            "id-with-space",
            "id,text\nnew york,New York\n",
            "field 'id': line 2: id 'new york' must be letters",
        ),
        (
            "cue-text",
            "id,text\nc1,USER: Boston\n",
            "field 'text': line 2: the text of id 'c1' contains the cue template text 'USER:'",
        ),
    ],
)
def test_bad_component_files_are_named(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    templates = write_part(tmp_path / "t.csv", [("t1", "I live in {city}. Is it legal?")])
    bad = tmp_path / f"{name}.csv"
    bad.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as err:
        augment_files("legal", templates, {"city": bad})
    assert str(err.value).startswith(f"{bad}: ")
    assert message in str(err.value)


def test_a_template_without_its_placeholder_is_named(tmp_path: Path) -> None:
    cities = write_part(tmp_path / "c.csv", [("c1", "Boston, MA")])
    templates = write_part(
        tmp_path / "t.csv",
        [("t1", "I live in {city}. Is it legal?"), ("t2", "I live in Boston. Is it legal?")],
    )
    with pytest.raises(InputError) as err:
        augment_files("legal", templates, {"city": cities})
    assert str(err.value) == (
        f"{templates}: field 'text': line 3: template 't2' lacks the placeholder {{city}} "
        "(components: city)"
    )
    typo = write_part(tmp_path / "u.csv", [("t1", "I live in {cty} near {city}.")])
    with pytest.raises(InputError, match=r"line 2: template 't1' has the placeholder \{cty\}"):
        augment_files("legal", typo, {"city": cities})


def test_ids_that_join_into_the_same_base_id_are_refused(tmp_path: Path) -> None:
    templates = write_part(tmp_path / "t.csv", [("a", "{x} and {y}.")])
    xs = write_part(tmp_path / "x.csv", [("b-c", "one"), ("b", "two")])
    ys = write_part(tmp_path / "y.csv", [("d", "three"), ("c-d", "four")])
    with pytest.raises(InputError, match="two prompts get the base id 'legal-a-b-c-d'"):
        augment_files("legal", templates, {"x": xs, "y": ys})


def augmented_config(**augment: object) -> dict:
    config = tiny_config()
    spec = config["probing"]["tasks"]["salary"]
    del spec["base_prompts"]
    spec["augment"] = {
        "templates": str(COMPONENTS / "salary/profiles.csv"),
        "components": {"city": str(COMPONENTS / "salary/cities.csv")},
        **augment,
    }
    return config


def test_the_config_takes_augment_instead_of_base_prompts(tmp_path: Path) -> None:
    config = augmented_config(total=24)
    validate_config(config, SCHEMA, STUDIES)
    assert config["probing"]["tasks"]["salary"]["augment"]["seed"] == 0
    check_input_files(config, STUDIES)
    config["probing"]["tasks"]["salary"]["augment"]["components"]["city"] = str(tmp_path / "no.csv")
    with pytest.raises(
        InputError, match=r"probing.tasks.salary.augment.components.city: not found"
    ):
        check_input_files(config, STUDIES)
    both = augmented_config()
    both["probing"]["tasks"]["salary"]["base_prompts"] = str(SHIPPED / "salary.csv")
    neither = augmented_config()
    del neither["probing"]["tasks"]["salary"]["augment"]
    for config in (both, neither):
        with pytest.raises(InputError) as err:
            validate_config(config, SCHEMA, STUDIES)
        assert (
            "config key probing.tasks.salary: expected an advice task whose base prompts come "
            "from exactly one of base_prompts" in str(err.value)
        )
    bad = augmented_config(total=0)
    bad["probing"]["tasks"]["salary"]["augment"]["components"]["template"] = "x.csv"
    with pytest.raises(InputError) as err:
        validate_config(bad, SCHEMA, STUDIES)
    assert "probing.tasks.salary.augment.total" in str(err.value)
    assert "probing.tasks.salary.augment.components" in str(err.value)


@pytest.mark.e2e
def test_the_workflow_builds_augmented_base_prompts_first(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    write_config(tmp_path, augmented_config(total=24, seed=3))
    plan = run_snakemake(tmp_path, "--dry-run", "results/prompts/salary.parquet")
    assert "augment_base_prompts" in plan.stdout and "expand_prompts" in plan.stdout
    run_snakemake(tmp_path, "results/prompts/base/salary.csv")
    written = pl.read_csv(tmp_path / "results/prompts/base/salary.csv")
    assert written.height == 24
    assert written.equals(shipped("salary", total=24, seed=3))
