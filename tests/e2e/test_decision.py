"""The decision audit end to end on the packaged SmolLM2, on a tiny design."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import polars as pl
import pytest
import yaml

from cueaudit.decision.design_settings import expected_counts
from tests.conftest import ROOT, SnakemakeRunner, assert_join_keys_unique, tiny_config, write_config

pytestmark = pytest.mark.e2e

TASKS = [
    "decision_rate_text",
    "decision_decide_tool",
    "decision_rank_json",
    "decision_probe_choice",
    "decision_probe_free",
]
ANALYSIS_TABLES = [
    "outcome_summary",
    "composition",
    "nonresponse",
    "nonresponse_tests",
    "contrasts",
    "interactions",
    "placebo",
    "leave_one_out",
    "extension_contrasts",
    "planted",
    "position",
    "ties",
    "recognition",
    "agreement",
]
# Per model, mode and paraphrase (exploratory), and the per-model forest.
ANALYSIS_TABLES += ["contrasts_by", "heterogeneity", "intersectional", "mode_differences"]
# the verdict across the design's own choices (exploratory)
ANALYSIS_TABLES += ["specification_curve", "specification_summary"]
# the extension arms' own analyses (empty here: the design has no extension)
ANALYSIS_TABLES += ["composition_flags", "wording", "reasoning_paired"]
# ties and recognition by bundle type; position against demographics (empty here: no
# position-balanced bundles)
ANALYSIS_TABLES += ["recognition_ties_by_type", "position_vs_demographics"]
# cue types beyond name pairs (empty here: the design shows name pairs only)
ANALYSIS_TABLES += ["cue_contrasts", "cue_validity"]
CALLS = re.compile(r"model calls: (\d+), cache hits: (\d+)")
#: The table whose label says whether the design was changed after the lock.
CONTRASTS_TABLE = "results/tables/decision_contrasts.csv"
#: FairFund-Bench's stimuli where the workspace keeps them (the paper config's aid arm).
FAIRFUND = ROOT.parent / "shared/data/fairfund/stimuli.csv"


def decision_config(profiles_per_tier: int = 1) -> dict:
    design = {
        "prompts": str(ROOT / "resources/decision/prompts.yaml"),
        "domains": ["hiring"],
        "paraphrases": 1,
        "profiles_per_tier": profiles_per_tier,
        "names_per_cell": 1,
        "bundles_per_type": {
            "demographic_matched": 4,
            "irrelevant_matched": 4,
            "disguised_demographic": 12,
            "disguised_placebo": 12,
        },
        "probe_bundles": 4,
        "tasks": TASKS,
    }
    files = {
        "profiles": "resources/decision/profiles.jsonl",
        "name_pairs": "resources/names/elder_hayes_pairs.csv",
        "hobbies": "resources/decision/hobbies.txt",
        "neighbourhoods": "resources/decision/neighbourhoods.txt",
        "demographic_terms": "resources/decision/demographic_terms.txt",
        "preregistration": "config/decision/preregistration.yaml",
    }
    return {
        "cues": {},
        # one inference job per seed answers every task, as the main job does: the engine
        # starts once per run, not once per task
        "models": {
            name: {**model, "inference_jobs": "per_seed"}
            for name, model in tiny_config()["models"].items()
        },
        "seeds": [0],
        "decoding": tiny_config()["decoding"],
        "decision": {
            **{k: str(ROOT / v) for k, v in files.items()},
            "design": design,
            # the curve's tables, not its calibration (tests/unit): few relabellings
            "analysis": {"specification_curve": {"permutations": 9}},
        },
    }


def calls(workdir: Path, task: str) -> tuple[int, int]:
    """The model calls and cache hits of ``task`` in the seed job's last run (its log says
    "task i of n: <task>" before each task's lines)."""
    log = (workdir / "logs/inference/smollm2-135m/seed0.log").read_text()
    sections = re.split(r"task \d+ of \d+: (\S+)\n", log)
    lines = [CALLS.findall(sections[i + 1]) for i, name in enumerate(sections) if name == task]
    assert lines and lines[-1], f"no model-call line for {task} in the seed log"
    return int(lines[-1][-1][0]), int(lines[-1][-1][1])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("decision")
    write_config(path, decision_config())
    return path


