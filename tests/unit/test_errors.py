"""cueaudit's errors cross process boundaries intact (pools in the benchmarks and the
specification curve send a worker's error back to the parent by pickling it)."""

from __future__ import annotations

import multiprocessing
import pickle
from pathlib import Path

import pytest

from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.errors import MAX_MESSAGE_CHARS, InputError, few

ROOT = Path(__file__).resolve().parents[2]


def test_an_input_error_survives_pickling_with_its_parts() -> None:
    error = InputError("config/config.yaml", "must be positive", "decision.seeds")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is InputError
    assert (copy.source, copy.message, copy.field) == (error.source, error.message, error.field)
    assert str(copy) == "config/config.yaml: field 'decision.seeds': must be positive"


def _refuse(_: int) -> None:
    raise InputError("mixed model", "not identifiable")


def test_a_pool_worker_s_input_error_reaches_the_parent() -> None:
    with multiprocessing.get_context("fork").Pool(1) as pool:
        result = pool.map_async(_refuse, [0])
        with pytest.raises(InputError, match="mixed model: not identifiable"):
            result.get(timeout=60)


def test_a_message_listing_a_large_file_stays_short(tmp_path: Path) -> None:
    """A name-pair file of 50,000 pairs (1,250 copies of the shipped 40) was refused with a
    43 kB one-line message listing every rank: the list is cut to its start and count, and no
    message is longer than MAX_MESSAGE_CHARS and a note."""
    lines = (ROOT / "resources/names/elder_hayes_pairs.csv").read_text().splitlines()
    header, rows = lines[0], [line.split(",") for line in lines[1:]]
    big = [header]
    for copy in range(1250):
        for pair_id, race, gender, rank, first, last, _, source in rows:
            surname = f"{last}{copy}"
            big.append(
                f"{pair_id}-{copy},{race},{gender},{int(rank) + 10 * copy},{first},{surname},"
                f"{first} {surname},{source}"
            )
    path = tmp_path / "pairs.csv"
    path.write_text("\n".join(big) + "\n")
    with pytest.raises(InputError) as error:
        load_name_pairs(path)
    assert len(str(error.value)) < 300
    assert "name ranks [1, 2, 3, 4, 5, 11, 12, 13, …] (6250 in all)" in str(error.value)
    long = InputError("somewhere", "x" * 50_000)
    assert len(long.message) < MAX_MESSAGE_CHARS + 60
    assert long.message.endswith("(cut: the message is 50000 characters)")
    assert few([1, 2]) == "[1, 2]"
