"""Sequential top-ups declared in the pre-registration (cueaudit.decision.analysis.sequential):
the plan's checks, the looks and their decisions, and the type I error over the looks in
500 simulated null studies."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from cueaudit.config import validate_config
from cueaudit.decision.analysis.sequential import look_frames, sequential_looks, signed_z
from cueaudit.decision.analysis.simulate import build_design, simulate
from cueaudit.decision.analysis.simulation_settings import Extension, SimulationSettings
from cueaudit.decision.preregistration import SequentialPlan, load_preregistration
from cueaudit.decision.study import sequential_arms
from cueaudit.errors import InputError
from cueaudit.studies import STUDIES

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config/decision/preregistration.yaml"
PLAN = SequentialPlan(("topup",), (("hiring", "rank"),), (0.5, 1.0), "obrien_fleming")
PREREG = dataclasses.replace(load_preregistration(SHIPPED), sequential=PLAN)
DESIGN = {
    "domains": ["hiring"],
    "profiles_per_tier": 2,
    "names_per_cell": 1,
    "bundles_per_type": {
        "demographic_matched": 0,
        "irrelevant_matched": 0,
        "disguised_demographic": 24,
        "disguised_placebo": 0,
    },
    "probe_bundles": 0,
    "tasks": ["decision_rank_tool"],
}
TOPUP = Extension({"seed": 1, "bundles_per_type": {"disguised_demographic": 24}})


def _settings(**kw: object) -> SimulationSettings:
    fields = {"design": DESIGN, "models": ("m1",), "extensions": {"topup": TOPUP}} | kw
    return SimulationSettings(root=str(ROOT), **fields)


def _with_block(tmp_path: Path, block: object) -> Path:
    raw = yaml.safe_load(SHIPPED.read_text())
    raw["sequential"] = block
    path = tmp_path / "prereg.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


GOOD = {
    "arms": ["topup"],
    "cells": ["hiring.rank"],
    "information_fractions": [0.5, 1.0],
    "spending": "pocock",
}


def test_the_plan_is_read_from_the_pre_registration(tmp_path: Path) -> None:
    assert load_preregistration(SHIPPED).sequential is None
    plan = load_preregistration(_with_block(tmp_path, GOOD)).sequential
    assert plan == SequentialPlan(("topup",), (("hiring", "rank"),), (0.5, 1.0), "pocock")


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"arms": []}, "sequential.arms"),
        ({"arms": ["primary"]}, "sequential.arms"),
        ({"cells": ["hiring.vote"]}, "sequential.cells"),
        ({"cells": ["mining.rank"]}, "sequential.cells"),
        ({"information_fractions": [0.5]}, "sequential.information_fractions"),
        ({"information_fractions": [0.6, 0.4]}, "sequential.information_fractions"),
        ({"information_fractions": [0.5, 0.9]}, "sequential.information_fractions"),
        ({"spending": "haybittle"}, "sequential.spending"),
    ],
)
def test_a_bad_plan_names_its_key(tmp_path: Path, change: dict, key: str) -> None:
    with pytest.raises(InputError, match=rf"field '{key}'"):
        load_preregistration(_with_block(tmp_path, GOOD | change))
    bad = {k: v for k, v in GOOD.items() if k != "spending"}
    with pytest.raises(InputError, match="missing key 'spending'"):
        load_preregistration(_with_block(tmp_path, bad))


def test_looks_pool_the_top_up_and_decide_at_the_first_crossing() -> None:
    study = _settings().with_planted({("hiring", "rank", "black_vs_white"): 0.3})
    frames = simulate(study, 4)
    first, second = look_frames(frames, PLAN.arms, 1), look_frames(frames, PLAN.arms, 2)
    assert first.rankings.height * 2 == second.rankings.height == 2 * 24 * 4 * 2
    table = sequential_looks(frames, PREREG, pre_registered=True)
    assert table.height == 8 and set(table["look"]) == {1, 2}
    black = table.filter(pl.col("contrast") == "black_vs_white").sort("look")
    # O'Brien-Fleming at t = 0.5: z 2.963 two-sided (rpact), then 1.969
    assert black["critical_z"].to_list() == pytest.approx([2.962588, 1.968596], abs=1e-5)
    z = black["z"].to_list()
    decisions = black["decision"].to_list()
    if abs(z[0]) >= 2.962588:
        assert decisions == ["reject: stop", "rejected at look 1"]
    else:
        assert decisions[0] == "continue"
        assert decisions[1] == ("reject: stop" if abs(z[1]) >= 1.968596 else "not rejected")
    assert black["label"].to_list() == ["pre-registered interim", "pre-registered final look"]
    assert np.sign(z[1]) == np.sign(black["estimate"][1])
    locked_late = sequential_looks(frames, PREREG, pre_registered=False)
    assert locked_late["label"].str.starts_with("exploratory").all()


def test_an_interim_before_the_top_up_lists_the_later_look_as_planned() -> None:
    frames = simulate(_settings(extensions={}), 0)
    table = sequential_looks(frames, PREREG, pre_registered=True)
    later = table.filter(pl.col("look") == 2)
    assert later["decision"].to_list() == ["planned"] * 4
    assert later["estimate"].is_nan().all()
    assert table.filter(pl.col("look") == 1)["decision"].is_in(["continue", "reject: stop"]).all()
    none = sequential_looks(frames, load_preregistration(SHIPPED), pre_registered=True)
    assert none.is_empty()


def test_signed_z() -> None:
    assert signed_z(-0.3, 0.05) == pytest.approx(-1.959964)
    assert np.isnan(signed_z(float("nan"), 0.5))


#: A rejection rate at 0.05 over 500 null studies: within 2 binomial SDs (0.0097) of it (15 to
#: 35 rejections: P 0.011 of fewer, 0.02 of more under Binomial(500, 0.05)).
LEVEL = (0.03, 0.07)


@pytest.mark.slow
def test_type_one_error_over_the_looks_in_500_null_studies() -> None:
    """No planted effect; each study is a primary design of 48 disguised bundles and a top-up
    of 48 more, analysed at both looks (t = 0.5, 1) by the rank-ordered logit, the family's
    second estimator, for speed (the boundaries do not depend on the estimator). With 16
    name pairs and 48 bundles a look its t test holds its level (with 24 bundles and 8 pairs
    it does not: 0.061 to 0.07 at one look). The spending boundaries keep the error of the
    primary contrast over both looks within LEVEL; testing both looks at 1.96 (an error of
    0.083) does not. Fewer studies cannot tell 0.083 from 0.05: LEVEL's half-width is
    0.44 / sqrt(studies)."""
    larger = dict(DESIGN, names_per_cell=2)
    larger["bundles_per_type"] = dict(DESIGN["bundles_per_type"], disguised_demographic=48)
    topup = Extension({"seed": 1, "bundles_per_type": {"disguised_demographic": 48}})
    settings = _settings(design=larger, extensions={"topup": topup})
    design = build_design(settings)
    z = np.empty((500, 2))
    for i in range(500):
        table = sequential_looks(
            simulate(settings, 10_000 + i, design=design),
            PREREG,
            pre_registered=True,
            estimator="rologit",
        ).filter(pl.col("contrast") == "black_vs_white")
        z[i] = table.sort("look")["z"].to_numpy()
    assert np.isfinite(z).all()
    one_look = (np.abs(z[:, 1]) >= 1.959964).mean()
    assert LEVEL[0] <= one_look <= LEVEL[1], one_look  # one look holds its level
    critical = np.array([2.962588, 1.968596])
    sequential_error = (np.abs(z) >= critical).any(axis=1).mean()
    assert LEVEL[0] <= sequential_error <= LEVEL[1], sequential_error
    naive_error = (np.abs(z) >= 1.959964).any(axis=1).mean()
    print(f"type I error over both looks: {sequential_error:.3f}; both at 1.96: {naive_error:.3f}")
    assert not LEVEL[0] <= naive_error <= LEVEL[1], naive_error


def test_the_shipped_top_up_plan_matches_the_paper_design() -> None:
    plan = load_preregistration(ROOT / "config/decision/preregistration_topup.yaml").sequential
    assert plan is not None and plan.arms == ("precision_topup",)
    paper = yaml.safe_load((ROOT / "config/decision/paper.yaml").read_text())["decision"]
    topup = paper["extensions"]["precision_topup"]["design"]["bundles_per_type"]
    primary = paper["design"]["bundles_per_type"]["disguised_demographic"]
    rank_tasks = [t for t in paper["design"]["tasks"] if t.startswith("decision_rank")]
    first = primary * len(rank_tasks)
    fraction = first / (first + topup["disguised_demographic"])
    assert plan.fractions[0] == pytest.approx(fraction, abs=5e-4)


def test_a_look_whose_arm_adds_no_rows_to_the_cell_is_no_look() -> None:
    """A top-up arm with rows in another domain only used to repeat look 1's rows, estimate
    and SE as the final pre-registered look; it is no look and tests nothing."""
    elsewhere = Extension({"seed": 1, "domains": ["lending"]})
    frames = simulate(_settings(extensions={"topup": elsewhere}), 4)
    assert (frames.rankings["arm"] == "topup").any()
    table = sequential_looks(frames, PREREG, pre_registered=True).sort("contrast", "look")
    second = table.filter(pl.col("look") == 2)
    no_look = "no look: the arm added no rows to this cell"
    assert no_look in set(second["decision"]) <= {no_look, "rejected at look 1"}
    assert second["n_obs"].is_null().all() and second["estimate"].is_nan().all()


def test_a_top_up_arm_must_add_rows_to_every_cell_it_names(tmp_path: Path) -> None:
    """A top-up arm that runs another domain (or no task of the cell's format) would give a
    look with the rows, estimate and SE of the look before it: it is refused before any job,
    naming the arm and the cell; one that covers the cell is taken."""
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text(encoding="utf-8"))
    config["decision"]["preregistration"] = str(ROOT / "config/decision/preregistration_topup.yaml")
    config["decision"]["extensions"] = {
        "precision_topup": {
            "extension": True,
            "pool_with_primary": True,
            "design": {"domains": ["lending"], "seed": 1},
        }
    }
    validate_config(config, ROOT / "workflow/schemas/config.schema.yaml", STUDIES)
    with pytest.raises(InputError) as error:
        sequential_arms(config)
    assert error.value.field == "sequential.cells"
    assert "the top-up arm precision_topup adds no hiring.rank rows" in str(error.value)
    assert "domains ['lending']" in str(error.value)
    config["decision"]["extensions"]["precision_topup"]["design"] = {
        "domains": ["hiring"],
        "tasks": ["decision_rate_text"],
    }
    with pytest.raises(InputError, match=r"formats \['rate'\]"):
        sequential_arms(config)
    config["decision"]["extensions"]["precision_topup"]["design"] = {"seed": 1}
    assert list(sequential_arms(config)) == ["precision_topup"]