def test_every_format_and_probe_produces_outcomes(
    workdir: Path, run_snakemake: SnakemakeRunner
) -> None:
    first = run_snakemake(workdir)
    assert "decision audit: 112 prompts per model x seed" in first.stderr
    lock = yaml.safe_load((workdir / "results/decision/preregistration.lock").read_text())
    assert len(lock["preregistration"]["sha256"]) == 64
    assert set(lock["files"]) == {
        "profiles", "name_pairs", "hobbies", "neighbourhoods", "demographic_terms", "prompts",
    }  # fmt: skip
    summary = pl.read_csv(workdir / "results/tables/decision_outcome_summary.csv")
    rows = {row["task"]: row for row in summary.iter_rows(named=True)}
    assert set(rows) == set(TASKS)
    assert {t: rows[t]["n_responses"] for t in TASKS} == {
        "decision_rate_text": 24,
        "decision_decide_tool": 24,
        "decision_rank_json": 32,
        "decision_probe_choice": 16,
        "decision_probe_free": 16,
    }
    # constrained answers (a JSON ranking, a forced tool call) always parse
    for task in ("decision_rank_json", "decision_decide_tool"):
        assert (
            rows[task]["parse_rate"] == 1.0
            and rows[task]["n_constrained"] == rows[task]["n_responses"]
        )
    assert rows["decision_decide_tool"]["n_tool_calls"] == 24
    # option scores give every rating prompt an expected rating, parsed or not
    con = duckdb.connect(str(workdir / "results/cueaudit.duckdb"), read_only=True)
    low, high, n = con.sql(
        "SELECT min(expected_rating), max(expected_rating), count(expected_rating) "
        "FROM decision_outcomes WHERE task = 'decision_rate_text'"
    ).fetchall()[0]
    assert n == 24 and 1.0 <= low <= high <= 5.0
    ranks = con.sql("SELECT ranks FROM decision_outcomes WHERE task = 'decision_rank_json'").pl()[
        "ranks"
    ]
    assert all(len(r) == 4 and set(r) <= {1, 2, 3, 4} for r in ranks.to_list())
    bundle_types = {
        r[0]
        for r in con.sql(
            "SELECT DISTINCT bundle_type FROM decision_outcomes WHERE task = 'decision_rank_json'"
        ).fetchall()
    }
    assert bundle_types == {
        "demographic_matched",
        "irrelevant_matched",
        "disguised_demographic",
        "disguised_placebo",
    }
    # every analysis is a table in the database, every figure a file
    tables = {r[0] for r in con.sql("SHOW TABLES").fetchall()}
    for name in ANALYSIS_TABLES:
        assert f"decision_{name}" in tables, name
    for name in ("forest", "planted", "position", "ties_recognition", "nonresponse",
                 "forest_by_model"):  # fmt: skip
        assert (workdir / f"results/figures/decision_{name}.png").stat().st_size > 10_000
    family = con.sql("SELECT * FROM decision_contrasts WHERE in_family").pl()
    assert family.height == 36 and family["pre_registered"].all()
    hiring = family.filter(pl.col("domain") == "hiring")
    assert hiring["estimate"].is_finite().all() and hiring["mde"].is_finite().all()
    # at this size no Rate or Rank contrast can resolve its margin: each verdict says so
    margined = hiring.filter(pl.col("margin").is_not_null())
    assert margined.height == 8 and (margined["mde"] > margined["margin"]).all()
    for row in margined.iter_rows(named=True):
        floor = f"inconclusive: MDE {row['mde']:.3f} exceeds margin {row['margin']:.3f}"
        assert row["verdict"] in (floor, "different"), row
    assert set(hiring.filter(pl.col("format") == "decide")["verdict"]) == {"no margin"}
    ties = con.sql("SELECT * FROM decision_ties WHERE domain = 'hiring'").pl()
    assert set(ties["bundle_type"]) >= {"demographic_matched", "disguised_demographic"}
    assert ((ties["ci_low"] <= ties["tie_rate"]) & (ties["tie_rate"] <= ties["ci_high"])).all()
    # the store's keys are unique and every task has the design's row count
    assert_join_keys_unique(con)
    counts = dict(con.sql("SELECT task, count(*) FROM outcomes GROUP BY task").fetchall())
    assert counts == expected_counts(decision_config()["decision"]["design"])
    planted = con.sql("SELECT * FROM decision_planted WHERE domain = 'hiring'").pl()
    assert set(planted["source"]) == {"real", "simulated"}
    assert set(planted["planted_sd"]) == {0.05, 0.10, 0.50}
    assert set(planted.filter(pl.col("format") == "rank")["estimator"]) == {"lmm", "rologit"}
    # the plant went through the parsers and both estimators: recovery is measured, so no
    # recovered size equals its planted one, and no rendered answer failed to parse
    measured = planted.filter(pl.col("recovered_sd").is_finite())
    assert measured.height >= 3 * 2 * 3
    assert ((measured["recovered_sd"] - measured["planted_sd"]).abs() > 1e-9).all()
    real = measured.filter(pl.col("source") == "real")
    assert (real["n_changed"] > 0).any() and (real["n_unparsed"] == 0).all()
    by_model = con.sql("SELECT * FROM decision_contrasts_by WHERE \"by\" = 'model'").pl()
    assert by_model.height == 12 and by_model["label"].str.starts_with("exploratory").all()
    placebo = con.sql("SELECT * FROM decision_placebo WHERE domain = 'hiring'").pl()
    assert set(placebo["estimator"]) == {"lmm", "rologit"} and "all" in set(placebo["mode"])
    con.close()


