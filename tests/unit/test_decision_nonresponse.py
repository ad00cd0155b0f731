"""Differential non-response (issue 23): on the simulator, a model whose parse failures track
race is flagged and a model whose failures do not is not (each way round), the pooled check
dilutes it, the contrast tables are flagged for that model and format only, and the config's
stop setting turns the finding into a stop. Also the composition check per model and mode,
and with gender in rankings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from cueaudit.decision.analysis import nonresponse as nr
from cueaudit.decision.analysis.composition import ALPHA, check_analysis_subsamples
from cueaudit.decision.analysis.contrasts import estimate_contrasts
from cueaudit.decision.analysis.figures import plot_nonresponse
from cueaudit.decision.analysis.frames import AnalysisFrames, frames_of
from cueaudit.decision.analysis.simulate import simulate
from cueaudit.decision.analysis.simulation_settings import SimulationSettings
from cueaudit.decision.composition_checks import CompositionError
from cueaudit.decision.preregistration import load_preregistration
from cueaudit.decision.prompts import task_answers
from cueaudit.errors import InputError
from cueaudit.io import write_parquet
from cueaudit.parsing.responses import parse_responses
from tests.helpers.decision_analyses import run_on_frames
from tests.unit.test_decision_simulation import SMALL

ROOT = Path(__file__).resolve().parents[2]
PREREG = load_preregistration(ROOT / "config/decision/preregistration.yaml")
#: Every answer fails 5% of the time; the differential model's answers about Black
#: applicants 25 points more often.
BASE_FAILURE = 0.05
EXTRA = 0.25
ANALYSIS_SCHEMA = yaml.safe_load((ROOT / "workflow/schemas/decision.schema.yaml").read_text())
NONRESPONSE_ALPHA = ANALYSIS_SCHEMA["properties"]["analysis"]["properties"]["nonresponse_alpha"][
    "default"
]


def study(differential: str | None, seed: int = 0, **kw: object) -> AnalysisFrames:
    """A simulated study whose model ``differential`` fails more for Black applicants."""
    failing = {differential: {"Black": EXTRA}} if differential else {}
    options: dict[str, object] = {"seeds": (0, 1)} | kw
    settings = SimulationSettings(
        design=SMALL,
        models=("m1", "m2"),
        root=str(ROOT),
        parse_failure=BASE_FAILURE,
        failure_by_group=failing,
        **options,  # type: ignore[arg-type]
    )
    return simulate(settings, seed)


def test_nonresponse_is_flagged_for_the_model_whose_failures_track_race() -> None:
    for differential, other in (("m1", "m2"), ("m2", "m1")):
        answers = nr.answers_of(study(differential))
        tests = nr.differential_tests(answers, NONRESPONSE_ALPHA)
        own = tests.filter(~pl.col("pooled"))
        flagged = own.filter(pl.col("differential"))
        # both judgement formats of the differential model, by race; nothing else
        assert set(zip(flagged["model"], flagged["format"], flagged["dimension"], strict=True)) == {
            (differential, "rate", "race"),
            (differential, "decide", "race"),
        }
        assert (flagged["q_value"] < NONRESPONSE_ALPHA).all() and flagged["groups"].str.starts_with(
            "Black"
        ).all()
        assert not own.filter(pl.col("model") == other)["differential"].any()
        # the same answers with the failures spread evenly: no flag (the check can fail)
        even = answers.filter(pl.col("race") != "Black")
        assert (
            not nr.differential_tests(even, NONRESPONSE_ALPHA)["differential"]
            .fill_null(False)
            .any()
        )

        table = nr.nonresponse_table(answers, tests)
        assert table.columns == list(nr.NONRESPONSE_SCHEMA)
        judged = table.filter(pl.col("format").is_in(["rate", "decide"]))
        rates = nr.summarise(judged, ["model", "race"])
        black = rates.filter((pl.col("model") == differential) & (pl.col("race") == "Black"))
        rest = rates.filter((pl.col("model") == differential) & (pl.col("race") != "Black"))
        assert black["rate"][0] > BASE_FAILURE + EXTRA - 0.07 and (rest["rate"] < 0.1).all()
        assert black["ci_low"][0] > rest["ci_high"].max()
        assert set(table.filter(pl.col("differential"))["model"]) == {differential}
        assert set(table.filter(pl.col("differential"))["format"]) == {"rate", "decide"}


def test_the_pooled_check_dilutes_one_models_differential_nonresponse() -> None:
    tests = nr.differential_tests(nr.answers_of(study("m1")), NONRESPONSE_ALPHA)
    race = tests.filter(pl.col("dimension") == "race")
    for fmt in ("rate", "decide"):
        rows = race.filter(pl.col("format") == fmt)
        by_model = dict(zip(rows["model"], rows["p_value"], strict=True))
        # pooled over both models the effect is halved on twice the answers: a larger p
        assert by_model["m1"] < 1e-10 and by_model["m2"] > 0.1
        assert by_model[nr.POOLED] > 1e4 * by_model["m1"]
    pooled = tests.filter(pl.col("pooled"))
    assert set(pooled["model"]) == {nr.POOLED}
    assert pooled["q_value"].is_null().all() and pooled["differential"].is_null().all()


def test_contrasts_carry_the_flag_of_their_model_and_format_only() -> None:
    frames = study("m1")
    tests = nr.differential_tests(nr.answers_of(frames), NONRESPONSE_ALPHA)
    contrasts = estimate_contrasts(frames, PREREG, pre_registered=False)
    flagged = nr.flag_contrasts(contrasts, tests)
    assert flagged.columns == [*contrasts.columns, "nonresponse_flag", "nonresponse_models"]
    assert flagged.select(contrasts.columns).equals(contrasts)
    # the pooled contrasts of a format hold m1's answers: flagged, naming m1
    on = flagged.filter(pl.col("nonresponse_flag"))
    assert set(on["format"]) == {"rate", "decide"} and set(on["nonresponse_models"]) == {"m1"}
    assert flagged.filter(pl.col("format") == "rank")["nonresponse_flag"].not_().all()
    # a per-model contrast table: only m1's rows of those formats
    per_model = pl.concat([contrasts.with_columns(model=pl.lit(m)) for m in ("m1", "m2")]).select(
        "model", *contrasts.columns
    )
    marked = nr.flag_contrasts(per_model, tests).filter(pl.col("nonresponse_flag"))
    assert set(zip(marked["model"], marked["format"], strict=True)) == {
        ("m1", "rate"),
        ("m1", "decide"),
    }
    # an extension arm's table: the tests are of the primary arm only
    extension = contrasts.with_columns(arm=pl.lit("top_up"))
    assert not nr.flag_contrasts(extension, tests)["nonresponse_flag"].any()
    with pytest.raises(InputError, match="format"):
        nr.flag_contrasts(contrasts.drop("format"), tests)


def test_the_stop_setting_turns_the_finding_into_a_stop(tmp_path: Path) -> None:
    def run(frames: AnalysisFrames, stop: bool) -> tuple[dict[str, pl.DataFrame], dict[str, str]]:
        params = {"nonresponse_alpha": NONRESPONSE_ALPHA, "stop_on_differential_nonresponse": stop}
        return run_on_frames(
            "nonresponse", frames, tmp_path / "tables", params=params, files={"outcomes": []}
        )

    with pytest.raises(nr.DifferentialNonresponse) as error:
        run(study("m1"), stop=True)
    message = str(error.value)
    assert "stop_on_differential_nonresponse" in message
    lines = message.splitlines()[1:]
    assert len(lines) == 2 and all(
        re.match(r"model m1, format (rate|decide): non-response depends on race \(G = ", line)
        for line in lines
    )
    assert all(re.search(r"\): Black \d+\.\d% \(\d+/\d+\); ", line) for line in lines)
    assert not list((tmp_path / "tables").glob("*.csv"))  # no partial outputs
    # without it: the tables, which the contrasts rule reads back
    tables, out = run(study("m1"), stop=False)
    read = nr.read_tests(out["nonresponse_tests"])
    assert read.equals(tables["nonresponse_tests"])
    assert pl.read_csv(out["nonresponse"]).columns == list(nr.NONRESPONSE_SCHEMA)
    # a study without differential non-response never stops
    run(study(None), stop=True)


def test_reasons_come_from_the_parsers(tmp_path: Path) -> None:
    """Real answers parsed by the rating kind of the text and tool tasks."""
    answers = task_answers({"prompts": str(ROOT / "resources/decision/prompts.yaml")})

    def call(name: str, arguments: dict[str, object]) -> str:
        return json.dumps([{"name": name, "arguments": arguments}])

    given = {
        "decision_rate_tool": [
            ("", call("submit_rating", {"rating": 4}), None),
            ("4", "[]", "no_tool_call"),  # parsed text, but no tool call
            ("I cannot rate applicants.", "[]", "refusal"),
            ("", call("lookup", {}), "no_tool_call"),  # wrong_tool
            ("", call("submit_rating", {"rating": "high"}), "invalid"),
        ],
        "decision_rate_text": [("4", None, None), ("Rating: 9", None, "unparsed")],
    }
    parts = []
    for task, rows in given.items():
        responses = pl.DataFrame(
            {
                "prompt_uid": [f"{task}-{i}" for i in range(len(rows))],
                "model": "m1",
                "seed": 0,
                "task": task,
                "completion": [r[0] for r in rows],
                "tool_calls": pl.Series([r[1] for r in rows], dtype=pl.String),
            }
        )
        parsed = parse_responses(responses, *answers[task])
        parts.append(
            parsed.with_columns(
                domain=pl.lit("hiring"),
                format=pl.lit("rate"),
                mode=pl.lit(task.rsplit("_", 1)[1]),
                paraphrase=pl.lit("p1"),
                profile_id=pl.lit("hiring-01"),
                tier=pl.lit("clear_yes"),
                pair_id=pl.lit("k1"),
                race=pl.lit("Black"),
                gender=pl.lit("female"),
            )
        )
    outcomes = pl.concat(parts, how="diagonal_relaxed")
    paths = []
    for task, part in outcomes.group_by("task"):
        paths.append(str(tmp_path / f"{task[0]}.parquet"))
        write_parquet(part, paths[-1])
    reasons = nr.read_reasons(paths)
    got = nr.answers_of(frames_of(outcomes), reasons).sort("task", "prompt_uid")
    expected = [r[2] for task in sorted(given) for r in given[task]]
    assert got["reason"].to_list() == expected
    counts = nr.nonresponse_table(got, nr.differential_tests(got, NONRESPONSE_ALPHA))
    tool = counts.filter(pl.col("mode") == "tool").row(0, named=True)
    assert (tool["n"], tool["n_nonresponse"], tool["n_no_tool_call"]) == (5, 4, 2)
    assert (tool["n_refusal"], tool["n_invalid"], tool["n_unparsed"]) == (1, 1, 0)
    # without the parsers' reasons every unparsed answer counts as unparsed
    bare = nr.answers_of(frames_of(outcomes)).sort("task", "prompt_uid")["reason"].to_list()
    assert bare == [None, "unparsed", None, None, "unparsed", "unparsed", "unparsed"]
    with pytest.raises(InputError, match="unknown null reason 'bored'"):
        nr.answers_of(frames_of(outcomes), reasons.with_columns(parse_error=pl.lit("bored")))
    write_parquet(outcomes.drop("answer_source"), tmp_path / "old.parquet")
    with pytest.raises(InputError, match="answer_source"):
        nr.read_reasons([tmp_path / "old.parquet"])


def test_ranking_answers_take_the_group_their_candidates_share() -> None:
    answers = nr.answers_of(study("m1"))
    ranked = answers.filter(pl.col("format") == "rank")
    shared = {
        (r["bundle_type"], r["race"] == nr.MIXED, r["gender"] == nr.MIXED)
        for r in ranked.iter_rows(named=True)
    }
    assert shared == {
        ("irrelevant_matched", False, False),
        ("disguised_placebo", False, True),
        ("demographic_matched", True, False),
        ("disguised_demographic", True, True),
    }
    # one answer per ranking prompt, model and seed
    assert ranked.select("model", "seed", "prompt_uid").is_unique().all()


def test_nonresponse_figure(tmp_path: Path) -> None:
    answers = nr.answers_of(study("m1"))
    table = nr.nonresponse_table(answers, nr.differential_tests(answers, NONRESPONSE_ALPHA))
    plot_nonresponse(table, tmp_path / "nonresponse.png")
    assert (tmp_path / "nonresponse.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plot_nonresponse(table.clear(), tmp_path / "empty.png")
    assert (tmp_path / "empty.png").stat().st_size > 0
    with pytest.raises(InputError, match="n_nonresponse"):
        plot_nonresponse(table.drop("n_nonresponse"), tmp_path / "x.png")


# --- composition per model and mode, gender in rankings --------------------------------------
def test_composition_is_checked_per_model_and_mode() -> None:
    """m1's tool calls fail for Black applicants of strong profiles: the design and m1's text
    answers pass, m1's tool answers fail (reported, not a stop), m2 passes."""
    frames = study(None, seeds=tuple(range(6)))
    hit = (
        (pl.col("model") == "m1")
        & (pl.col("mode") == "tool")
        & (pl.col("race") == "Black")
        & (pl.col("tier") == "clear_yes")
    )
    judgements = frames.judgements.with_columns(y=pl.when(hit).then(None).otherwise(pl.col("y")))
    broken = AnalysisFrames(judgements, frames.rankings, frames.probes)
    table = check_analysis_subsamples(broken)
    judged = table.filter(pl.col("name") == "judgements")
    assert judged.filter(pl.col("subsample") == "design")["passed"].all()
    failed = judged.filter(~pl.col("passed"))
    assert set(zip(failed["group"], failed["factor"], strict=True)) == {("race", "tier")}
    assert {s.rsplit(",", 2)[0] for s in failed["stratum"]} == {"model=m1, mode=tool"}
    assert failed["note"].str.contains(r"race=Black × tier=clear_yes: 0 of expected").all()
    per_mode = judged.filter(
        (pl.col("group") == "race")
        & (pl.col("factor") == "tier")
        & pl.col("stratum").str.starts_with("model=")
    )
    text = per_mode.filter(pl.col("stratum").str.contains("mode=text"))
    assert text["passed"].all() and (text["p_value"] > 0.5).all()
    # pooled over models and modes the same failures are diluted
    pooled = judged.filter(
        (pl.col("subsample") == "analysed")
        & (pl.col("group") == "race")
        & (pl.col("factor") == "tier")
        & ~pl.col("stratum").str.starts_with("model=")
    )
    assert pooled["passed"].all()
    assert pooled["p_value"].min() > 100 * failed["p_value"].max()
    with pytest.raises(
        CompositionError,
        match=r"model=m1, mode=tool, domain=\w+, format=\w+\): race depends on tier",
    ):
        check_analysis_subsamples(broken, stop=True)
    assert check_analysis_subsamples(frames)["passed"].all()


