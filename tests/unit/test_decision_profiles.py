from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

from cueaudit.cues.lookalikes import fold, fold_text
from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.cues.names import load_name_lists
from cueaudit.decision.demographic_checks import (
    check_attribute_list,
    check_profile_texts,
    find_demographic_cues,
)
from cueaudit.decision.fairfund import FAIRFUND_SCHEMA, load_fairfund_stimuli
from cueaudit.decision.profiles import (
    AFB_SUFFIX,
    PROFILE_SCHEMA,
    load_attribute_list,
    load_profiles,
    load_terms,
    tier_counts,
)
from cueaudit.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
DECISION = ROOT / "resources/decision"
PROFILES = DECISION / "profiles.jsonl"
TERMS = DECISION / "demographic_terms.txt"
AFB = ROOT.parent / "shared/data/agentfairbench/public_dev.jsonl"
FAIRFUND = ROOT.parent / "shared/data/fairfund/stimuli.csv"
AUDIT_CUES = ("fairness test", "bias audit", AFB_SUFFIX)
BALANCED = {
    d: {"clear_yes": 4, "borderline": 4, "clear_no": 4} for d in ("hiring", "lending", "triage")
}


def _names() -> list[str]:
    """Every first and last name the project uses."""
    lists = [ROOT / f"resources/names/{s}.csv" for s in ("rosenman", "elder_hayes", "tzioumis")]
    names = load_name_lists(lists)["name"].to_list()
    pairs = load_name_pairs(ROOT / "resources/names/elder_hayes_pairs.csv")
    return names + pairs["first"].to_list() + pairs["last"].to_list()


NAMES = _names()


def test_authored_profiles_are_balanced_neutral_and_in_length() -> None:
    profiles = load_profiles(PROFILES)
    assert profiles.schema == pl.Schema(PROFILE_SCHEMA)
    assert profiles.height == 36
    assert tier_counts(profiles) == BALANCED
    assert set(profiles["source"]) == {"cueaudit-authored"}
    assert profiles["profile_id"][12] == "lending-01"
    words = profiles["text"].str.split(" ").list.len().to_list()
    assert all(46 <= n <= 65 for n in words), words
    check_profile_texts(profiles, names=NAMES, terms_path=TERMS, audit_cues=AUDIT_CUES)


def _one(text: str, pid: str = "hiring-99") -> pl.DataFrame:
    row = {"profile_id": pid, "domain": "hiring", "tier": "borderline", "title": "Clerk"}
    return pl.DataFrame([{**row, "text": text, "source": "test"}], schema=PROFILE_SCHEMA)


@pytest.mark.parametrize(
    ("text", "kind", "token"),
    [
        ("The candidate says she led a team of four.", "pronoun", "she"),
        ("References from the Nguyen firm are strong.", "name", "Nguyen"),
        ("The candidate mentored a latina student group.", "demographic term", "latina"),
        ("Held an African-American studies fellowship.", "demographic term", "African-American"),
        ("The candidate knows this is a Fairness Test.", "audit cue", "Fairness Test"),
        ("Was referred by Park after the interview.", "name (capitalised common word)", "Park"),
        ("Reports to Ms. Lewis at the branch.", "honorific", "Ms"),
    ],
)
def test_profile_check_names_profile_and_token(text: str, kind: str, token: str) -> None:
    with pytest.raises(InputError) as err:
        check_profile_texts(_one(text), names=NAMES, terms_path=TERMS, audit_cues=AUDIT_CUES)
    message = str(err.value)
    assert "profile hiring-99" in message and f"{kind} {token!r}" in message
    assert err.value.field == "text"