def test_the_report_holds_every_decision_table_and_figure(
    workdir: Path, run_snakemake: SnakemakeRunner
) -> None:
    report = workdir / "report.html"
    run_snakemake(workdir, "--report", str(report))
    html = report.read_text(encoding="utf-8", errors="replace")
    for name in [*ANALYSIS_TABLES, "forest", "ties_recognition"]:
        assert f"decision_{name}" in html, name


def test_second_run_is_a_no_op(workdir: Path, run_snakemake: SnakemakeRunner) -> None:
    again = run_snakemake(workdir, "decision", "--dry-run")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_more_profiles_run_the_model_only_on_new_prompts(
    workdir: Path, run_snakemake: SnakemakeRunner
) -> None:
    write_config(workdir, decision_config(profiles_per_tier=2))
    # the contrasts (read next) and the answers; the other analyses are the first run's
    run_snakemake(workdir, CONTRASTS_TABLE)
    assert calls(workdir, "decision_rate_text") == (24, 24)
    for task in ("decision_decide_tool", "decision_rank_json", "decision_probe_free"):
        made, hits = calls(workdir, task)
        assert made == (24 if task == "decision_decide_tool" else 0), task
        assert hits > 0


def _label(workdir: Path) -> str:
    labels = set(pl.read_csv(workdir / CONTRASTS_TABLE)["label"])
    assert len(labels) == 1, labels
    return labels.pop()


def test_a_design_changed_after_the_lock_is_exploratory(workdir: Path) -> None:
    """The previous test doubled the profiles per tier after the lock."""
    label = _label(workdir)
    assert label.startswith("exploratory: changed after the lock of "), label
    assert label.endswith("the design settings (design)"), label


def test_an_edited_pre_registration_elsewhere_never_relocks(
    workdir: Path, run_snakemake: SnakemakeRunner
) -> None:
    lock = workdir / "results/decision/preregistration.lock"
    before = lock.read_bytes()
    edited = workdir / "edited_preregistration.yaml"
    text = (ROOT / "config/decision/preregistration.yaml").read_text()
    edited.write_text(text.replace("rate: 0.090", "rate: 0.300"))
    config = decision_config(profiles_per_tier=2)
    config["decision"]["preregistration"] = str(edited)
    write_config(workdir, config)
    run_snakemake(workdir, CONTRASTS_TABLE)
    assert lock.read_bytes() == before
    label = _label(workdir)
    assert "the pre-registration path (" in label and f"{edited} now)" in label, label


def test_a_pre_registration_edited_in_place_relabels_in_the_same_run(
    workdir: Path, run_snakemake: SnakemakeRunner
) -> None:
    """The previous test's pre-registration, edited where it lies: one run recomputes the
    contrasts with the new margin. The planner, upstream of the answers, reruns in that run
    too, and Snakemake then missed the newer file as an input of the analyses (only a second
    run relabelled them); the lock's check, rewritten by the freeze rule, carries the change."""
    edited = workdir / "edited_preregistration.yaml"
    edited.write_text(edited.read_text().replace("rate: 0.300", "rate: 0.250"))
    run_snakemake(workdir, CONTRASTS_TABLE)
    rate = pl.read_csv(workdir / CONTRASTS_TABLE).filter(pl.col("format") == "rate")
    assert rate.height > 0 and set(rate["margin"]) == {0.25}
    assert _label(workdir).startswith("exploratory: changed after the lock of ")
    again = run_snakemake(workdir, CONTRASTS_TABLE, "--dry-run")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_an_edited_lock_relabels_in_the_same_run(
    workdir: Path, run_snakemake: SnakemakeRunner
) -> None:
    """The lock is no rule's output, so Snakemake cannot see it change: its check records the
    lock's digest, and a lock that no longer matches (here locked later than every answer)
    has its check renewed, which relabels the tables in the run; the next run is quiet."""
    lock = workdir / "results/decision/preregistration.lock"
    record = json.loads(lock.read_text())
    record["locked_epoch"] = record["locked_epoch"] + 10 * 365 * 24 * 3600
    lock.write_text(json.dumps(record, indent=2) + "\n")
    result = run_snakemake(workdir, CONTRASTS_TABLE)
    assert "changed after its check was written: the analyses read it again" in result.stderr
    assert "analysed answers were generated before the lock" in _label(workdir)
    again = run_snakemake(workdir, CONTRASTS_TABLE, "--dry-run")
    assert "Nothing to be done" in again.stdout + again.stderr
    assert "changed after its check was written" not in again.stderr


