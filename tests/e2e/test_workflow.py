"""The whole workflow on the real packaged SmolLM2 model, on a tiny design."""

from __future__ import annotations

from pathlib import Path

import duckdb
import matplotlib.image as mpimg
import polars as pl
import pytest

from tests.conftest import SnakemakeRunner, assert_join_keys_unique, tiny_config, write_config

pytestmark = pytest.mark.e2e

N_BASE = 3
N_CUES = 1 + 2 * 4 * 1 + 10  # baseline + 2 name sources × 4 subgroups × 1 name + 10 explicit
N_SEEDS = 2
TASKS = ("healthcare", "salary")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("workflow")
    # one re-answer per inference shard: the determinism record's path, read below
    config = tiny_config(decoding={"determinism_checks": 1})
    # the main job's way (config/config.yaml): one inference job per seed answers every task
    # and shard, so the engine starts twice, not eight times
    config["models"]["smollm2-135m"]["inference_jobs"] = "per_seed"
    write_config(workdir, config)
    return workdir


def test_workflow_end_to_end(finished_run: Path, run_snakemake: SnakemakeRunner) -> None:
    workdir = finished_run
    first = run_snakemake(workdir)
    assert "Finished" in first.stderr
    seed_jobs = sorted(p.name for p in (workdir / "logs/inference/smollm2-135m").glob("*.log"))
    assert seed_jobs == ["seed0.log", "seed1.log"]

    results = workdir / "results"
    for task in TASKS:
        prompts = pl.read_parquet(results / f"prompts/{task}.parquet")
        assert prompts.height == N_BASE * N_CUES
        assert prompts["prompt_uid"].n_unique() == prompts.height

    con = duckdb.connect(str(results / "cueaudit.duckdb"), read_only=True)
    n_prompts = con.sql("SELECT count(*) FROM prompts").fetchall()[0]
    assert n_prompts == (len(TASKS) * N_BASE * N_CUES,)
    per_seed = con.sql(
        "SELECT seed, count(*) FROM responses GROUP BY seed ORDER BY seed"
    ).fetchall()
    assert per_seed == [(0, len(TASKS) * N_BASE * N_CUES), (1, len(TASKS) * N_BASE * N_CUES)]
    assert con.sql("SELECT count(*) FROM outcomes").fetchall()[0] == (
        len(TASKS) * N_BASE * N_CUES * N_SEEDS,
    )
    assert_join_keys_unique(con)
    # every response is matched by exactly one prompt
    orphans = con.sql(
        "SELECT count(*) FROM responses r ANTI JOIN prompts p USING (prompt_uid)"
    ).fetchall()[0]
    assert orphans == (0,)
    # the first-token answer probabilities are real probabilities for yes/no tasks
    low, high = con.sql(
        "SELECT min(p_affirmative), max(p_affirmative) FROM outcomes WHERE task = 'healthcare'"
    ).fetchall()[0]
    assert 0.0 <= low <= high <= 1.0

    parse_rates = con.sql("SELECT * FROM parse_rates").pl()
    assert parse_rates.height == len(TASKS) * 4  # none, explicit, 2 name sources
    assert parse_rates["n_responses"].sum() == len(TASKS) * N_BASE * N_CUES * N_SEEDS
    assert parse_rates["parse_rate"].is_between(0, 1).all()

    # Determinism on record: every shard (2 per task and seed) answered one of its fresh
    # answers again alone; float32 on one machine gives them back identical, and the
    # yes/no task's option scores agree. The report's CSV is the database's table.
    determinism = con.sql("SELECT * FROM determinism ORDER BY ALL").pl()
    assert determinism.height == len(TASKS) * 2 * N_SEEDS
    assert (determinism["checked"] == 1).all() and determinism["note"].is_null().all()
    assert (determinism["identical"] == determinism["checked"]).all()
    diffs = determinism.filter(pl.col("task") == "healthcare")["max_option_logprob_diff"]
    assert diffs.is_not_null().all() and (diffs < 1e-4).all()
    assert determinism["system_fingerprints"].is_null().all()  # a local model has none
    csv = pl.read_csv(results / "tables/determinism.csv", schema=determinism.schema)
    assert csv.sort(determinism.columns).equals(determinism)

    ratios = con.sql("SELECT * FROM ratios_race WHERE task = 'healthcare'").pl()
    assert set(ratios["cue"]) == {"explicit", "name_rosenman", "name_tzioumis"}
    assert ratios["ratio"].is_not_null().all()
    correlations = con.sql("SELECT * FROM validity_race_averaged").pl()
    assert correlations.height > 0
    con.close()

    for figure in ("validity_race", "validity_gender", "ratios_race", "ratios_gender"):
        image = mpimg.imread(results / f"figures/{figure}.png")
        assert image.shape[0] > 200 and image.shape[1] > 200

    second = run_snakemake(workdir, "--dry-run")
    assert "Nothing to be done" in second.stdout + second.stderr

    report = workdir / "report.html"
    run_snakemake(workdir, "--report", str(report))
    assert report.stat().st_size > 10_000