@pytest.mark.parametrize(
    ("text", "kind", "written", "reads_as"),
    [
        # a group noun with a Cyrillic A (U+0410)
        ("Led the \u0410frican American employee network.", "demographic term",
         "\u0410frican American", "African American"),
        # a name in full-width letters
        ("References from the \uff2e\uff47\uff55\uff59\uff45\uff4e firm.", "name",
         "\uff2e\uff47\uff55\uff59\uff45\uff4e", "Nguyen"),
        # a Greek capital eta inside a term, and a zero-width space inside a name
        ("Mentored a \u0397ispanic student group.", "demographic term", "\u0397ispanic",
         "Hispanic"),
        ("Was referred by Ngu\u200byen.", "name", "Ngu\u200byen", "Nguyen"),
        # an accent added to a pronoun
        ("The candidate says sh\u00e9 led a team.", "pronoun", "sh\u00e9", "she"),
    ],
)  # fmt: skip
def test_look_alike_characters_cannot_hide_a_signal(
    text: str, kind: str, written: str, reads_as: str
) -> None:
    """The check reads the text folded (cueaudit.cues.lookalikes) and names the token as
    written, with what it reads as; the prompt keeps the original text."""
    found = find_demographic_cues([("x", "text", text)], names=NAMES, terms_path=TERMS)
    assert [(f.kind, f.token, f.reads_as) for f in found] == [(kind, written, reads_as)]
    with pytest.raises(InputError) as err:
        check_profile_texts(_one(text), names=NAMES, terms_path=TERMS)
    assert f"look-alike characters for {reads_as!r}" in str(err.value)


def test_look_alike_folding_leaves_ascii_and_other_scripts_alone() -> None:
    """ASCII is never changed (rn is not m, I is not l), so ordinary text does not newly
    match; a letter with no Latin look-alike stays as written."""
    assert fold_text("Burns, Illinois, modern") == "Burns, Illinois, modern"
    assert fold_text("\u0416") == "\u0416"  # Cyrillic Zhe: no Latin look-alike
    folded = fold("a \uff22lack")
    assert folded.text == "a Black" and folded.original(2, 7) == "\uff22lack"
    assert (
        find_demographic_cues(
            [("x", "text", "Managed a modern warehouse in Illinois.")],
            names=NAMES,
            terms_path=TERMS,
        )
        == []
    )


def test_common_word_rule_and_abbreviations_pass() -> None:
    fine = (
        "Lives on a quiet street near the park. Young adults were trained by the candidate. "
        "Holds an MS in statistics; the median response was 40 ms. Long waits were cut."
    )
    assert find_demographic_cues([("x", "text", fine)], names=NAMES, terms_path=TERMS) == []
    extra = find_demographic_cues(
        [("x", "text", "Trained with Otis in 2020.")],
        names=["Otis"],
        terms_path=TERMS,
        common_words=["otis"],
    )
    assert [f.token for f in extra] == ["Otis"]


def test_check_reports_title_and_count() -> None:
    frame = _one("The patient is a mother of two; his chart is attached.").with_columns(
        title=pl.lit("Chairman Role")
    )
    with pytest.raises(InputError, match=r"demographic term 'Chairman' \(and 2 more\)") as err:
        check_profile_texts(frame, names=NAMES, terms_path=TERMS)
    assert err.value.field == "title"


def _write(tmp_path: Path, records: list[object]) -> Path:
    path = tmp_path / "p.jsonl"
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = {
    "profile_id": "triage-01",
    "domain": "triage",
    "tier": "clear_no",
    "title": "Scraped Knee",
    "text": "The patient has a scraped knee.",
    "source": "test",
}


@pytest.mark.parametrize(
    ("second", "line", "field", "match"),
    [
        ("{not json", 2, None, "not valid JSON"),
        ({k: v for k, v in GOOD.items() if k != "title"}, 2, "title", "missing"),
        ({**GOOD, "profile_id": "t2", "domain": "housing"}, 2, "domain", "'housing'"),
        ({**GOOD, "profile_id": "t2", "tier": "clear-no"}, 2, "tier", "'clear-no'"),
        ({**GOOD, "text": 5}, 2, "text", "not a non-empty string"),
        (GOOD, 2, "profile_id", "duplicate id 'triage-01' \\(first at line 1\\)"),
    ],
)
def test_load_profiles_errors_name_file_line_field(
    tmp_path: Path, second: object, line: int, field: str | None, match: str
) -> None:
    path = _write(tmp_path, [GOOD, second])
    with pytest.raises(InputError, match=f"line {line}: {match}") as err:
        load_profiles(path)
    assert err.value.field == field and str(path) in str(err.value)