def test_a_deleted_lock_is_not_rewritten_once_answers_exist(
    workdir: Path, run_snakemake: SnakemakeRunner
) -> None:
    lock = workdir / "results/decision/preregistration.lock"
    lock.unlink()
    (workdir / "results/decision/preregistration.checked").unlink()
    write_config(workdir, decision_config(profiles_per_tier=2))
    failed = run_snakemake(workdir, "decision", check=False)
    assert failed.returncode != 0
    log = (workdir / "logs/decision/freeze_preregistration.log").read_text()
    assert "missing, but" in log and "decision-answer files already exist" in log
    assert "--directory" in log and not lock.exists()


def paper_config() -> dict:
    """config/decision/paper.yaml with absolute resource paths (the test runs elsewhere)."""
    config = yaml.safe_load((ROOT / "config/decision/paper.yaml").read_text())
    files = decision_config()["decision"]
    config["decision"] |= {k: v for k, v in files.items() if k != "design"}
    config["decision"]["design"]["prompts"] = files["design"]["prompts"]
    config["decision"]["fairfund_stimuli"] = str(FAIRFUND)
    config["decision"]["fairfund_published"] = str(
        ROOT / "resources/decision/fairfund_published.yaml"
    )
    return {"cues": {}, **config}


@pytest.mark.usefixtures("api_keys")
@pytest.mark.skipif(not FAIRFUND.is_file(), reason=f"FairFund stimuli not present at {FAIRFUND}")
def test_the_paper_config_prints_its_request_count_before_running(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    write_config(tmp_path, paper_config())
    result = run_snakemake(tmp_path, "decision", "--dry-run")
    output = result.stdout + result.stderr
    assert "decision audit: 7344 prompts per model x seed" in output
    assert "5 model x seed runs: 36720 requests" in output
    assert "decision extension precision_topup: 600 prompts per model x seed" in output
    assert "decision extension reasoning_rerun: 1008 prompts per model x seed" in output
    assert "decision extension fairfund_aid: 840 prompts per model x seed" in output
    # the wording arm: hiring Rate under both paraphrases, 12 profiles x 40 pairs each
    assert (
        "decision extension wording: 960 prompts per model x seed (decision_rate_text 960); "
        "1 model x seed runs: 960 requests"
    ) in output
    assert "decision audit in total: 45888 requests" in output
    # the reasoning rerun runs on its own model entry only, the primary arm never does
    jobs = re.findall(r"output: results/responses/([^/]+)/seed0/([^/]+)/0.parquet", output)
    assert {m for m, t in jobs if t.endswith("__reasoning_rerun")} == {"proprietary-a-reasoning"}
    assert "proprietary-a-reasoning" not in {m for m, t in jobs if "__" not in t}
    assert not (tmp_path / "results").exists()


@pytest.mark.usefixtures("api_keys")
@pytest.mark.skipif(not FAIRFUND.is_file(), reason=f"FairFund stimuli not present at {FAIRFUND}")
def test_a_wrong_request_count_or_an_untagged_extension_stops_the_run(
    tmp_path: Path, run_snakemake: SnakemakeRunner
) -> None:
    config = paper_config()
    config["decision"]["expected_requests"] = 40728
    write_config(tmp_path, config)
    result = run_snakemake(tmp_path, "decision", "--dry-run", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "config key decision.expected_requests: 40728, but the design has 45888" in output

    config = paper_config()
    del config["decision"]["extensions"]["precision_topup"]["extension"]
    write_config(tmp_path, config)
    result = run_snakemake(tmp_path, "decision", "--dry-run", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "config key decision.extensions.precision_topup" in output
    assert "'extension' is a required property" in output
    assert not (tmp_path / "results").exists()
