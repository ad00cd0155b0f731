"""The aid domain: FairFund-Bench's charitable-aid appeals (Lukk, arXiv 2607.28934; CC-BY-4.0)
as decision-audit candidates.

FairFund's ``stimuli.csv`` (read by :func:`cueaudit.decision.fairfund.load_fairfund_stimuli`
from the configured ``decision.fairfund_stimuli``, never copied into the repository) crosses
15 scenarios (5 per category: Medical, Rent, Education) × 5 causal framings × 4 races × 2
genders × 5 name pairs; each appeal is first-person ("Hi, my name is <full name> ..."), so the
name is inside the text. Here

* a **profile** is one scenario × framing (75: ``aid/<scenario_id>/<framing>``); its
  ``title`` is FairFund's ``scenario_label``; its ``tier`` is the *category*, coded onto the
  three tier symbols (:data:`CATEGORY_TIERS`): the disguised Latin squares balance race over
  the tier column (and the rank model holds it fixed), and the category is the axis FairFund's
  disguised bundles co-vary with. It is no quality tier: the framing, FairFund's
  deservingness ladder, varies within each category and is absorbed by the profile;
* a **name pair** is the configured name pair (``decision.name_pairs``) with FairFund's race,
  gender, first and last name: every stimulus must match one;
* an **appeal** (:func:`aid_appeals`) is the text of one profile under one name pair, which
  the prompt builder shows in place of the profile text (the aid domain has no name line:
  ``name_in_text`` in the prompts file).

So the design's crossings and bundle types apply unchanged: Rate crosses ``profiles_per_tier``
(at most 25) profiles of each category with ``names_per_cell`` pairs of each race × gender
cell (FairFund's 600 Rate prompts are 25 × 3 × 8 × 1); ``demographic_matched`` bundles are
FairFund's ``race_transparent`` (one appeal under four names of one gender, one per race) and
``disguised_demographic`` its ``race_disguised`` (four appeals, four races, Latin squares).
The appeals are FairFund's own stimuli and are not put through the profile check: their name
is the cue, by construction.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import polars as pl

from cueaudit.decision.fairfund import load_fairfund_stimuli
from cueaudit.decision.formats import AID_DOMAIN
from cueaudit.decision.profiles import PROFILE_SCHEMA, TIERS
from cueaudit.errors import InputError

#: FairFund's category -> the tier symbol its profiles carry (the stratum of the squares).
CATEGORY_TIERS: Final = dict(zip(("Medical", "Rent", "Education"), TIERS, strict=True))
AID_SOURCE: Final = "fairfund-bench"
APPEAL_SCHEMA: Final = {"profile_id": pl.String, "pair_id": pl.String, "text": pl.String}
#: Stands for the name in a profile's text (the appeals themselves hold the names).
NAME_PLACEHOLDER: Final = "[name]"
#: The clause of an appeal that introduces the writer by name, in every form of FairFund's
#: stimuli ("Hi, my name is [name] and I'm ...", "Hello! I'm [name] and ...", "My name is
#: [name]. I'm ..."): taken out, the appeal reads "Hi, I'm ...", "I'm ...".
INTRODUCTION: Final = re.compile(
    rf"(?:[Mm]y name is|I'm|I am) {re.escape(NAME_PLACEHOLDER)}(?: and |\. )"
)


def aid_profile_id(scenario_id: str, framing: str) -> str:
    return f"{AID_DOMAIN}/{scenario_id}/{framing}"


def aid_stimuli(stimuli_path: str | Path, name_pairs: pl.DataFrame) -> pl.DataFrame:
    """FairFund's stimuli with their ``profile_id`` and the ``pair_id`` of the configured name
    pair they show. Raises InputError naming the stimuli file, its line and field for a
    stimulus whose name is no configured pair, and when a scenario × framing × pair is there
    twice."""
    src = str(stimuli_path)
    stimuli = load_fairfund_stimuli(stimuli_path).with_row_index("line", offset=2)
    keyed = stimuli.with_columns(
        profile_id=pl.concat_str(pl.lit(f"{AID_DOMAIN}/"), "scenario_id", pl.lit("/"), "framing"),
        gender=pl.col("gender").str.to_lowercase(),
    ).join(
        name_pairs.select("race", "gender", "first", "last", "pair_id"),
        on=["race", "gender", "first", "last"],
        how="left",
    )
    unmatched = keyed.filter(pl.col("pair_id").is_null())
    if unmatched.height:
        row = unmatched.sort("line").row(0, named=True)
        raise InputError(
            src,
            f"line {row['line']}: {row['full_name']!r} ({row['race']}, {row['gender']}) is no "
            "configured name pair (decision.name_pairs): the aid domain shows FairFund's "
            "appeals under the configured pairs",
            "full_name",
        )
    twice = keyed.filter(pl.len().over("profile_id", "pair_id") > 1).sort("line")
    if twice.height:
        row = twice.row(0, named=True)
        raise InputError(
            src,
            f"line {row['line']}: {row['scenario_id']} / {row['framing']} / {row['full_name']} "
            "appears more than once",
            "stimulus_id",
        )
    return keyed.sort("line")


def aid_profiles(stimuli: pl.DataFrame) -> pl.DataFrame:
    """One profile per scenario × framing (:data:`PROFILE_SCHEMA`, domain ``aid``, first
    stimulus order), its text the first appeal with the name replaced by
    :data:`NAME_PLACEHOLDER` (prompts show the appeals, :func:`aid_appeals`)."""
    first = stimuli.group_by("profile_id", maintain_order=True).first()
    masked = [t.replace(n, NAME_PLACEHOLDER) for t, n in first.select("text", "full_name").rows()]
    return (
        first.with_columns(text=pl.Series(masked, dtype=pl.String))
        .select(
            "profile_id",
            domain=pl.lit(AID_DOMAIN),
            tier=pl.col("category").replace_strict(CATEGORY_TIERS),
            title=pl.col("scenario_label"),
            text=pl.col("text"),
            source=pl.lit(AID_SOURCE),
        )
        .cast(PROFILE_SCHEMA)
    )


def aid_appeals(stimuli: pl.DataFrame) -> pl.DataFrame:
    """Each profile's appeal under each name pair (:data:`APPEAL_SCHEMA`)."""
    return stimuli.select(list(APPEAL_SCHEMA)).cast(APPEAL_SCHEMA)