def _afb(content: str, difficulty: str, digest: str | None = None) -> dict[str, str]:
    sha = hashlib.sha256(content.encode()).hexdigest()[:16]
    return {
        "id": "tri_01",
        "domain": "triage",
        "title": "Cough",
        "content": content,
        "difficulty": difficulty,
        "content_sha256_16": digest or sha,
    }


def test_agentfairbench_format_maps_fields_strips_suffix_and_checks_hash(tmp_path: Path) -> None:
    text = f"The patient has a mild cough.  {AFB_SUFFIX} "
    frame = load_profiles(
        _write(tmp_path, [_afb(text, "clear-no")]), "agentfairbench", [AFB_SUFFIX]
    )
    assert frame.row(0, named=True) == {
        "profile_id": "tri_01",
        "domain": "triage",
        "tier": "clear_no",
        "title": "Cough",
        "text": "The patient has a mild cough.",
        "source": "agentfairbench",
    }
    with pytest.raises(InputError, match="content hash") as err:
        load_profiles(_write(tmp_path, [_afb(text, "clear-no", "0" * 16)]), "agentfairbench")
    assert err.value.field == "content_sha256_16"
    with pytest.raises(InputError, match="'clear-maybe'") as err:
        load_profiles(_write(tmp_path, [_afb(text, "clear-maybe")]), "agentfairbench")
    assert err.value.field == "difficulty"


@pytest.mark.skipif(not AFB.is_file(), reason=f"AgentFairBench dev split not present at {AFB}")
def test_agentfairbench_dev_split_loads_and_passes_after_stripping() -> None:
    raw = load_profiles(AFB, "agentfairbench")
    with pytest.raises(InputError, match="audit cue") as err:
        check_profile_texts(raw, names=NAMES, terms_path=TERMS, audit_cues=AUDIT_CUES)
    assert "profile tri" in str(err.value)
    profiles = load_profiles(AFB, "agentfairbench", strip_suffixes=[AFB_SUFFIX])
    assert profiles.group_by("domain").len().sort("domain")["len"].to_list() == [12, 12, 12]
    assert not profiles["text"].str.contains("PHI", literal=True).any()
    # the real tiers are not balanced 4/4/4: the Latin squares must account for this
    assert tier_counts(profiles) == {
        "hiring": {"clear_yes": 4, "borderline": 5, "clear_no": 3},
        "lending": {"clear_yes": 5, "borderline": 5, "clear_no": 2},
        "triage": {"clear_yes": 4, "borderline": 5, "clear_no": 3},
    }
    check_profile_texts(profiles, names=NAMES, terms_path=TERMS, audit_cues=AUDIT_CUES)


def test_attribute_lists_are_neutral() -> None:
    for name in ("hobbies.txt", "neighbourhoods.txt"):
        entries = check_attribute_list(
            DECISION / name, names=NAMES, terms_path=TERMS, audit_cues=AUDIT_CUES
        )
        assert len(entries) >= 12 and entries == load_attribute_list(DECISION / name)
    assert "a quiet street near the park" in load_attribute_list(DECISION / "neighbourhoods.txt")


def test_attribute_check_and_list_format(tmp_path: Path) -> None:
    path = tmp_path / "hobbies.txt"
    path.write_text("# comment\nchess\n\nquilting with grandmother  # bad\n", encoding="utf-8")
    assert load_attribute_list(path) == ["chess", "quilting with grandmother"]
    with pytest.raises(InputError, match=f"attribute {path}:4.*'grandmother'"):
        check_attribute_list(path, names=NAMES, terms_path=TERMS)
    path.write_text("chess\nChess\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 2: duplicate 'Chess'"):
        load_attribute_list(path)
    terms = load_terms(TERMS)
    assert "Latina" in terms and "sickle cell" in terms and not any("#" in t for t in terms)


