"""The decision audit's pre-registration: the planned family, and a lock that binds the file,
the design, the stimuli and the software, is written once, and labels results."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from cueaudit.decision import preregistration
from cueaudit.decision.preregistration import (
    Registration,
    freeze,
    load_preregistration,
    read_lock,
    renew_check,
    stale_check,
    status,
    write_check,
)
from cueaudit.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config/decision/preregistration.yaml"
STIMULI = ("profiles.jsonl", "elder_hayes_pairs.csv", "hobbies.txt")


def test_shipped_file_plans_36_contrasts_with_the_published_margins() -> None:
    plan = load_preregistration(SHIPPED)
    assert len(plan.contrasts) == 36
    assert len({c.id for c in plan.contrasts}) == 36
    assert {c.domain for c in plan.contrasts} == {"hiring", "lending", "triage"}
    assert plan.margins == {"rate": 0.090, "rank": 0.067, "decide": None}
    assert plan.primary["domain"] == "hiring" and plan.primary["contrast"] == "black_vs_white"
    assert plan.alpha == 0.05


@pytest.fixture
def study(tmp_path: Path) -> Registration:
    """A pre-registration, a design and three stimulus files in a folder of their own."""
    shutil.copy(SHIPPED, tmp_path / "preregistration.yaml")
    shutil.copy(ROOT / "resources/decision/profiles.jsonl", tmp_path / STIMULI[0])
    shutil.copy(ROOT / "resources/names/elder_hayes_pairs.csv", tmp_path / STIMULI[1])
    shutil.copy(ROOT / "resources/decision/hobbies.txt", tmp_path / STIMULI[2])
    return Registration(
        tmp_path / "preregistration.yaml",
        {"design": {"domains": ["hiring"], "paraphrases": 1}, "models": ["m"]},
        {
            "profiles": tmp_path / STIMULI[0],
            "name_pairs": tmp_path / STIMULI[1],
            "hobbies": tmp_path / STIMULI[2],
        },
    )


def test_the_lock_binds_file_design_stimuli_and_software(
    study: Registration, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = tmp_path / "results/decision/preregistration.lock"
    assert not status(study, lock).pre_registered  # never frozen
    record = freeze(study, lock)
    assert set(record["files"]) == {"profiles", "name_pairs", "hobbies"}
    assert record["software"]["cueaudit"] and status(study, lock).pre_registered
    profiles = Path(study.files["profiles"])
    original = profiles.read_text()
    profiles.write_text(original.replace("years", "yrs", 1))
    after = status(study, lock)
    assert not after.pre_registered
    assert after.changed == (f"profiles ({profiles})",)
    assert after.reason.startswith(f"changed after the lock of {record['locked_at']}: profiles")
    profiles.write_text(original)
    assert status(study, lock).pre_registered
    design = Registration(
        study.preregistration,
        {**study.design, "design": {"domains": ["hiring"], "paraphrases": 2}},
        study.files,
    )
    assert status(design, lock).changed == ("the design settings (design)",)
    moved = tmp_path / "elsewhere.yaml"
    shutil.copy(study.preregistration, moved)  # the same content under another path
    elsewhere = Registration(moved, study.design, study.files)
    assert status(elsewhere, lock).changed == (
        f"the pre-registration path ({study.preregistration} locked, {moved} now)",
    )
    monkeypatch.setattr(
        preregistration, "software", lambda: {"cueaudit": "9.9", "git_commit": "abc"}
    )
    assert status(study, lock).changed[0].startswith("the software (cueaudit ")


def test_the_lock_is_written_once_whatever_the_file_says_later(
    study: Registration, tmp_path: Path
) -> None:
    lock = tmp_path / "lock"
    record = freeze(study, lock)
    prereg = Path(study.preregistration)
    prereg.write_text(prereg.read_text().replace("rate: 0.090", "rate: 0.200"))
    assert freeze(study, lock) == record
    assert read_lock(lock)["preregistration"]["sha256"] == record["preregistration"]["sha256"]
    after = status(study, lock)
    assert not after.pre_registered and str(prereg) in after.reason


def test_no_new_lock_once_answers_exist(study: Registration, tmp_path: Path) -> None:
    lock = tmp_path / "results/decision/preregistration.lock"
    shard = tmp_path / "results/responses/m/seed0/decision_rate_text/0.parquet"
    shard.parent.mkdir(parents=True)
    shard.write_bytes(b"PAR1")
    with pytest.raises(InputError, match="missing, but 1 decision-answer files already exist") as e:
        freeze(study, lock, answers=[tmp_path / "results/responses/m/seed0/decision_rate_text"])
    assert str(shard) in str(e.value) and "--directory" in str(e.value)
    assert not lock.exists()


def test_answers_generated_before_the_lock_are_not_pre_registered(
    study: Registration, tmp_path: Path
) -> None:
    lock = tmp_path / "lock"
    before = time.time() - 60
    freeze(study, lock)
    after = time.time() + 1
    assert status(study, lock, answered_at=[after, None, after]).pre_registered
    early = status(study, lock, answered_at=[before, after, before])
    assert not early.pre_registered and early.n_before_lock == 2
    assert "2 analysed answers were generated before the lock" in early.reason


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not json {", "damaged lock (not JSON"),
        (b"", "damaged lock (not JSON"),
        (b"[1, 2]", "damaged lock (not a JSON object)"),
        (b'{"version": 2, "locked_at": "x"}', "damaged lock (no 'locked_epoch')"),
        (b"\xff\xfe", "cannot read the lock"),
    ],
)
def test_a_damaged_lock_is_a_clear_error(
    study: Registration, tmp_path: Path, content: bytes, message: str
) -> None:
    lock = tmp_path / "lock"
    lock.write_bytes(content)
    for call in (lambda: status(study, lock), lambda: freeze(study, lock)):
        with pytest.raises(InputError, match=re.escape(message)) as error:
            call()
        assert error.value.source == str(lock)
    folder = tmp_path / "folder_lock"
    folder.mkdir()
    with pytest.raises(InputError, match="is a folder, not a lock file"):
        status(study, folder)


def test_a_lock_of_the_first_format_binds_the_file_only(
    study: Registration, tmp_path: Path
) -> None:
    lock = tmp_path / "lock"
    sha = preregistration.file_sha256(study.preregistration)
    lock.write_text(json.dumps({"file": "x", "sha256": sha, "locked_at": "2026-01-01T00:00:00Z"}))
    state = status(study, lock)
    assert not state.pre_registered and "binds the pre-registration file only" in state.reason


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    text = SHIPPED.read_text()
    assert old in text, old
    path = tmp_path / "prereg.yaml"
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize(
    ("old", "new", "message", "field"),
    [
        ("dimension: race, focal: Black", "dimension: sex, focal: Black", "unknown dimension 'sex'",
         "family.contrasts.black_vs_white.dimension"),
        ("focal: Black,", "focal: Balck,", "'Balck' is not a race level",
         "family.contrasts.black_vs_white.focal"),
        ("focal: Black, reference: White", "focal: White, reference: White",
         "focal and reference are the same level", "family.contrasts.black_vs_white.reference"),
        ("  interaction: [rate, rank]\n", "", "missing key 'interaction'", "primary"),
        ("interaction: [rate, rank]", "interaction: [rate, vote]", "'vote' is not a planned format",
         "primary.interaction"),
        ("interaction: [rate, rank]", "interaction: [rate, rate]", "two different formats",
         "primary.interaction"),
        ("  contrast: black_vs_white\n", "  contrast: purple_vs_white\n",
         "'purple_vs_white' is not a planned contrast", "primary.contrast"),
        ("alpha: 0.05\n", "alpha: 0.05\nalpha: 0.10\n", "key 'alpha' given twice, at lines",
         "alpha"),
        ("multiplicity: benjamini_hochberg", "multiplicity: bonferroni",
         "'bonferroni' is not one of", "multiplicity"),
    ],
)  # fmt: skip
def test_a_pre_registration_is_checked_before_it_can_be_locked(
    tmp_path: Path, old: str, new: str, message: str, field: str
) -> None:
    path = _edited(tmp_path, old, new)
    lock = tmp_path / "lock"
    with pytest.raises(InputError, match=message) as error:
        freeze(path, lock)
    assert error.value.field == field and not lock.exists()


def test_a_malformed_file_is_never_locked(tmp_path: Path) -> None:
    bad = tmp_path / "preregistration.yaml"
    bad.write_text("alpha: 0.05\nprimary: {}\nfamily: {domains: [hiring], formats: [rate]}\n")
    lock = tmp_path / "lock"
    with pytest.raises(InputError, match="missing key 'equivalence_margins'"):
        freeze(bad, lock)
    assert not lock.exists()
    bad.write_text(SHIPPED.read_text().replace("formats: [rate, decide, rank]", "formats: [vote]"))
    with pytest.raises(InputError, match="unknown format 'vote'"):
        load_preregistration(bad)


def test_a_check_that_no_longer_describes_its_lock_is_stale(
    study: Registration, tmp_path: Path
) -> None:
    lock, check = tmp_path / "results/lock", tmp_path / "results/checked"
    write_check(study.preregistration, study.design, study.files, lock=lock, answers=[], out=check)
    assert stale_check(check, lock) is None
    record = json.loads(lock.read_text())
    lock.write_text(json.dumps({**record, "locked_epoch": record["locked_epoch"] + 1}))
    assert stale_check(check, lock) == f"{lock} changed after its check was written"
    renew_check(check, lock)
    assert stale_check(check, lock) is None
    lock.unlink()
    assert stale_check(check, lock) == f"{lock} was removed after its check was written"
    # a check of an earlier version, which did not record the lock, is taken as it is
    check.write_text(json.dumps({"lock": str(lock), "pre_registered": True, "reason": "x"}))
    assert stale_check(check, lock) is None
