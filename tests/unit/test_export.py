"""Replication-package export and the group-means figure, on simulated pipeline tables."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image as mpimg
import polars as pl

from cueaudit.probing.analysis.ratios import group_means
from cueaudit.probing.analysis.tables import connect
from cueaudit.probing.export import export_replication
from cueaudit.probing.figures import plot_group_means
from cueaudit.probing.simulate import SimSpec, simulate

SPEC = SimSpec(
    tasks={"salary": "usd", "healthcare": "binary"},
    cues=("name_rosenman", "dialog_cad", "dialect_aave"),
    n_base=5,
    seed=4,
)


def test_export_writes_the_authors_layout(tmp_path: Path) -> None:
    written = simulate(SPEC, tmp_path / "results")
    manifest = export_replication(
        tmp_path / "repl",
        prompts=written["prompts"],
        outcomes=written["outcomes"],
        task_outcomes=dict(SPEC.tasks),
    )
    paths = set(manifest["path"])
    assert "prompts/salary_rec/salary_rec_neutral_constrained.parquet" in paths
    assert "prompts/medical_advice/medical_advice_dialect_constrained.parquet" in paths
    assert (
        "decoder_model_responses_cleaned/salary_rec_convo_prefix_constrained_m1_seed_1.csv" in paths
    )
    assert (
        "decoder_model_responses_race_pred/"
        "medical_advice_name_specific_rosenman_constrained_m1_seed_0.csv" in paths
    )
    names = pl.read_csv(
        tmp_path / "repl/decoder_model_responses_cleaned/"
        "salary_rec_name_specific_rosenman_constrained_m1_seed_0.csv"
    )
    assert names.height == 5 * 2 * 2 * 2  # base prompts × races × genders × variants
    assert names["prompt_id"].is_between(0, 4).all() and names["name"].null_count() == 0
    assert names["salary_final"].drop_nulls().len() == names["response_final"].drop_nulls().len()
    preds = pl.read_csv(
        tmp_path / "repl/decoder_model_responses_race_pred/"
        "salary_rec_dialect_constrained_m1_seed_0.csv"
    )
    assert set(preds["response_text"].drop_nulls()) <= {"Black", "White", "Unknown"}
    total = manifest.filter(pl.col("path").str.starts_with("decoder_model_responses_cleaned"))
    assert total["rows"].sum() == sum(pl.read_parquet(p).height for p in written["outcomes"]
                                      if "race_prediction" not in p.name)  # fmt: skip


def test_group_means_figure_writes_pdf_and_png(tmp_path: Path) -> None:
    written = simulate(SPEC, tmp_path / "results")
    con = connect(written["prompts"], written["outcomes"], dict(SPEC.tasks))
    means = group_means(con, "race", n_boot=100)
    out = tmp_path / "means.pdf"
    plot_group_means(means, "race", out)
    assert out.read_bytes()[:5] == b"%PDF-"
    img = mpimg.imread(out.with_suffix(".png"))
    assert img.shape[0] > 300 and img.shape[1] > 300 and img[..., :3].std() > 0