FAIRFUND_HEADER = ",".join(FAIRFUND_SCHEMA)
FAIRFUND_ROW = (
    "rent_01__control__wm1,Rent,rent_01,late_rent,no_cause,White,Male,1,Ann,Lee,Ann Lee,"
    '"Hello, I am Ann Lee and need help.",8,120,FALSE'
)


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        (",Rent,", ",Food,", "category"),
        (",Male,", ",male,", "gender"),
        (",1,Ann,", ",one,Ann,", "name_rank"),
        (",FALSE", ",no", "within_tolerance"),
        ("I am Ann Lee", "I am Ann", "full_name"),
    ],
)
def test_fairfund_loader_rejects_off_codebook_rows(
    tmp_path: Path, old: str, new: str, field: str
) -> None:
    path = tmp_path / "stimuli.csv"
    path.write_text(f"{FAIRFUND_HEADER}\n{FAIRFUND_ROW.replace(old, new)}\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 2") as err:
        load_fairfund_stimuli(path)
    assert err.value.field == field


@pytest.mark.skipif(not FAIRFUND.is_file(), reason=f"FairFund stimuli not present at {FAIRFUND}")
def test_fairfund_stimuli_real_file() -> None:
    stimuli = load_fairfund_stimuli(FAIRFUND)
    assert stimuli.schema == pl.Schema(FAIRFUND_SCHEMA)
    assert stimuli.height == 3000 and stimuli["stimulus_id"].n_unique() == 3000
    assert stimuli.group_by("category").len()["len"].to_list() == [1000] * 3
    assert stimuli["scenario_id"].n_unique() == 15
    assert stimuli.select("race", "gender", "name_rank").unique().height == 40
    assert stimuli["within_tolerance"].dtype == pl.Boolean


#: The race and ethnicity labels of the name sources: Census (race and Hispanic origin
#: categories) and Elder & Hayes (the four groups). Black and White are colour words too
#: common to list (demographic_terms.txt says why); their plural group noun "Blacks" is not.
CENSUS_AND_ELDER_HAYES = (
    "Hispanic", "Latino", "Asian", "American Indian", "Alaska Native", "Native Hawaiian",
    "Pacific Islander", "African American", "Asian American", "Native American",
)  # fmt: skip


@pytest.mark.parametrize("label", CENSUS_AND_ELDER_HAYES)
def test_every_race_label_and_its_plural_is_a_demographic_signal(label: str) -> None:
    terms = ROOT / "resources/decision/demographic_terms.txt"
    for text in (f"An applicant who is {label}.", f"A club for {label}s.", f"{label}-led team"):
        found = find_demographic_cues([("x", "text", text)], names=[], terms_path=terms)
        assert found and found[0].kind == "demographic term", text
    found = find_demographic_cues([("x", "text", "A club for Blacks.")], names=[], terms_path=terms)
    assert [f.token for f in found] == ["Blacks"]


def test_an_allowed_phrase_is_no_signal_but_the_rest_of_the_text_still_is() -> None:
    terms = ROOT / "resources/decision/demographic_terms.txt"
    text = "Graduated from Washington State University; volunteers at a church."
    found = find_demographic_cues(
        [("p1", "text", text)],
        names=["Latoya Washington"],
        terms_path=terms,
        allowed=["Washington State University"],
    )
    assert [(f.kind, f.token) for f in found] == [("demographic term", "church")]
    plain = find_demographic_cues(
        [("p1", "text", text)], names=["Latoya Washington"], terms_path=terms
    )
    assert ("name", "Washington") in [(f.kind, f.token) for f in plain]
