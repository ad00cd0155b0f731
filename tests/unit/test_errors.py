"""cueaudit's errors cross process boundaries intact (pools in the benchmarks and the
specification curve send a worker's error back to the parent by pickling it)."""

from __future__ import annotations

import multiprocessing
import pickle

import pytest

from cueaudit.errors import InputError


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
