"""Bad resource files, loader by loader: each case asserts the exact message (file, field, line).

Cases by category (68):

- name lists (``cueaudit.cues.names``): 14
- name pairs (``cueaudit.cues.name_pairs``): 8
- explicit descriptors (``cueaudit.cues.explicit``): 2
- dialect (``cueaudit.cues.dialect``): 5
- dialog sources, CAD and PRISM (``cueaudit.cues.dialog``): 13
- base prompts (``cueaudit.probing.base_prompts``): 6
- decision profiles, cueaudit and AgentFairBench formats (``cueaudit.decision.profiles``): 10
- FairFund stimuli (``cueaudit.decision.profiles``, ``cueaudit.decision.aid``): 7
- attribute lists (``cueaudit.decision.profiles``): 3

The decision prompts file and the pre-registration are in ``test_decision_files.py``.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from cueaudit.cues.dialect.rules import RuleBasedAAVE
from cueaudit.cues.dialect.translate import run_dialect_translation
from cueaudit.cues.dialect.translators import HFTranslator, make_translator
from cueaudit.cues.dialog.cad import load_cad
from cueaudit.cues.dialog.prism import load_prism, load_prism_participants
from cueaudit.cues.explicit import explicit_descriptors
from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.cues.names import load_name_list, load_name_lists
from cueaudit.decision.aid import aid_stimuli
from cueaudit.decision.demographic_checks import check_attribute_list
from cueaudit.decision.fairfund import load_fairfund_stimuli
from cueaudit.decision.profiles import AFB_SUFFIX, load_attribute_list, load_profiles
from cueaudit.probing.base_prompts import load_base_prompts
from tests.bad_inputs.battery import FIXTURES, ROOT, Case, Where, params, run_case

# -- name lists -------------------------------------------------------------------------------

HEADER = "name,race,gender,source\n"
JAMAL = "Jamal,Black,male,rosenman\n"


def names(w: Where) -> object:
    return load_name_list(w / "names.csv")


def names_file(body: str) -> dict[str, str]:
    return {"names.csv": HEADER + body}


NAME_CASES = [
    Case("names-file-missing", names, "{in}/names.csv: file not found"),
    Case("names-file-empty", names, "{in}/names.csv: file is empty", {"names.csv": "\n  \n"}),
    Case(
        "names-not-utf8",
        lambda w: load_name_list(FIXTURES / "names_latin1.csv"),
        f"{FIXTURES}/names_latin1.csv: not valid UTF-8 at line 3 (byte 53)",
    ),
    Case(
        "names-column-source-missing",
        names,
        "{in}/names.csv: field 'source': required column missing "
        "(header is ['name', 'race', 'gender'])",
        {"names.csv": "name,race,gender\nJamal,Black,male\n"},
    ),
    Case(
        "names-column-repeated",
        names,
        "{in}/names.csv: field 'race': column appears more than once in the header",
        {"names.csv": "name,race,gender,source,race\nJamal,Black,male,rosenman,Black\n"},
    ),
    Case(
        "names-row-too-short-line-3",
        names,
        "{in}/names.csv: line 3: 3 fields, header has 4",
        names_file(JAMAL + "Emily,White,female\n"),
    ),
    Case(
        "names-unclosed-quote-line-2",
        names,
        "{in}/names.csv: line 2: 1 fields, header has 4",
        names_file('"Jamal,Black,male,rosenman\n'),
    ),
    Case(
        "names-header-only", names, "{in}/names.csv: no data rows below the header", names_file("")
    ),
    Case(
        "names-empty-name-line-2",
        names,
        "{in}/names.csv: field 'name': line 2: empty name",
        names_file(" ,Black,male,rosenman\n"),
    ),
    Case(
        "names-race-outside-vocabulary",
        names,
        "{in}/names.csv: field 'race': line 3: race 'Asian' is not one of ['Black', 'White']",
        names_file(JAMAL + "Wei,Asian,male,rosenman\n"),
    ),
    Case(
        "names-gender-outside-vocabulary",
        names,
        "{in}/names.csv: field 'gender': line 2: gender 'm' is not one of ['male', 'female']",
        names_file("Jamal,Black,m,rosenman\n"),
    ),
    Case(
        "names-empty-source",
        names,
        "{in}/names.csv: field 'source': line 2: empty source",
        names_file("Jamal,Black,male,\n"),
    ),
    Case(
        "names-duplicate-row",
        names,
        "{in}/names.csv: field 'name': line 3: duplicate row ('Jamal', 'Black', 'male') "
        "(first at line 2)",
        names_file(JAMAL + "Jamal,black,MALE,rosenman\n"),
    ),
    Case(
        "names-source-shared-by-two-files",
        lambda w: load_name_lists([w / "a.csv", w / "b.csv"]),
        "{in}/b.csv: field 'source': source 'rosenman' is also used by {in}/a.csv",
        {"a.csv": HEADER + JAMAL, "b.csv": HEADER + "Emily,White,female,rosenman\n"},
    ),
]

# -- name pairs ---------------------------------------------------------------------------------

PAIR_HEADER = "pair_id,race,gender,name_rank,first,last,full_name,source\n"
PAIR = "black-female-1,Black,female,1,Latoya,Washington,Latoya Washington,elder_hayes_2023\n"


def pairs(w: Where) -> object:
    return load_name_pairs(w / "pairs.csv", pairs_per_cell=None)


def pairs_file(*rows: str) -> dict[str, str]:
    return {"pairs.csv": PAIR_HEADER + "".join(rows)}


PAIR_CASES = [
    Case(
        "pairs-column-full-name-missing",
        pairs,
        "{in}/pairs.csv: field 'full_name': required column missing (header is "
        "['pair_id', 'race', 'gender', 'name_rank', 'first', 'last', 'source'])",
        {"pairs.csv": "pair_id,race,gender,name_rank,first,last,source\nx,Black,female,1,A,B,s\n"},
    ),
    Case(
        "pairs-race-outside-four-groups",
        pairs,
        "{in}/pairs.csv: field 'race': line 2: race 'Martian' is not one of "
        "['Black', 'White', 'Hispanic', 'Asian']",
        pairs_file(PAIR.replace("Black", "Martian")),
    ),
    Case(
        "pairs-rank-not-integer",
        pairs,
        "{in}/pairs.csv: field 'name_rank': line 2: name_rank 'first' is not an integer",
        pairs_file(PAIR.replace(",1,", ",first,")),
    ),
    Case(
        "pairs-rank-zero",
        pairs,
        "{in}/pairs.csv: field 'name_rank': line 2: name_rank must be positive, got 0",
        pairs_file(PAIR.replace(",1,", ",0,")),
    ),
    Case(
        "pairs-empty-last-name",
        pairs,
        "{in}/pairs.csv: field 'last': line 2: empty last",
        pairs_file(PAIR.replace(",Washington,", ",,")),
    ),
    Case(
        "pairs-full-name-not-first-and-last",
        pairs,
        "{in}/pairs.csv: field 'full_name': line 2: 'Latoya W.' is not first and last joined "
        "by a space",
        pairs_file(PAIR.replace("Latoya Washington", "Latoya W.")),
    ),
    Case(
        "pairs-duplicate-pair-id-line-3",
        pairs,
        "{in}/pairs.csv: field 'pair_id': line 3: duplicate 'black-female-1' (first at line 2)",
        pairs_file(
            PAIR,
            PAIR.replace(",1,Latoya,Washington,Latoya Washington", ",2,Ebony,Jones,Ebony Jones"),
        ),
    ),
    Case(
        "pairs-cell-incomplete",
        lambda w: load_name_pairs(w / "pairs.csv", pairs_per_cell=5),
        "{in}/pairs.csv: field 'name_rank': cell Black/male has name ranks [], "
        "expected [1, 2, 3, 4, 5]",
        pairs_file(PAIR),
    ),
]

# -- explicit descriptors -----------------------------------------------------------------------

EXPLICIT_CASES = [
    Case(
        "explicit-categories-a-string",
        lambda w: explicit_descriptors("race_gender"),  # type: ignore[arg-type]
        "explicit cue categories: field 'categories': expected a list, not a string",
    ),
    Case(
        "explicit-category-unknown",
        lambda w: explicit_descriptors(["race_gender", "religion"]),
        "explicit cue categories: field 'categories': unknown category 'religion'; expected one "
        "of ['race_gender', 'race', 'gender', 'nationality_gender', 'nationality_race_gender']",
    ),
]

# -- dialect -----------------------------------------------------------------------------------


def translate(w: Where) -> object:
    return run_dialect_translation(
        load_base_prompts(w / "prompts.csv", "healthcare"),
        {"translator": "rule_based", "cache": str(w.results / "cache" / "dialect.sqlite")},
        translations_path=w.results / "cues" / "dialect.parquet",
        audit_path=w.results / "cues" / "dialect_audit.csv",
        flagged_path=w.results / "cues" / "dialect_flagged.csv",
    )


DIALECT_CASES = [
    Case(
        "dialect-translator-unknown",
        lambda w: make_translator({"translator": "google"}),
        "config: field 'cues.dialect.translator': unknown translator 'google'; one of "
        "['rule_based', 'openai', 'hf']",
    ),
    Case(
        "dialect-rule-unknown",
        lambda w: RuleBasedAAVE(probabilities={"habitual_bee": 0.5}),
        "cues.dialect: field 'rule_probabilities': unknown dialect rule 'habitual_bee'; one of "
        "['finna_future', 'future_sub_gon', 'been_progressive', 'completive_done', 'aint_be', "
        "'aint_have', 'negative_concord', 'dont_3sg', 'habitual_be', 'drop_copula', "
        "'drop_copula_question', 'stay_reside', 'uninflect_3sg', 'existential_it', 'g_dropping']",
    ),
    Case(
        "dialect-rule-probability-above-one",
        lambda w: RuleBasedAAVE(probabilities={"habitual_be": 1.5}),
        "cues.dialect: field 'rule_probabilities': habitual_be: a probability from 0 to 1, got 1.5",
    ),
    Case(
        "dialect-hf-model-folder-missing",
        lambda w: HFTranslator(w / "no-model"),
        "{in}/no-model: field 'cues.dialect.model': local model folder not found",
    ),
    Case(
        "dialect-base-prompts-without-text-writes-nothing",
        translate,
        "{in}/prompts.csv: field 'text': required column missing (header is ['base_id', 'prompt'])",
        {"prompts.csv": "base_id,prompt\nb1,Should I see a doctor?\n"},
    ),
]

# -- dialog sources ------------------------------------------------------------------------------

CAD_ROWS = list(csv.reader((ROOT / "tests/fixtures/cad/community_alignment.csv").open(newline="")))
CAD_HEADER, CAD_ROW = CAD_ROWS[0], CAD_ROWS[1]


def cad_file(header: list[str] = CAD_HEADER, *rows: list[str]) -> dict[str, str]:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return {"cad.csv": out.getvalue()}


def cad_row(**changes: str) -> list[str]:
    return [changes.get(c, v) for c, v in zip(CAD_HEADER, CAD_ROW, strict=True)]


def cad(w: Where) -> object:
    return load_cad(w / "cad.csv")


def without(column: str) -> tuple[list[str], list[str]]:
    keep = [i for i, c in enumerate(CAD_HEADER) if c != column]
    return [CAD_HEADER[i] for i in keep], [CAD_ROW[i] for i in keep]


SURVEY = {
    "user_id": "user0",
    "gender": "Female",
    "ethnicity": {"simplified": "Black"},
    "location": {"reside_countryISO": "USA"},
}
TURN = [
    {"turn": 0, "role": "user", "content": "Hi"},
    {"turn": 0, "role": "model", "content": "Hello", "if_chosen": True},
]
CONVERSATION = {"conversation_id": "c0", "user_id": "user0", "conversation_history": TURN}


def jsonl(*records: object) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def survey(w: Where) -> object:
    return load_prism_participants(w / "survey.jsonl")


def prism(w: Where) -> object:
    return load_prism(w / "survey.jsonl", w / "conversations.jsonl")


DIALOG_CASES = [
    Case(
        "cad-folder-without-csv",
        lambda w: load_cad(w.inputs),
        "{in}: none of ['community_alignment.csv', 'filtered_community_alignment.csv', "
        "'full_community_alignment.csv'] in this folder",
    ),
    Case(
        "cad-column-country-missing",
        cad,
        f"{{in}}/cad.csv: field 'annotator_country': required column missing (header has "
        f"{len(CAD_HEADER) - 1})",
        cad_file(*without("annotator_country")),
    ),
    Case(
        "cad-pregenerated-not-boolean",
        cad,
        "{in}/cad.csv: field 'is_pregenerated_first_prompt': line 2: expected true/false, "
        "got 'maybe'",
        cad_file(CAD_HEADER, cad_row(is_pregenerated_first_prompt="maybe")),
    ),
    Case(
        "cad-row-too-long",
        cad,
        "{in}/cad.csv: line 2: more fields than the header",
        cad_file(CAD_HEADER, [*CAD_ROW, "extra"]),
    ),
    Case(
        "cad-row-too-short",
        cad,
        f"{{in}}/cad.csv: line 2: 20 fields, header has {len(CAD_HEADER)}",
        cad_file(CAD_HEADER, CAD_ROW[:20]),
    ),
    Case("cad-header-only", cad, "{in}/cad.csv: no data rows below the header", cad_file()),
    Case(
        "prism-survey-invalid-json-line-2",
        survey,
        "{in}/survey.jsonl: line 2: not valid JSON (Expecting property name enclosed in "
        "double quotes)",
        {"survey.jsonl": jsonl(SURVEY) + "{user_id: 'user1'}\n"},
    ),
    Case(
        "prism-survey-line-not-an-object",
        survey,
        "{in}/survey.jsonl: line 1: expected a JSON object",
        {"survey.jsonl": '["user0"]\n'},
    ),
    Case(
        "prism-survey-user-id-missing",
        survey,
        "{in}/survey.jsonl: field 'user_id': line 1: missing",
        {"survey.jsonl": jsonl({k: v for k, v in SURVEY.items() if k != "user_id"})},
    ),
    Case(
        "prism-survey-gender-a-number",
        survey,
        "{in}/survey.jsonl: field 'gender': line 1: expected str, got int",
        {"survey.jsonl": jsonl({**SURVEY, "gender": 2})},
    ),
    Case(
        "prism-survey-duplicate-user",
        survey,
        "{in}/survey.jsonl: field 'user_id': line 2: duplicate user 'user0'",
        {"survey.jsonl": jsonl(SURVEY, SURVEY)},
    ),
    Case(
        "prism-history-item-not-an-object",
        prism,
        "{in}/conversations.jsonl: field 'conversation_history': line 1: item 1 is not an object",
        {
            "survey.jsonl": jsonl(SURVEY),
            "conversations.jsonl": jsonl({**CONVERSATION, "conversation_history": [TURN[0], "x"]}),
        },
    ),
    Case(
        "prism-history-turn-not-an-integer",
        prism,
        "{in}/conversations.jsonl: field 'turn': line 1: expected int, got str",
        {
            "survey.jsonl": jsonl(SURVEY),
            "conversations.jsonl": jsonl(
                {**CONVERSATION, "conversation_history": [{**TURN[0], "turn": "0"}, TURN[1]]}
            ),
        },
    ),
]

# -- base prompts --------------------------------------------------------------------------------


def base(w: Where) -> object:
    return load_base_prompts(w / "prompts.csv", "healthcare")


BASE_CASES = [
    Case(
        "base-prompts-empty-base-id",
        base,
        "{in}/prompts.csv: field 'base_id': line 3: empty base_id",
        {"prompts.csv": "base_id,text\nb1,Should I rest?\n,Should I run?\n"},
    ),
    Case(
        "base-prompts-duplicate-base-id",
        base,
        "{in}/prompts.csv: field 'base_id': line 3: duplicate base_id 'b1' (first at line 2)",
        {"prompts.csv": "base_id,text\nb1,Should I rest?\nb1,Should I run?\n"},
    ),
    Case(
        "base-prompts-empty-text",
        base,
        "{in}/prompts.csv: field 'text': line 2: empty text for 'b1'",
        {"prompts.csv": "base_id,text\nb1,  \n"},
    ),
    Case(
        "base-prompts-text-column-missing",
        base,
        "{in}/prompts.csv: field 'text': required column missing (header is ['base_id', 'txt'])",
        {"prompts.csv": "base_id,txt\nb1,Should I rest?\n"},
    ),
    Case(
        "base-prompts-empty-task-name",
        lambda w: load_base_prompts(w / "prompts.csv", " "),
        "{in}/prompts.csv: field 'task': task name is empty",
        {"prompts.csv": "base_id,text\nb1,Should I rest?\n"},
    ),
    Case(
        "base-prompts-kearney-corpus-without-prompts",
        base,
        "{in}/prompts.csv: no data rows below the header",
        {"prompts.csv": "prompts,category\n"},
    ),
]

# -- decision profiles and stimuli ----------------------------------------------------------

PROFILE = {
    "profile_id": "hiring-01",
    "domain": "hiring",
    "tier": "clear_yes",
    "title": "Payroll Accountant",
    "text": "Seven years of multi-state payroll experience.",
    "source": "cueaudit-authored",
}


def profiles(w: Where) -> object:
    return load_profiles(w / "profiles.jsonl")


def afb(w: Where) -> object:
    return load_profiles(w / "afb.jsonl", "agentfairbench", strip_suffixes=[AFB_SUFFIX])


AFB = json.loads((FIXTURES / "agentfairbench.jsonl").read_text())

PROFILE_CASES = [
    Case(
        "profiles-invalid-json-line-2",
        profiles,
        "{in}/profiles.jsonl: line 2: not valid JSON (Expecting value)",
        {"profiles.jsonl": jsonl(PROFILE) + '{"profile_id": hiring-02}\n'},
    ),
    Case(
        "profiles-title-missing",
        profiles,
        "{in}/profiles.jsonl: field 'title': line 1: missing",
        {"profiles.jsonl": jsonl({k: v for k, v in PROFILE.items() if k != "title"})},
    ),
    Case(
        "profiles-text-a-number",
        profiles,
        "{in}/profiles.jsonl: field 'text': line 1: not a non-empty string (42)",
        {"profiles.jsonl": jsonl({**PROFILE, "text": 42})},
    ),
    Case(
        "profiles-domain-unknown",
        profiles,
        "{in}/profiles.jsonl: field 'domain': line 1: 'housing' is not one of "
        "['hiring', 'lending', 'triage']",
        {"profiles.jsonl": jsonl({**PROFILE, "domain": "housing"})},
    ),
    Case(
        "profiles-tier-unknown",
        profiles,
        "{in}/profiles.jsonl: field 'tier': line 1: 'maybe' is not one of "
        "['clear_yes', 'borderline', 'clear_no']",
        {"profiles.jsonl": jsonl({**PROFILE, "tier": "maybe"})},
    ),
    Case(
        "profiles-duplicate-id-line-2",
        profiles,
        "{in}/profiles.jsonl: field 'profile_id': line 2: duplicate id 'hiring-01' "
        "(first at line 1)",
        {"profiles.jsonl": jsonl(PROFILE, PROFILE)},
    ),
    Case(
        "profiles-format-unknown",
        lambda w: load_profiles(w / "profiles.jsonl", "fairfund"),  # type: ignore[arg-type]
        "{in}/profiles.jsonl: field 'format': unknown profile format 'fairfund'",
        {"profiles.jsonl": jsonl(PROFILE)},
    ),
    Case(
        "agentfairbench-difficulty-with-underscore",
        afb,
        "{in}/afb.jsonl: field 'difficulty': line 1: 'clear_yes' is not one of "
        "['clear-yes', 'borderline', 'clear-no']",
        {"afb.jsonl": jsonl({**AFB, "difficulty": "clear_yes"})},
    ),
    Case(
        "agentfairbench-content-hash-mismatch",
        afb,
        f"{{in}}/afb.jsonl: field 'content_sha256_16': line 1: content hash '0000000000000000' "
        f"!= '{AFB['content_sha256_16']}'",
        {"afb.jsonl": jsonl({**AFB, "content_sha256_16": "0" * 16})},
    ),
    Case(
        "agentfairbench-only-the-suffix",
        lambda w: load_profiles(w / "afb.jsonl", "agentfairbench", strip_suffixes=[AFB_SUFFIX]),
        "{in}/afb.jsonl: field 'content': line 1: text is empty after stripping",
        {
            "afb.jsonl": jsonl(
                {k: v for k, v in AFB.items() if k != "content_sha256_16"}
                | {"content": f" {AFB_SUFFIX} "}
            )
        },
    ),
]

STIMULI_HEADER, STIMULI_ROW, STIMULI_ROW_2 = (FIXTURES / "stimuli.csv").read_text().splitlines()


def stimuli(w: Where) -> object:
    return load_fairfund_stimuli(w / "stimuli.csv")


def stimuli_file(row: str, second: str = STIMULI_ROW_2) -> dict[str, str]:
    return {"stimuli.csv": f"{STIMULI_HEADER}\n{row}\n{second}\n"}


NAME_PAIRS = "resources/names/elder_hayes_pairs.csv"
STIMULI_CASES = [
    Case(
        "fairfund-category-outside-codebook",
        stimuli,
        "{in}/stimuli.csv: field 'category': line 2: 'Food' is not one of "
        "['Medical', 'Rent', 'Education']",
        stimuli_file(STIMULI_ROW.replace(",Rent,", ",Food,")),
    ),
    Case(
        "fairfund-word-count-not-integer",
        stimuli,
        "{in}/stimuli.csv: field 'word_count': line 2: 'eight' is not an integer",
        stimuli_file(STIMULI_ROW.replace(",8,", ",eight,")),
    ),
    Case(
        "fairfund-tolerance-not-boolean",
        stimuli,
        "{in}/stimuli.csv: field 'within_tolerance': line 3: 'yes' is not TRUE/FALSE",
        stimuli_file(STIMULI_ROW, STIMULI_ROW_2.replace(",TRUE", ",yes")),
    ),
    Case(
        "fairfund-full-name-absent-from-text",
        stimuli,
        "{in}/stimuli.csv: field 'full_name': line 2: 'Ann Lee' is not first last, in the text",
        stimuli_file(STIMULI_ROW.replace("I am Ann Lee", "I am Ann")),
    ),
    Case(
        "fairfund-duplicate-stimulus-id",
        stimuli,
        "{in}/stimuli.csv: field 'stimulus_id': line 3: duplicate 'rent_01__control__wm1' "
        "(first at line 2)",
        stimuli_file(STIMULI_ROW, STIMULI_ROW),
    ),
    Case(
        "fairfund-column-missing",
        stimuli,
        "{in}/stimuli.csv: field 'framing': required column missing (header is "
        f"{[c for c in STIMULI_HEADER.split(',') if c != 'framing']})",
        {
            "stimuli.csv": f"{STIMULI_HEADER.replace(',framing,', ',')}\n"
            f"{STIMULI_ROW.replace(',no_cause,', ',')}\n"
        },
    ),
    Case(
        "aid-name-not-a-configured-pair",
        lambda w: aid_stimuli(w / "stimuli.csv", load_name_pairs(ROOT / NAME_PAIRS)),
        "{in}/stimuli.csv: field 'full_name': line 2: 'Ann Lee' (White, male) is no configured "
        "name pair (decision.name_pairs): the aid domain shows FairFund's appeals under the "
        "configured pairs",
        stimuli_file(STIMULI_ROW),
    ),
]

# -- attribute lists -----------------------------------------------------------------------

TERMS = ROOT / "resources/decision/demographic_terms.txt"

ATTRIBUTE_CASES = [
    Case(
        "attributes-duplicate-entry",
        lambda w: load_attribute_list(w / "hobbies.txt"),
        "{in}/hobbies.txt: line 3: duplicate 'Hiking' (first at line 1)",
        {"hobbies.txt": "hiking\nchess  # board games\nHiking\n"},
    ),
    Case(
        "attributes-only-comments",
        lambda w: load_attribute_list(w / "hobbies.txt"),
        "{in}/hobbies.txt: no entries (only comments or blank lines)",
        {"hobbies.txt": "# hobbies\n\n   # none yet\n"},
    ),
    Case(
        "attributes-entry-with-a-pronoun",
        lambda w: check_attribute_list(
            w / "hobbies.txt", names=["Latoya Washington"], terms_path=TERMS
        ),
        "attribute {in}/hobbies.txt:2: field 'entry': contains the pronoun 'her'",
        {"hobbies.txt": "hiking\nwalking her dog\n"},
    ),
]


@pytest.mark.parametrize(
    "case",
    params(
        NAME_CASES
        + PAIR_CASES
        + EXPLICIT_CASES
        + DIALECT_CASES
        + DIALOG_CASES
        + BASE_CASES
        + PROFILE_CASES
        + STIMULI_CASES
        + ATTRIBUTE_CASES
    ),
)
def test_bad_resource_file(case: Case, tmp_path: Path) -> None:
    run_case(case, tmp_path)
