"""The replication export read back the way the authors' scripts read it.

manueltonneau/llm-demographic-cues reads ``response_final`` as ``str.lower() == "yes"``, the
no-cue baseline under race ``none`` and merges files on ``keys_for_cue``. The helpers below
follow their code line by line (revision_appendix/agg_per_seed.py, task1_seed_variance.py,
build_masters.py, replicate_paper_specs.py, race_pred_recall.py; see
docs/replication-export.md) and must give cueaudit's own tables on the same data.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest
import statsmodels.formula.api as smf

from cueaudit.probing.analysis.race_prediction import race_prediction_metrics
from cueaudit.probing.analysis.ratios import outcome_ratios
from cueaudit.probing.analysis.regression import fe_regressions
from cueaudit.probing.analysis.tables import connect
from cueaudit.probing.analysis.validity import deviation_correlations, prompt_deviations
from cueaudit.probing.export import export_replication
from tests.helpers.probing_simulator import SimSpec, simulate

MODEL = "llama3.1"  # a model name their scripts select
SPEC = SimSpec(
    tasks={"legal": "binary", "salary": "usd"},
    cues=("name_rosenman", "name_elder_hayes", "explicit", "dialog_cad", "dialect_aave"),
    models=(MODEL,),
    seeds=(0,),
    n_base=40,
    variants=1,  # one prompt per merge key: their keys_for_cue then identify a prompt
    mu={"name_rosenman": {"Black": -0.25}, "dialect_aave": {"Black": 0.15}},
    loadings={"name_rosenman/Black": (0.2,), "name_elder_hayes/Black": (0.15, 0.1)},
    p_label={
        "name_rosenman": {"Black": (0.6, 0.1), "White": (0.1, 0.1)},
        "dialect_aave": {"Black": (0.5, 0.2)},
    },
    beta_inferred={"Black": 0.12, "Unknown": -0.05},
    seed=11,
)
LEGAL = "legal_advice"


# --- their code, followed line by line ------------------------------------------------------


def norm_race(r: object) -> str:  # agg_per_seed.py
    r = str(r).strip().lower()
    if r in ("black", "black or african american"):
        return "black"
    if r == "white":
        return "white"
    if r == "none":
        return "none"
    return r


FNAME_RE = re.compile(
    r"^(medical_advice|legal_advice|salary_rec)_(.+)_constrained_(.+)_seed_(\d+)\.csv$"
)


def per_seed_agg(data: Path, parsed_only: bool = False, value: str = "yes") -> pd.DataFrame:
    """agg_per_seed.py; ``parsed_only`` drops empty response_final (cueaudit's convention),
    ``value="p_yes"`` aggregates the probability column instead of the Yes test."""
    frames = []
    for path in sorted((data / "decoder_model_responses_cleaned").glob("*.csv")):
        m = FNAME_RE.match(path.name)
        assert m is not None, path.name
        task, method, model, seed = m.group(1), m.group(2), m.group(3), int(m.group(4))
        if task == "salary_rec":
            df = pd.read_csv(path, usecols=["prompt_id", "race", "salary_final"], low_memory=False)
            df["race"] = df["race"].map(norm_race)
            df = df.dropna(subset=["salary_final"])
            df["val"] = df["salary_final"].astype(float)
        else:
            df = pd.read_csv(path, usecols=["prompt_id", "race", "response_final", "p_yes"])
            if parsed_only:
                df = df.dropna(subset=["response_final"])
            df["race"] = df["race"].map(norm_race)
            if value == "p_yes":
                df["val"] = df["p_yes"].astype(float)
            else:
                df["val"] = (df["response_final"].astype(str).str.lower() == "yes").astype(float)
        g = df.groupby(["prompt_id", "race"], sort=False)["val"].agg(["sum", "count"])
        g = g.reset_index()
        g["model"], g["task"], g["method"], g["seed"] = model, task, method, seed
        frames.append(g)
    agg = pd.concat(frames, ignore_index=True)
    agg = agg.rename(columns={"sum": "sum_val", "count": "n"})
    agg["mean"] = agg["sum_val"] / agg["n"]  # task1_seed_variance.py
    return agg


def pooled(d: pd.DataFrame, method: str, race: str) -> float:  # task1_seed_variance.py
    s = d[(d.method == method) & (d.race == race)]
    return s.sum_val.sum() / s.n.sum() if s.n.sum() > 0 else np.nan


def dev_vector(d: pd.DataFrame, method: str, race: str, neutral_map: pd.Series) -> pd.Series:
    sub = d[(d.method == method) & (d.race == race)].set_index("prompt_id")["mean"]
    pids = sub.index.intersection(neutral_map.index)
    return sub.loc[pids] - neutral_map.loc[pids]


def keys_for_cue(cue: str) -> list[str]:  # build_masters.py
    if cue.startswith("name_specific_"):
        return ["prompt_id", "name"]
    if cue.startswith("convo_prefix"):
        return ["prompt_id", "convo_concat_id"]
    if cue == "explicit":
        return ["prompt_id", "race", "gender"]
    return ["prompt_id"]


CUES = [
    "neutral",
    "explicit",
    "dialect",
    "name_specific_rosenman",
    "name_specific_hayes_elder",
    "name_specific_tzioumis",
    "name_specific_an",
    "convo_prefix",
    "convo_prefix_prism",
]


def build_cell(data: Path, task: str, cue: str, model: str) -> pd.DataFrame | None:
    """build_masters.build_cell, with fk_cache/ holding cueaudit's grades (the exported
    prompt file's ``fk_grade`` as ``flesch_kincaid_grade``) and no other cache."""
    name = f"{task}_{cue}_constrained_{model}_seed_0.csv"
    rs_path = data / "decoder_model_responses_cleaned" / name
    rp_path = data / "decoder_model_responses_race_pred" / rs_path.name
    if not rs_path.exists() or not rp_path.exists():
        return None
    rs, rp = pd.read_csv(rs_path, low_memory=False), pd.read_csv(rp_path, low_memory=False)
    keys = [k for k in keys_for_cue(cue) if k in rs.columns and k in rp.columns]
    rp = rp.rename(columns={"response_text": "race_pred"})
    rp_slim = rp[[*keys, "race_pred"]].drop_duplicates(subset=keys)
    keep = keys + [
        c
        for c in ["race", "gender", "response_text", "response_final", "salary_final"]
        if c in rs.columns and c not in keys
    ]
    m = rs[keep].merge(rp_slim, on=keys, how="inner")
    prompts = data / "prompts" / task / f"{task}_{cue}_constrained.parquet"
    cache = pd.read_parquet(prompts).rename(columns={"fk_grade": "flesch_kincaid_grade"})
    ck = [k for k in keys if k in cache.columns]
    col = "flesch_kincaid_grade"
    m = m.merge(cache[[*ck, col]].drop_duplicates(subset=ck), on=ck, how="left")
    m["id_cue"], m["model"], m["category"] = cue, model, task
    m["message_id"] = f"{cue}_constrained_" + m["prompt_id"].astype(str)
    for c in ("race", "gender", "race_pred", "response_text", "response_final"):
        m[c] = m[c].astype("object").where(m[c].notna(), None)
        m[c] = m[c].map(lambda v: None if v is None else str(v))
    return m


def normalize_race(s: object) -> str | None:  # replicate_paper_specs.py
    if pd.isna(s):
        return "None"
    sl = str(s).strip().lower()
    if sl in {"black", "black or african american"}:
        return "Black"
    if sl == "white":
        return "White"
    if sl == "none":
        return "None"
    return None


def legal_specs(data: Path, parsed_only: bool = False) -> dict[int, pd.DataFrame]:
    """build_masters.main (legal cells) + replicate_paper_specs.load_legalsalary_llama and
    run_paper_specs specs (1) to (3): coefficients with their standard errors."""
    cells = [build_cell(data, LEGAL, cue, MODEL) for cue in CUES]
    df = pd.concat([c for c in cells if c is not None and not c.empty], ignore_index=True)
    if parsed_only:
        df = df[df["response_final"].notna()]
    df["race"] = df["race"].apply(normalize_race)
    df = df[df["race"].notna()]
    df = df[df["race_pred"].isin({"Black", "White", "Unknown"})]
    df["response"] = (df["response_final"].astype(str).str.lower() == "yes").astype(float)
    df["race_pred_Black"] = (df["race_pred"] == "Black").astype(float)
    df["race_pred_Unknown"] = (df["race_pred"] == "Unknown").astype(float)
    df["race_Black"] = (df["race"] == "Black").astype(float)
    df["race_None"] = (df["race"] == "None").astype(float)
    out = {}
    inferred = ["race_pred_Black", "race_pred_Unknown"]
    cued = [*inferred, "race_Black", "race_None"]
    for spec, terms in {1: inferred, 2: cued, 3: [*cued, "flesch_kincaid_grade"]}.items():
        dcols = ["response", *terms]
        d = df.copy()
        g = df.groupby("prompt_id", sort=False)
        for c in dcols:
            d[c] = df[c] - g[c].transform("mean")
        res = smf.ols(f"response ~ {' + '.join(terms)} - 1", data=d).fit()
        out[spec] = pd.DataFrame({"coef": res.params, "se": res.bse, "n": res.nobs})
    return out


# --- the tests ------------------------------------------------------------------------------


def _export(spec: SimSpec, tmp_path: Path) -> tuple[dict[str, list[Path]], Path]:
    written = simulate(spec, tmp_path / "results")
    out = tmp_path / "data"
    export_replication(
        out, prompts=written["prompts"], outcomes=written["outcomes"], task_outcomes=spec.tasks
    )
    return written, out


def _cueaudit(written: dict[str, list[Path]], binary_outcome: str = "answer"):
    return connect(written["prompts"], written["outcomes"], dict(SPEC.tasks), binary_outcome)


def test_their_ratio_correlation_and_table7_equal_cueaudits(tmp_path: Path) -> None:
    written, data = _export(SPEC, tmp_path)
    legal = pd.read_csv(
        data
        / "decoder_model_responses_cleaned"
        / f"{LEGAL}_name_specific_rosenman_constrained_{MODEL}_seed_0.csv"
    )
    assert set(legal["response_final"]) == {"Yes", "No"}
    neutral = pd.read_csv(
        data / "decoder_model_responses_cleaned" / f"{LEGAL}_neutral_constrained_{MODEL}_seed_0.csv"
    )
    assert set(neutral["race"]) == {"none"}
    con = _cueaudit(written)
    agg = per_seed_agg(data)
    d = agg[(agg.model == MODEL) & (agg.task == LEGAL) & (agg.seed == 0)]
    ours = outcome_ratios(con, "race", n_boot=0).filter(
        (pl.col("task") == "legal") & (pl.col("model") == MODEL)
    )
    ratio = {r["cue"]: r["ratio"] for r in ours.iter_rows(named=True)}
    # Black/White ratio of a cue with both groups, and dialect against the no-cue baseline
    names = "name_specific_rosenman"
    theirs = pooled(d, names, "black") / pooled(d, names, "white")
    assert theirs == pytest.approx(ratio["name_rosenman"], rel=1e-12)
    assert ratio["name_rosenman"] < 0.95  # the planted -0.25 shift
    theirs = pooled(d, "dialect", "black") / pooled(d, "neutral", "none")
    assert theirs == pytest.approx(ratio["dialect_aave"], rel=1e-12)

    # Pearson r of the deviation vectors of two name sources (Black)
    neutral_map = d[d.method == "neutral"].set_index("prompt_id")["mean"]
    va = dev_vector(d, "name_specific_rosenman", "black", neutral_map)
    vb = dev_vector(d, "name_specific_hayes_elder", "black", neutral_map)
    pids = va.index.intersection(vb.index)
    r_theirs = np.corrcoef(va.loc[pids], vb.loc[pids])[0, 1]
    corr = deviation_correlations(prompt_deviations(con, "race")).filter(
        (pl.col("task") == "legal")
        & (pl.col("cue_a").is_in(["name_rosenman", "name_elder_hayes"]))
        & (pl.col("cue_b").is_in(["name_rosenman", "name_elder_hayes"]))
        & (pl.col("group_a") == "Black")
        & (pl.col("group_b") == "Black")
    )
    assert corr.height == 1 and len(pids) == SPEC.n_base
    assert r_theirs == pytest.approx(corr["r"][0], abs=1e-12)
    assert abs(r_theirs) > 0.2  # the shared planted loading, not noise around 0

    # Table 7 (legal): the fixed-effects coefficients and their SEs, specs (1) to (3)
    specs = legal_specs(data)
    table = fe_regressions(con).filter((pl.col("task") == "legal") & (pl.col("model") == MODEL))
    names = {
        "inferred_Black": "race_pred_Black",
        "inferred_Unknown": "race_pred_Unknown",
        "cued_Black": "race_Black",
        "cued_None": "race_None",
        "fk_grade": "flesch_kincaid_grade",
    }
    for row in table.iter_rows(named=True):
        theirs = specs[row["spec"]].loc[names[row["term"]]]
        assert theirs["coef"] == pytest.approx(row["coef"], abs=1e-12), row
        assert theirs["se"] == pytest.approx(row["se_paper"], rel=1e-9), row
        assert theirs["n"] == row["n"]
    black = table.filter((pl.col("spec") == 2) & (pl.col("term") == "inferred_Black"))
    assert black["coef"][0] > 0.05  # the planted 0.12


def test_unparsed_answers_and_the_probability_outcome(tmp_path: Path) -> None:
    spec = SimSpec(**{**SPEC.__dict__, "parse_failure": 0.15, "seed": 12})
    written, data = _export(spec, tmp_path)
    cleaned = pl.read_csv(
        data
        / "decoder_model_responses_cleaned"
        / f"{LEGAL}_explicit_constrained_{MODEL}_seed_0.csv"
    )
    unparsed = cleaned.filter(pl.col("response_final").is_null())
    assert unparsed.height > 0 and unparsed["parse_error"].null_count() == 0
    assert unparsed["answer"].null_count() == unparsed.height
    con = _cueaudit(written)
    ours = outcome_ratios(con, "race", n_boot=0).filter(pl.col("task") == "legal")
    ratio = {r["cue"]: r["ratio"] for r in ours.iter_rows(named=True)}

    def theirs(d: pd.DataFrame) -> float:
        d = d[d.task == LEGAL]
        return pooled(d, "explicit", "black") / pooled(d, "explicit", "white")

    # Their scripts count an unparsed answer as "not yes"; dropping the empty response_final
    # rows gives cueaudit's ratio, which drops them.
    as_is, parsed = theirs(per_seed_agg(data)), theirs(per_seed_agg(data, parsed_only=True))
    assert parsed == pytest.approx(ratio["explicit"], rel=1e-12)
    assert as_is != pytest.approx(parsed, rel=1e-6)
    # binary_outcome: probability is reproduced from p_yes
    prob = outcome_ratios(_cueaudit(written, "probability"), "race", n_boot=0)
    prob = prob.filter((pl.col("task") == "legal") & (pl.col("cue") == "explicit"))
    assert theirs(per_seed_agg(data, value="p_yes")) == pytest.approx(prob["ratio"][0], rel=1e-12)
    # Table 7 on the parsed rows equals cueaudit's
    specs = legal_specs(data, parsed_only=True)
    table = fe_regressions(con).filter(
        (pl.col("task") == "legal") & (pl.col("spec") == 2) & (pl.col("term") == "cued_Black")
    )
    assert specs[2].loc["race_Black", "coef"] == pytest.approx(table["coef"][0], abs=1e-12)


def test_race_prediction_metrics_follow_their_recall_script(tmp_path: Path) -> None:
    written, data = _export(SPEC, tmp_path)
    path = (
        data
        / "decoder_model_responses_race_pred"
        / f"{LEGAL}_name_specific_rosenman_constrained_{MODEL}_seed_0.csv"
    )
    df = pd.read_csv(path, low_memory=False)  # race_pred_recall.collect_one
    df["pred"] = df["response_text"].astype(str).str.strip()
    df = df[df["pred"].isin({"Black", "White", "Unknown"})].copy()
    df["true"] = df["race"].apply(normalize_race)
    df = df.dropna(subset=["true"])
    b, w = df[df["true"] == "Black"], df[df["true"] == "White"]
    pb, tb = df["pred"] == "Black", df["true"] == "Black"
    ours = race_prediction_metrics(_cueaudit(written)).filter(
        (pl.col("task") == "legal") & (pl.col("cue") == "name_rosenman")
    )
    black = ours.filter(pl.col("class") == "Black").row(0, named=True)
    assert (b["pred"] == "Black").sum() / len(b) == pytest.approx(black["recall"], rel=1e-12)
    assert (pb & tb).sum() / pb.sum() == pytest.approx(black["precision"], rel=1e-12)
    white = ours.filter(pl.col("class") == "White").row(0, named=True)
    assert (w["pred"] == "White").sum() / len(w) == pytest.approx(white["recall"], rel=1e-12)


def test_partial_race_prediction_keeps_their_master_builder_going(tmp_path: Path) -> None:
    written = simulate(SPEC, tmp_path / "results")
    rp_path = next(p for p in written["outcomes"] if p.name == "race_prediction.parquet")
    rp_prompts = pl.read_parquet(next(p for p in written["prompts"] if p.stem == "race_prediction"))
    salary = rp_prompts.filter(pl.col("source_task") == "salary")["prompt_uid"]
    pl.read_parquet(rp_path).filter(pl.col("prompt_uid").is_in(salary.implode())).write_parquet(
        rp_path
    )  # race prediction for the salary task only
    data = tmp_path / "data"
    manifest = export_replication(
        data, prompts=written["prompts"], outcomes=written["outcomes"], task_outcomes=SPEC.tasks
    )
    # build_masters.main: every master gets rows from at least one (task, cue, model) cell
    legal = [build_cell(data, LEGAL, cue, MODEL) for cue in CUES]
    assert sum(len(c) for c in legal if c is not None) > 0
    assert all(c["race_pred"].isna().all() for c in legal if c is not None)
    placeholders = manifest.filter(pl.col("content") == "race_pred_not_run")["path"]
    assert placeholders.len() == len(SPEC.cues)  # every cued legal file, no neutral one
    assert not any("neutral" in p for p in placeholders)
    assert all("legal_advice" in p for p in placeholders)
    real = manifest.filter(pl.col("content") == "race_pred")["path"]
    assert real.len() == len(SPEC.cues) + 1 and all("salary_rec" in p for p in real)
