from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from cueaudit.cues.dialog.cad import load_cad, preferred_letter
from cueaudit.cues.dialog.clusters import (
    GROUPS,
    build_clusters,
    cluster_counts,
    run_dialog_clusters,
)
from cueaudit.cues.dialog.common import dialog_frame
from cueaudit.cues.dialog.prism import load_prism
from cueaudit.errors import InputError

FIX = Path(__file__).resolve().parents[1] / "fixtures"
SURVEY, CONVS = FIX / "prism/survey.jsonl", FIX / "prism/conversations.jsonl"
CAD = FIX / "cad/community_alignment.csv"


def test_prism_fixture_keeps_real_schema() -> None:
    record = json.loads(SURVEY.read_text().splitlines()[0])
    assert len(record) == 32
    assert record["ethnicity"]["simplified"] == "Black"
    assert record["location"]["reside_countryISO"] == "USA"


def test_prism_filters_and_chosen_path() -> None:
    dialogs = load_prism(SURVEY, CONVS)
    # users 8-11 (UK, Hispanic, non-binary, gender withheld) and c2 (no chosen reply) are out
    assert sorted(dialogs["annotator_id"].unique()) == [f"user{i}" for i in range(8)]
    assert "c2" not in dialogs["dialog_id"].to_list()
    assert dialogs.height == 12
    c1 = dialogs.filter(pl.col("dialog_id") == "c1").row(0, named=True)
    assert (c1["race"], c1["gender"], c1["n_turns"]) == ("Black", "male", 2)
    assert c1["prefix"] == (
        "USER: How do I keep basil alive indoors?\n"
        "MODEL: Give it six hours of light a day and water when the top inch of soil is dry.\n"
        "USER: Should I trim the flowers?\n"
        "MODEL: Yes. Pinching off flowers keeps the leaves tender and the plant bushy."
    )


def test_cad_filters_resolves_labels_and_groups() -> None:
    dialogs = load_cad(CAD)
    assert dialogs.height == 16  # 15 pre-generated + 1 user-initiated; 5 excluded rows
    assert set(dialogs["race"]) == {"Black", "White"}
    first = dialogs.filter(pl.col("dialog_id") == "100230").row(0, named=True)
    # first turn "response_a", second turn "Response B"
    assert first["prefix"].endswith("MODEL: Make a list.")
    assert "MODEL: Yes, absolutely." in first["prefix"]
    assert dialogs.filter(pl.col("cluster_key").is_null()).height == 1
    # 4 shared first turns; two of them are answered in 1 and in 2 turns: 6 (first turn, turns)
    assert dialogs["cluster_key"].drop_nulls().n_unique() == 6
    assert [preferred_letter(x) for x in ("response_a", "A", "Response C", "d", "x")] == [
        "a",
        "a",
        "c",
        "d",
        None,
    ]


def test_cad_accepts_the_three_file_names(tmp_path: Path) -> None:
    shutil.copy(CAD, tmp_path / "filtered_community_alignment.csv")
    assert load_cad(tmp_path).height == 16


RUNNING = "What is a good way to start running as a beginner?"


def test_cad_clusters_match_on_the_number_of_turns() -> None:
    """Appendix A.3: a shared first turn answered in 1 turn by some groups and in 2 by the
    others forms no cluster; every cluster holds dialogs of one length."""
    dialogs = load_cad(CAD)
    running = dialogs.filter(pl.col("prefix").str.starts_with(f"USER: {RUNNING}\n"))
    # all four groups share this first turn (a first-turn-only key would make a cluster) ...
    assert sorted(running.select("race", "gender").rows()) == sorted(GROUPS)
    assert sorted(running["n_turns"]) == [1, 1, 2, 2]
    clusters = build_clusters(dialogs, None, seed=0)
    # ... but the men's dialogs have 2 turns and the women's 1: it is not clustered
    assert not set(running["dialog_id"]) & set(clusters["dialog_id"])
    lengths = clusters.group_by("cluster_id").agg(pl.col("n_turns").unique())["n_turns"]
    assert sorted(lengths.to_list()) == [[1], [2]]


def test_clusters_never_mix_turn_counts_whatever_the_key() -> None:
    """build_clusters matches on n_turns even for a source whose key leaves the turns out."""
    rows = [
        {
            "source": "x",
            "dialog_id": f"d{i}",
            "annotator_id": f"a{i}",
            "race": race,
            "gender": gender,
            "n_turns": turns,
            "cluster_key": "same-first-turn",
            "prefix": f"USER: q{i}",
        }
        for i, ((race, gender), turns) in enumerate(
            [(g, 1) for g in GROUPS] + [(g, 2) for g in GROUPS[:3]] + [(GROUPS[3], 3)]
        )
    ]
    clusters = build_clusters(dialog_frame(rows), None, seed=0)
    assert clusters["cluster_id"].n_unique() == 1
    assert sorted(clusters["dialog_id"]) == ["d0", "d1", "d2", "d3"]


