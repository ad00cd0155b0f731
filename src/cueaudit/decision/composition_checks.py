"""The composition checks of the decision audit: is a contrast group (race, gender, a placebo's
pseudo-race, a wording or attribute, the half of the list) independent of profile, tier and
position, in a design built balanced (:func:`check_design`, exact where the construction
guarantees it) or in any subsample (:func:`check_composition`, a chi-square test)? A failure
names the offending cells (:class:`CompositionError`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl
from scipy import stats

from cueaudit.decision.design import BUNDLE_SIZE, HALVES, PROFILE_KEYS, require_columns
from cueaudit.errors import CueauditError


class CompositionError(CueauditError, ValueError):
    """A design whose contrast group is not independent of profile, tier or position."""


@dataclass(frozen=True)
class CompositionTest:
    """One group × factor table of one stratum that passed."""

    name: str
    stratum: str
    group: str
    against: str
    exact: bool
    statistic: float
    p_value: float
    n: int


def _count(value: float) -> str:
    return str(round(value)) if abs(value - round(value)) < 1e-9 else f"{value:.1f}"


def _stratum_label(by: Sequence[str], key: tuple[Any, ...]) -> str:
    return ", ".join(f"{b}={v}" for b, v in zip(by, key, strict=True))


def check_composition(
    frame: pl.DataFrame,
    *,
    group: str = "race",
    against: Sequence[str] = ("profile_id", "tier", "position"),
    name: str = "design",
    by: Sequence[str] = (),
    exact: bool = False,
    alpha: float = 0.05,
    max_cells: int = 6,
) -> list[CompositionTest]:
    """Test that ``group`` is independent of each column of ``against`` (within each stratum
    of ``by``) in a frame of one row per candidate; list-typed columns (a ranking prompt
    table) are exploded first. Rows with a null group or factor are left out.

    ``exact``: every cell must hold exactly its count under independence (row total × column
    total / n), for a design balanced by construction; otherwise a chi-square test of
    independence (scipy) at ``alpha``, for a subsample or a design balanced only on average.
    (Exactness cannot be read off the margins: any set of whole disguised bundles has even
    race and position margins without being balanced.) Failures raise
    :class:`CompositionError` naming the offending cells, the most deviant first, e.g.
    "race=Black × tier=clear_no: 0 of expected 12".
    """
    listed = [c for c in (group, *against) if isinstance(frame.schema.get(c), pl.List)]
    if listed:
        frame = frame.explode(listed)
    require_columns(frame, (group, *against, *by), name)
    results = []
    strata = frame.partition_by(list(by), as_dict=True) if by else {(): frame}
    for key, part in sorted(strata.items(), key=lambda kv: tuple(map(str, kv[0]))):
        label = _stratum_label(by, key)
        for factor in against:
            results.append(_test(part, group, factor, name, label, exact, alpha, max_cells))
    return results


def _contingency(
    frame: pl.DataFrame, group: str, factor: str
) -> tuple[list[Any], list[Any], np.ndarray, np.ndarray]:
    """Levels of ``group`` and ``factor``, observed counts and counts under independence."""
    rows = frame.select(group, factor).drop_nulls()
    groups = sorted(set(rows[group].to_list()), key=str)
    levels = sorted(set(rows[factor].to_list()), key=str)
    observed = np.zeros((len(groups), len(levels)))
    counts = Counter(zip(rows[group].to_list(), rows[factor].to_list(), strict=True))
    for (g, level), n in counts.items():
        observed[groups.index(g), levels.index(level)] = n
    total = observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / max(total, 1.0)
    return groups, levels, observed, expected


def composition_cells(frame: pl.DataFrame, group: str, factor: str) -> pl.DataFrame:
    """Every ``group`` × ``factor`` cell of a frame (nulls left out): its count, its count
    under independence (row total × column total / n) and the Pearson residual."""
    groups, levels, observed, expected = _contingency(frame, group, factor)
    cells = [
        (str(groups[i]), str(levels[j]), int(observed[i, j]), float(expected[i, j]))
        for i, j in np.ndindex(observed.shape)
    ]
    schema = {"group_level": pl.String, "factor_level": pl.String}
    table = pl.DataFrame(
        cells, schema=schema | {"observed": pl.Int64, "expected": pl.Float64}, orient="row"
    )
    residual = (pl.col("observed") - pl.col("expected")) / pl.col("expected").sqrt()
    return table.with_columns(residual=residual)


def _test(
    frame: pl.DataFrame,
    group: str,
    factor: str,
    name: str,
    stratum: str,
    exact: bool,
    alpha: float,
    max_cells: int,
) -> CompositionTest:
    groups, levels, observed, expected = _contingency(frame, group, factor)
    total = observed.sum()
    statistic, p_value = 0.0, 1.0
    if len(groups) > 1 and len(levels) > 1:
        statistic = float(((observed - expected) ** 2 / expected).sum())
        p_value = float(stats.chi2.sf(statistic, (len(groups) - 1) * (len(levels) - 1)))
    failed = bool(np.any(np.abs(observed - expected) > 1e-9)) if exact else p_value < alpha
    if failed:
        residual = np.abs(observed - expected) / np.sqrt(expected)
        off = [ij for ij in np.ndindex(observed.shape) if abs(observed[ij] - expected[ij]) > 1e-9]
        worst = sorted(off, key=lambda ij: -residual[ij])
        cells = "; ".join(
            f"{group}={groups[i]} × {factor}={levels[j]}: "
            f"{_count(observed[i, j])} of expected {_count(expected[i, j])}"
            for i, j in worst[:max_cells]
        )
        where = f"{name} ({stratum})" if stratum else name
        test = "not balanced" if exact else f"chi-square {statistic:.1f}, p = {p_value:.2g}"
        raise CompositionError(f"{where}: {group} depends on {factor} ({test}): {cells}")
    return CompositionTest(name, stratum, group, factor, exact, statistic, p_value, int(total))


Checks = tuple[tuple[str, tuple[str, ...]], ...]
#: The composition each bundle type is built to have: (group, factors it is independent of),
#: within each domain and replicate. ``half`` is the half of the list (:func:`with_half`).
COMPOSITION_CHECKS: Final[Mapping[str, Checks]] = {
    "demographic_matched": (("race", ("profile_id", "tier", "position")),),
    "irrelevant_matched": (("attribute", ("position",)), ("race", ("position",))),
    "disguised_demographic": (("race", ("profile_id", "tier", "position")),),
    "disguised_placebo": (
        ("pseudo_race", ("profile_id", "tier", "position")),
        ("race", ("profile_id", "tier", "position")),
    ),
    "paraphrase_matched": (
        ("race", ("profile_id", "tier", "position")),
        ("attribute", ("position", "race")),
    ),
    "name_matched": (("race", ("position",)), ("gender", ("position",))),
    "position_balanced": (
        ("race", ("profile_id", "tier", "position")),
        ("gender", ("profile_id", "tier", "position")),
        ("half", ("profile_id", "tier")),
    ),
}
#: The composition every single bundle of a type has (within each bundle): in a
#: position-balanced bundle race, gender and the half of the list are mutually orthogonal.
WITHIN_BUNDLE: Final[Mapping[str, Checks]] = {
    "position_balanced": (("race", ("half", "gender")), ("gender", ("half",))),
}


def with_half(frame: pl.DataFrame) -> pl.DataFrame:
    """A candidate frame with ``half``, the half of the list of its ``position``
    (:data:`HALVES`), unless it has one."""
    if "half" in frame.columns:
        return frame
    second = pl.col("position") > BUNDLE_SIZE // 2
    return frame.with_columns(
        half=pl.when(second).then(pl.lit(HALVES[1])).otherwise(pl.lit(HALVES[0]))
    )


def check_design(bundles: pl.DataFrame) -> list[CompositionTest]:
    """Every bundle type's :data:`COMPOSITION_CHECKS` within each domain and replicate and its
    :data:`WITHIN_BUNDLE` checks within each bundle, exact where the construction
    guarantees it: always, except a factor against the profile in types whose profiles are
    assigned by search (:data:`PROFILE_KEYS`) when a tier's profile count does not divide 4
    (then chi-square)."""
    results = []
    for kind, checks in COMPOSITION_CHECKS.items():
        part = with_half(bundles.filter(pl.col("bundle_type") == kind))
        if part.is_empty():
            continue
        per_tier = part.group_by("domain", "tier").agg(pl.col("profile_id").n_unique())
        even = all(BUNDLE_SIZE % n == 0 for n in per_tier["profile_id"])
        for group, factors in checks:
            for factor in factors:
                exact = even or factor != "profile_id" or kind not in PROFILE_KEYS
                results += check_composition(
                    part,
                    group=group,
                    against=(factor,),
                    name=kind,
                    by=("domain", "replicate"),
                    exact=exact,
                )
        for group, factors in WITHIN_BUNDLE.get(kind, ()):
            results += check_composition(
                part,
                group=group,
                against=factors,
                name=f"{kind} (each bundle)",
                by=("domain", "replicate", "bundle_index"),
                exact=True,
            )
    return results
