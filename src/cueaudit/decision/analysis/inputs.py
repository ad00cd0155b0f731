"""What a decision analysis reads (:class:`AnalysisInputs`), and the frame helpers the
analyses share: the extension arms, an extension pooled with the primary rows, answer times."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import polars as pl

from cueaudit.decision.analysis.frames import PRIMARY, SCHEMAS, AnalysisFrames, empty
from cueaudit.decision.preregistration import (
    Preregistration,
    Registration,
    Status,
    load_preregistration,
    status,
)

FRAMES: Final = tuple(SCHEMAS)


@dataclass(frozen=True)
class AnalysisInputs:
    """What an analysis reads: the frames, its input files by name, its params, its threads."""

    frames: AnalysisFrames
    files: Mapping[str, Any]
    params: Mapping[str, Any]
    threads: int = 1

    def table(self, name: str) -> pl.DataFrame:
        """Another analysis' table, read from its CSV."""
        return pl.read_csv(self.files[name], infer_schema_length=None)

    def preregistration(self) -> Preregistration:
        return load_preregistration(self.files["preregistration"])

    def registration(self) -> Registration:
        """The pre-registration with the design and files its lock binds."""
        bound = self.params["registration"]
        return Registration(self.files["preregistration"], bound["design"], bound["files"])

    def lock_state(self, times: Sequence[float | None] | None = None) -> Status:
        """Whether results may be labelled pre-registered: the lock holds and every analysed
        answer (``times``; default the primary arm's) postdates it."""
        times = answered_at(self.frames) if times is None else times
        return status(self.registration(), self.params["registration"]["lock"], answered_at=times)


def extension_arms(frames: AnalysisFrames) -> list[str]:
    """The extension arms with rows in the frames (never the pre-registered one)."""
    arms: set[str] = set()
    for name in FRAMES:
        arms |= set(getattr(frames, name)["arm"].drop_nulls().to_list())
    return sorted(arms - {PRIMARY})


def pooled_with_primary(frames: AnalysisFrames, arm: str) -> AnalysisFrames:
    """The primary rows relabelled as ``arm`` beside the arm's own: an extension that adds
    to the pre-registered design (more bundles of the same kind) analysed with it."""
    relabel = pl.when(pl.col("arm") == PRIMARY).then(pl.lit(arm)).otherwise(pl.col("arm"))
    return AnalysisFrames(*(getattr(frames, n).with_columns(arm=relabel) for n in FRAMES))


def read_frames(paths: Mapping[str, str]) -> AnalysisFrames:
    return AnalysisFrames(*(pl.read_parquet(paths[name]) for name in FRAMES))


def answered_at(frames: AnalysisFrames, arm: str = PRIMARY) -> list[float | None]:
    """When each analysed answer of ``arm`` was generated (one time per ranking answer)."""
    data = frames.arm(arm)
    rankings = data.rankings.unique(["model", "seed", "task", "prompt_uid"])
    return [*data.judgements["generated"].to_list(), *rankings["generated"].to_list()]


def no_frames() -> AnalysisFrames:
    """Empty frames of the frames' schemas (an analysis that reads none)."""
    return AnalysisFrames(*(empty(SCHEMAS[name]) for name in FRAMES))