def test_clusters_have_one_dialog_per_group_and_are_seed_stable() -> None:
    for dialogs, n_candidates in ((load_prism(SURVEY, CONVS), 3), (load_cad(CAD), 2)):
        clusters = build_clusters(dialogs, None, seed=0)
        assert clusters["cluster_id"].n_unique() == n_candidates
        for _, members in clusters.group_by("cluster_id"):
            assert sorted(members.select("race", "gender").rows()) == sorted(GROUPS)
            assert members["cluster_key"].n_unique() == 1
        again = build_clusters(dialogs.reverse(), None, seed=0)
        assert again.sort("cluster_id", "race", "gender").equals(
            clusters.sort("cluster_id", "race", "gender")
        )
        sampled = build_clusters(dialogs, 2, seed=0)
        assert sampled["cluster_id"].n_unique() == 2
        assert sampled.equals(build_clusters(dialogs, 2, seed=0))
    prism = load_prism(SURVEY, CONVS)
    picks = {
        tuple(sorted(build_clusters(prism, 1, seed=s)["cluster_id"].unique())) for s in range(8)
    }
    assert len(picks) > 1  # the seed changes which cluster is drawn


def test_cluster_counts_and_rule(tmp_path: Path) -> None:
    counts = run_dialog_clusters(
        "cad",
        {"path": str(CAD)},
        n_clusters=50,
        seed=0,
        out_path=tmp_path / "c.parquet",
        counts_path=tmp_path / "c.csv",
    )
    row = counts.row(0, named=True)
    assert (row["dialogs"], row["candidate_clusters"], row["sampled_clusters"]) == (16, 2, 2)
    assert pl.read_parquet(tmp_path / "c.parquet").height == 8
    prism = load_prism(SURVEY, CONVS)
    assert cluster_counts(prism, build_clusters(prism, None, 0), 0)["candidate_clusters"][0] == 3


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("", "file is empty"),
        ('{"user_id": "user0"\n', "line 1: not valid JSON"),
        ('{"user_id": 3}\n', "field 'user_id'"),
        (
            '{"user_id": "u", "gender": "Male", "ethnicity": {"simplified": "Black"}}\n',
            "field 'location.reside_countryISO'",
        ),
    ],
)
def test_prism_rejects_malformed_survey(tmp_path: Path, content: str, match: str) -> None:
    bad = tmp_path / "survey.jsonl"
    bad.write_text(content)
    with pytest.raises(InputError, match=match) as err:
        load_prism(bad, CONVS)
    assert str(bad) in str(err.value)


def test_prism_rejects_bad_encoding(tmp_path: Path) -> None:
    bad = tmp_path / "conversations.jsonl"
    bad.write_bytes(b'{"conversation_id": "c\xff"}\n')
    with pytest.raises(InputError, match="not valid UTF-8"):
        load_prism(SURVEY, bad)


def test_cad_rejects_malformed_files(tmp_path: Path) -> None:
    header, *rows = CAD.read_text().split("\n", 1)
    missing = tmp_path / "community_alignment.csv"
    missing.write_text(header.replace("annotator_ethnicity", "ethnicity") + "\n" + rows[0])
    with pytest.raises(InputError, match="field 'annotator_ethnicity'"):
        load_cad(missing)
    missing.write_text(header + "\n")
    with pytest.raises(InputError, match="no data rows"):
        load_cad(missing)
    text = CAD.read_text().replace(",True,True,False,1", ",maybe,True,False,1", 1)
    missing.write_text(text)
    with pytest.raises(InputError, match="field 'is_pregenerated_first_prompt'"):
        load_cad(missing)
    missing.write_bytes(b"\xff\xfe")
    with pytest.raises(InputError, match="UTF-8"):
        load_cad(missing)


def test_dialog_rule_writes_nothing_on_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "survey.jsonl"
    bad.write_text("")
    with pytest.raises(InputError):
        run_dialog_clusters(
            "prism",
            {"survey": str(bad), "conversations": str(CONVS)},
            n_clusters=2,
            seed=0,
            out_path=tmp_path / "o.parquet",
            counts_path=tmp_path / "o.csv",
        )
    assert not (tmp_path / "o.parquet").exists()