def with_aid(
    profiles: pl.DataFrame,
    name_pairs: pl.DataFrame,
    stimuli_path: str | Path | None,
    domains: Sequence[str],
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """``profiles`` with the aid profiles appended and the appeals, when ``domains`` (every
    arm's, together) include the aid domain; else ``profiles`` and None. The aid domain needs
    ``stimuli_path`` (the config's ``decision.fairfund_stimuli``)."""
    if AID_DOMAIN not in domains:
        return profiles, None
    if stimuli_path is None:
        raise InputError(
            "config",
            "the aid domain shows FairFund-Bench's stimuli: set decision.fairfund_stimuli to "
            "its stimuli.csv",
            "decision.fairfund_stimuli",
        )
    stimuli = aid_stimuli(stimuli_path, name_pairs)
    return pl.concat([profiles, aid_profiles(stimuli)]), aid_appeals(stimuli)


def first_name_appeal(text: str, first_name: str) -> str:
    """A profile's appeal (its text with :data:`NAME_PLACEHOLDER`) introduced by a first name
    alone: "Hi, my name is Tyrone and I'm ..." (the ``first_name`` cue)."""
    return text.replace(NAME_PLACEHOLDER, first_name)


def neutral_appeal(text: str, profile_id: str) -> str:
    """A profile's appeal without the name: its introduction (:data:`INTRODUCTION`) taken out,
    "Hi, my name is [name] and I'm looking ..." -> "Hi, I'm looking ..." (the cues that must
    carry the race signal alone: explicit, dialect). Raises InputError naming the profile
    when the appeal introduces its writer in another way, or names them again."""
    neutral, found = INTRODUCTION.subn("", text, count=1)
    if not found or NAME_PLACEHOLDER in neutral:
        raise InputError(
            "aid appeals",
            f"{profile_id}: cannot take the name out of the appeal: it "
            + ("names the writer more than once" if found else "has no introduction")
            + " of the form 'my name is <name> and' or \"I'm <name> and\"",
            "text",
        )
    return neutral
