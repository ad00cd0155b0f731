"""Replication-package export and the group-means figure, on simulated pipeline tables."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image as mpimg
import polars as pl
import pytest

from cueaudit.errors import InputError
from cueaudit.probing.analysis.ratios import group_means
from cueaudit.probing.analysis.tables import connect
from cueaudit.probing.export import export_replication
from cueaudit.probing.figures import plot_group_means
from tests.helpers.probing_simulator import SimSpec, simulate

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


def _normalise(path: Path) -> pl.DataFrame:
    """Rewrite a simulated prompt table as the normalised one (prefix + body, Categorical)."""
    frame = pl.read_parquet(path)
    if "text" not in frame.columns:
        return frame
    prefix = (
        pl.when(pl.col("cue") == "none")
        .then(pl.lit(""))
        .otherwise(pl.col("text").str.extract(r"^(\[[^\]]*\]\n)"))
    )
    out = frame.with_columns(prefix=prefix).with_columns(
        body=pl.col("text").str.slice(pl.col("prefix").str.len_chars()),
    )
    assert (out["prefix"] + out["body"]).equals(out["text"])
    out.drop("text").with_columns(pl.col("prefix", "body").cast(pl.Categorical)).write_parquet(path)
    return frame


def test_export_streams_normalised_prompts_and_response_shards(tmp_path: Path) -> None:
    written = simulate(SPEC, tmp_path / "results")
    texts = pl.concat([_normalise(p).select("prompt_uid", "text") for p in written["prompts"]
                       if p.stem != "race_prediction"])  # fmt: skip
    shards, missing = [], []
    for path in written["outcomes"]:
        if path.stem == "race_prediction":
            continue
        outs = pl.read_parquet(path)
        missing.append(outs["prompt_uid"][0])  # one response not in any shard
        done = outs.slice(1).select(
            "prompt_uid", "model", "seed", "task", completion="Answer to " + pl.col("prompt_uid")
        )
        for i, part in enumerate((done.slice(0, done.height // 2), done.slice(done.height // 2))):
            shard = tmp_path / "responses" / path.parent.parent.name / path.parent.name / path.stem
            shard = shard / f"{i}.parquet"
            shard.parent.mkdir(parents=True, exist_ok=True)
            part.write_parquet(shard)
            shards.append(shard)
    args = {"prompts": written["prompts"], "outcomes": written["outcomes"], "responses": shards,
            "task_outcomes": dict(SPEC.tasks)}  # fmt: skip
    small = export_replication(tmp_path / "small", batch_rows=7, **args)
    export_replication(tmp_path / "big", batch_rows=10**6, **args)
    assert not (tmp_path / "small.partial").exists()
    prompts = pl.concat(
        [pl.read_parquet(tmp_path / "small" / p) for p in small["path"] if p.startswith("prompts/")]
    )
    assert prompts.height == texts.height
    joined = prompts.join(texts, on="prompt_uid")
    assert joined.height == texts.height and (joined["prompt"] == joined["text"]).all()
    cleaned = [p for p in small["path"] if p.startswith("decoder_model_responses_cleaned/")]
    rows = pl.concat([pl.read_csv(tmp_path / "small" / p, infer_schema=False) for p in cleaned])
    expected = (
        pl.when(pl.col("prompt_uid").is_in(missing))
        .then(None)
        .otherwise("Answer to " + pl.col("prompt_uid"))
    )
    assert rows.filter(pl.col("response_text").ne_missing(expected)).is_empty()
    assert rows.filter(pl.col("response_text").is_null()).height == len(missing)
    for path in small["path"]:
        if path.endswith(".csv"):
            a = pl.read_csv(tmp_path / "small" / path, infer_schema=False).sort("prompt_uid")
            b = pl.read_csv(tmp_path / "big" / path, infer_schema=False).sort("prompt_uid")
            assert a.equals(b), path


def test_failed_export_leaves_the_previous_one(tmp_path: Path) -> None:
    written = simulate(SPEC, tmp_path / "results")
    out = tmp_path / "repl"
    out.mkdir()
    (out / "MANIFEST.csv").write_text("path,rows\nold,1\n")
    broken = tmp_path / "broken.parquet"
    pl.DataFrame({"prompt_uid": ["x"], "model": ["m1"], "seed": [0]}).write_parquet(broken)
    with pytest.raises(
        InputError, match=r"broken\.parquet: field 'task': missing column\(s\): task"
    ):
        export_replication(out, prompts=written["prompts"], outcomes=[*written["outcomes"], broken],
                           task_outcomes=dict(SPEC.tasks))  # fmt: skip
    assert (out / "MANIFEST.csv").read_text() == "path,rows\nold,1\n"
    assert not (tmp_path / "repl.partial").exists()