def test_composition_tests_gender_in_rankings() -> None:
    """Ranking answers with a woman in the strong slot fail to parse: gender then tracks tier
    in the analysed disguised demographic bundles, which carry the gender contrast."""
    frames = study(None)
    rankings = frames.rankings
    strong_woman = (
        rankings.filter(
            (pl.col("bundle_type") == "disguised_demographic")
            & (pl.col("gender") == "female")
            & (pl.col("tier") == "clear_yes")
        )
        .select("model", "seed", "task", "prompt_uid")
        .unique()
        .with_columns(_hit=pl.lit(True))
    )
    broken = rankings.join(
        strong_woman, on=["model", "seed", "task", "prompt_uid"], how="left"
    ).with_columns(rank=pl.when(pl.col("_hit")).then(None).otherwise(pl.col("rank")))
    broken = AnalysisFrames(frames.judgements, broken.drop("_hit"), frames.probes)
    table = check_analysis_subsamples(broken).filter(
        (pl.col("name") == "rankings disguised_demographic") & (pl.col("group") == "gender")
    )
    assert set(table["factor"]) == {"tier", "position"}  # not profile: not balanced by design
    assert table.filter(pl.col("subsample") == "design")["passed"].all()
    failed = table.filter(~pl.col("passed"))
    assert set(failed["factor"]) == {"tier"}
    assert failed["note"].str.contains("gender=female × tier=clear_yes: 0 of expected").all()
    assert np.all(failed["q_value"].to_numpy() < ALPHA)
    clean = check_analysis_subsamples(frames).filter(pl.col("group") == "gender")
    assert clean["passed"].all() and (clean["name"] == "rankings disguised_demographic").any()
