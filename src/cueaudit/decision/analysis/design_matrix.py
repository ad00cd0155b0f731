"""The regression data of one domain x format cell of the decision audit: the rows a cell
analyses (:func:`cell_rows`), its candidate columns (:func:`design_of`, a :class:`CellDesign`),
the columns a fit keeps (:func:`usable_columns`) and a contrast as a combination of them
(:func:`contrast_vector`).

Columns enter in a fixed order (intercept, design dummies, then the contrast dummies) and a
column is kept only if it is not a linear combination of those kept before it, so a dummy with
no variation in the cell (no woman in a single-gender sample, a model absent) is dropped and
the contrasts that need it come out as NaN with the reason; so do a dimension's contrasts when
its reference level (White, male) has no row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import numpy as np
import polars as pl

from cueaudit.decision.analysis.frames import POINTS_RULES, AnalysisFrames
from cueaudit.decision.design import BUNDLE_SIZE
from cueaudit.decision.preregistration import PlannedContrast
from cueaudit.decision.profiles import TIERS
from cueaudit.errors import InputError

#: The reference level of each contrast dimension, and the column that holds it.
BASELINES: Final[Mapping[str, str]] = {"race": "White", "gender": "male"}
DIMENSION_COLUMNS: Final[Mapping[str, str]] = {"race": "race", "gender": "gender"}
#: Design factors entered as fixed effects whenever they vary within a cell (the cue type only
#: where a fit pools cue types, as a specification of the curve may).
NUISANCE: Final = ("model", "mode", "paraphrase", "cue")
#: The ranking covariates' dummies: positions 2-4 and the tiers below the first (the
#: baselines are position 1 and tier clear_yes).
POSITION_DUMMIES: Final = tuple(range(2, BUNDLE_SIZE + 1))
TIER_DUMMIES: Final = TIERS[1:]
#: The bundles a demographic rank contrast is estimated from (see :mod:`.fitters`).
RANK_BUNDLE_TYPES: Final = ("disguised_demographic",)
JUDGEMENT_FACTORS: Final = ("profile_id", "pair_id")
ANSWER: Final = "answer_id"
#: The design columns whose values, joined, are a ranking answer's :data:`ANSWER` id. They
#: identify the same answers as ``frames.ANSWER_KEY``; the ids' order is the fits' order of
#: answers, so changing them moves estimates in their last bits.
ANSWER_ID_COLUMNS: Final = ("model", "seed", "task", "mode", "paraphrase", "bundle_id")
BUNDLE: Final = "bundle_id"
RANK_FACTORS: Final = ("profile_id", "pair_id", BUNDLE)
UNITS: Final[Mapping[str, str]] = {"rate": "points", "decide": "probability", "rank": "positions"}
#: The factors two cells share, whose labels a design keeps (leave-one-out; interactions).
SHARED_FACTORS: Final = ("pair_id", "profile_id")
_COLLINEAR_TOL: Final = 1e-9


class ContrastSpec(Protocol):
    """What a fit needs of a contrast (a :class:`PlannedContrast` is one)."""

    @property
    def contrast(self) -> str: ...
    @property
    def dimension(self) -> str: ...
    @property
    def focal(self) -> str: ...
    @property
    def reference(self) -> str: ...


@dataclass(frozen=True)
class CellDesign:
    """The regression data of one domain x format cell, before columns are selected.

    ``x`` holds every candidate column in entry order (``names``; ``roles`` says which are
    contrast dummies: ``"race[Black]"`` has role ``"race"``); ``groups`` the integer codes of
    each random factor; ``labels`` the raw dimension columns (to check that the reference
    level is present) and the shared factors (leave-one-out, interactions). :meth:`subset`
    keeps rows, :meth:`with_outcome` swaps the lmm's outcome, so one design serves many fits.
    ``unit`` is the outcome's unit as the tables print it (rank points name their scale).
    """

    format: str
    y: np.ndarray
    x: np.ndarray
    names: list[str]
    roles: list[str | None]
    groups: dict[str, np.ndarray]
    labels: dict[str, np.ndarray]
    rank: np.ndarray | None = None  # ranks (rank format)
    answer: np.ndarray | None = None  # ranking of each row (rank format)
    cluster: np.ndarray | None = None  # design bundle of each row (rank format)
    unit: str = ""

    @property
    def n(self) -> int:
        return len(self.y)

    def subset(self, keep: np.ndarray) -> CellDesign:
        def cut(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[keep]

        return dataclasses.replace(
            self,
            y=self.y[keep],
            x=self.x[keep],
            groups={k: v[keep] for k, v in self.groups.items()},
            labels={k: v[keep] for k, v in self.labels.items()},
            rank=cut(self.rank),
            answer=cut(self.answer),
            cluster=cut(self.cluster),
        )

    def with_outcome(self, y: np.ndarray) -> CellDesign:
        y = np.asarray(y, dtype=np.float64)
        if y.shape != self.y.shape:
            raise InputError("cell design", f"{y.shape} outcomes for {self.n} rows", "y")
        return dataclasses.replace(self, y=y)


def default_contrasts() -> tuple[PlannedContrast, ...]:
    """Black, Hispanic, Asian vs White and female vs male, named as the pre-registration."""
    pairs = [("race", r) for r in ("Black", "Hispanic", "Asian")] + [("gender", "female")]
    return tuple(
        PlannedContrast("", "", f"{f.lower()}_vs_{BASELINES[d].lower()}", d, f, BASELINES[d])
        for d, f in pairs
    )


def cell_rows(
    frames: AnalysisFrames,
    domain: str,
    fmt: str,
    *,
    bundle_types: Sequence[str] = RANK_BUNDLE_TYPES,
) -> pl.DataFrame:
    """The rows a cell analyses: parsed judgements of the domain and format, or the
    candidates of complete answers (all four ranked) to bundles of ``bundle_types`` (by
    default the estimand's, :data:`RANK_BUNDLE_TYPES`), with the answer id as :data:`ANSWER`."""
    if fmt in ("rate", "decide"):
        return frames.judgements.filter(
            (pl.col("domain") == domain) & (pl.col("format") == fmt) & pl.col("y").is_not_null()
        )
    if fmt != "rank":
        raise InputError("contrasts", f"unknown format {fmt!r}", "format")
    rows = frames.rankings.filter(
        (pl.col("domain") == domain) & pl.col("bundle_type").is_in(list(bundle_types))
    ).with_columns(
        pl.concat_str(
            [pl.col(c).cast(pl.String).fill_null("") for c in ANSWER_ID_COLUMNS], separator="\x1f"
        ).alias(ANSWER)
    )
    complete = (
        (pl.len().over(ANSWER) == BUNDLE_SIZE)
        & (pl.col("rank").is_not_null().sum().over(ANSWER) == BUNDLE_SIZE)
        & (pl.col("points").is_not_null().sum().over(ANSWER) == BUNDLE_SIZE)
    )
    return rows.filter(complete)


def dummies(
    values: np.ndarray, name: str, levels: Sequence[object]
) -> list[tuple[str, np.ndarray]]:
    """One indicator column ``name[level]`` of ``values == level`` per level, in order."""
    return [(f"{name}[{lv}]", (values == lv).astype(np.float64)) for lv in levels]


def rank_unit(rows: pl.DataFrame) -> str:
    """``positions`` with the points scale of the rows: ``positions (mid-rank points)``."""
    rules = sorted(set(rows["points_rule"].drop_nulls().to_list())) if rows.height else []
    if len(rules) > 1:
        raise InputError("ranking frame", f"several points scales {rules}", "points_rule")
    return f"{UNITS['rank']} ({(rules or [POINTS_RULES[0]])[0]} points)"


def design_of(
    rows: pl.DataFrame,
    fmt: str,
    dimensions: Mapping[str, str] = DIMENSION_COLUMNS,
    *,
    interaction: str | None = None,
) -> CellDesign:
    """The :class:`CellDesign` of a cell's rows (:func:`cell_rows`); ``dimensions`` maps each
    contrast dimension to the column holding it (the placebo cell reads race from
    ``pseudo_race``). ``interaction`` names a column of ``rows`` (``paraphrase``, say) whose
    levels after the first (sorted) each get their main effect, if it is not a nuisance
    factor already, and a product with every contrast dummy, ``race[Black]:paraphrase[p2]``
    (last, with the dummy's role): :func:`interaction_contrasts` reads them."""
    n = rows.height
    columns: list[tuple[str, np.ndarray]] = [("intercept", np.ones(n))]
    roles: list[str | None] = [None]
    factors = (*NUISANCE, interaction) if interaction not in (None, *NUISANCE) else NUISANCE
    for col in factors:
        values = rows[col].to_numpy()
        levels = sorted(set(values[~_is_null(values)]))
        columns += dummies(values, col, levels[1:])
    rank_format = fmt == "rank"
    if rank_format:
        columns += dummies(rows["position"].to_numpy(), "position", POSITION_DUMMIES)
        columns += dummies(rows["tier"].to_numpy(), "tier", TIER_DUMMIES)
    roles += [None] * (len(columns) - 1)
    labels: dict[str, np.ndarray] = {}
    for dim, col in {**DIMENSION_COLUMNS, **dimensions}.items():
        values = rows[col].to_numpy()
        labels[dim] = values
        present = sorted({v for v in values if v is not None} - {BASELINES[dim]})
        dims = dummies(values, dim, present)
        columns += dims
        roles += [dim] * len(dims)
    if interaction is not None:
        products = _interaction_columns(rows[interaction].to_numpy(), interaction, columns, roles)
        columns += [(name, column) for name, column, _ in products]
        roles += [role for _, _, role in products]
    for factor in SHARED_FACTORS:
        labels[factor] = rows[factor].to_numpy()
    factors = RANK_FACTORS if rank_format else JUDGEMENT_FACTORS
    y = rows["points" if rank_format else "y"].to_numpy().astype(np.float64)
    return CellDesign(
        format=fmt,
        y=y,
        x=np.column_stack([c for _, c in columns]) if n else np.zeros((0, len(columns))),
        names=[name for name, _ in columns],
        roles=roles,
        groups={f: np.unique(rows[f].to_numpy(), return_inverse=True)[1] for f in factors},
        labels=labels,
        rank=rows["rank"].to_numpy() if rank_format else None,
        answer=rows[ANSWER].to_numpy() if rank_format else None,
        cluster=rows[BUNDLE].to_numpy() if rank_format else None,
        unit=rank_unit(rows) if rank_format else UNITS[fmt],
    )


def _interaction_columns(
    values: np.ndarray,
    factor: str,
    columns: Sequence[tuple[str, np.ndarray]],
    roles: Sequence[str | None],
) -> list[tuple[str, np.ndarray, str | None]]:
    """Each contrast dummy times each level of ``factor`` after its first."""
    levels = sorted(set(values[~_is_null(values)]))
    products = []
    for level_name, level in dummies(values, factor, levels[1:]):
        for (name, column), role in zip(columns, roles, strict=True):
            if role is not None:
                products.append((f"{name}:{level_name}", column * level, role))
    return products


@dataclass(frozen=True)
class InteractionContrast:
    """A contrast read from a fit with an ``interaction`` factor (:func:`design_of`): at one
    level of the factor (``term`` the level's suffix, ``":paraphrase[p2]"``, or empty for the
    first level; ``main`` true: the contrast's dummies plus their products with the level),
    or the difference between that level and the first (``main`` false: the products only)."""

    contrast: str
    dimension: str
    focal: str
    reference: str
    term: str = ""
    main: bool = True


def interaction_contrasts(
    specs: Sequence[ContrastSpec], factor: str, levels: Sequence[str]
) -> dict[tuple[str, str, str], InteractionContrast]:
    """(contrast, level, ``"within"`` | ``"difference"``) -> the contrast at each level of
    ``factor`` and, for every level after the first (sorted ``levels``' first), its
    difference from the first."""
    first, *others = sorted(levels)
    out: dict[tuple[str, str, str], InteractionContrast] = {}
    for spec in specs:
        base = (spec.contrast, spec.dimension, spec.focal, spec.reference)
        out[(spec.contrast, first, "within")] = InteractionContrast(
            f"{spec.contrast}@{first}", *base[1:]
        )
        for level in others:
            term = f":{factor}[{level}]"
            out[(spec.contrast, level, "within")] = InteractionContrast(
                f"{spec.contrast}@{level}", *base[1:], term=term
            )
            out[(spec.contrast, level, "difference")] = InteractionContrast(
                f"{spec.contrast}@{level}-{first}", *base[1:], term=term, main=False
            )
    return out


def _is_null(values: np.ndarray) -> np.ndarray:
    return np.array([v is None for v in values], dtype=bool)


def _select(x: np.ndarray, candidates: Sequence[int]) -> tuple[list[int], list[int]]:
    """Columns of ``x`` (in order) that are not linear combinations of the ones kept before,
    by the residual of each column's Gram row on the kept block."""
    gram = x.T @ x
    kept: list[int] = []
    dropped: list[int] = []
    for j in candidates:
        own = gram[j, j]
        if kept:
            g = gram[np.ix_(kept, kept)]
            b = gram[kept, j]
            own = own - b @ np.linalg.solve(g, b)
        if gram[j, j] > 0 and own > _COLLINEAR_TOL * gram[j, j]:
            kept.append(j)
        else:
            dropped.append(j)
    return kept, dropped


def usable_columns(
    design: CellDesign, x: np.ndarray, usable: list[int]
) -> tuple[list[int], dict[str, str]]:
    """The columns of ``usable`` a fit of ``x`` (the design's columns, or a transformation of
    them) keeps, and why the others were left out."""
    reasons: dict[str, str] = {}
    candidates = []
    for j in usable:
        role = design.roles[j]
        if role is not None and not np.any(design.labels[role] == BASELINES[role]):
            reasons[design.names[j]] = f"no {BASELINES[role]} row to compare with"
            continue
        candidates.append(j)
    kept, dropped = _select(x, candidates)
    for j in dropped:
        constant = len(x) == 0 or np.ptp(x[:, j]) == 0
        reasons[design.names[j]] = (
            "no variation in the cell" if constant else "collinear with the columns before it"
        )
    return kept, reasons


def contrast_vector(
    names: list[str], spec: ContrastSpec, dropped: Mapping[str, str]
) -> tuple[np.ndarray | None, str | None]:
    """The contrast as weights on the kept columns ``names``, or None with the reason when a
    column it needs was dropped (``dropped``: column -> why)."""
    if spec.dimension not in BASELINES:
        raise InputError("contrasts", f"unknown dimension {spec.dimension!r}", "dimension")
    terms = [""]
    if isinstance(spec, InteractionContrast):
        terms = [""] * spec.main + [spec.term] * bool(spec.term)
    vector = np.zeros(len(names))
    for level, sign in ((spec.focal, 1.0), (spec.reference, -1.0)):
        if level == BASELINES[spec.dimension]:
            continue
        for term in terms:
            name = f"{spec.dimension}[{level}]{term}"
            if name not in names:
                return None, f"{name}: {dropped.get(name, 'no row in the cell')}"
            vector[names.index(name)] += sign
    return vector, None
