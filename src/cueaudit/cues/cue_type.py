"""What a cue type is, and the registry that orders the cue types.

A :class:`CueType` says how its condition ids are formed (``name_<source>``), the display
label and replication-package name of each condition, which groups it covers and which body
its prompts use, and how its config block ``cues.<config_key>`` becomes cue variants: where
its prepared resource lies, how many variants the block gives (known before any job runs),
how the prepared files are loaded and how the loaded resource turns into cue-variant rows
(:data:`CUE_COLUMNS`).

How a cue is worded in a prompt belongs to the study that words it (its templates); a cue
type may carry a ``default_template``, which a study uses for a type it has no wording of its
own for.

A cue type the decision audit can show carries a :class:`DecisionCue`: its name in
``decision.design.cues``, where a candidate's prompt shows it and the races and genders it
signals there. A registry may also hold decision cues that no probing condition has (the name
pairs).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Generic, TypeVar

import polars as pl

from cueaudit.cues.vocabulary import CUE_TAGS, NO_CUE, RACES

CUE_COLUMNS: Final = (
    "cue",
    "cue_type",
    "cue_source",
    "race",
    "gender",
    "cue_value",
    "cue_text",  # what a template's {value} shows: the value, or a dialog's history
    "body",
    "uid_variant",
)
#: Bodies a cue-variant row may use: the base prompt or its AAVE translation.
BODIES: Final = ("base", "dialect")
BASELINE_LABEL: Final = "No cue"
BASELINE_EXPORT_NAME: Final = "neutral"
_TEMPLATE_TAG: Final = re.compile(r"\b([A-Z]{3,}):")

#: The decision audit's order of the genders (its Latin squares deal them in it).
DECISION_GENDERS: Final = ("female", "male")
#: Where a decision prompt shows a cue: the candidate's name line (a full name pair, or a
#: first name drawn from a list, ``names_per_cell`` per race x gender), a statement line under
#: it (one per race x gender), or the candidate's own first-person words (one variety per race).
DECISION_SHOWS: Final = ("name_pair", "first_name", "statement", "own_words")

R = TypeVar("R")
#: (variants, note): the variants a config block gives, None when only building the
#: resource tells; the note says why, or that the count is nominal.
VariantCount = tuple[int | None, str | None]


def check_template(kind: str, template: str) -> str:
    """``template`` if it can put a cue value of ``kind`` in front of a prompt: one
    ``{value}``, ending in ``" {prompt}"`` (prefix and prompt are joined with one space, so
    words never fuse across the join and readability counts stay additive), and no tag
    outside :data:`cueaudit.cues.vocabulary.CUE_TAGS`; else ValueError."""
    if not (
        template.count("{value}") == 1
        and template.count("{prompt}") == 1
        and template.endswith(" {prompt}")
    ):
        raise ValueError(
            f"cue type {kind!r}: template {template!r} needs one {{value}} and must "
            "end with ' {prompt}'"
        )
    unknown = sorted(set(_TEMPLATE_TAG.findall(template)) - set(CUE_TAGS))
    if unknown:
        raise ValueError(
            f"cue type {kind!r}: template {template!r} has the tags {unknown}, which are not in "
            "cueaudit.cues.vocabulary.CUE_TAGS (the tags base prompts and cue values are "
            "checked for)"
        )
    return template


def concat_parquet(files: Sequence[str]) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(path) for path in files])


def load_frames(files: Sequence[str], settings: Mapping[str, Any], task: str) -> pl.DataFrame:
    """The default loader of a prepared resource: its parquet files, concatenated."""
    return concat_parquet(files)


@dataclass(frozen=True)
class CueCondition:
    """One condition of a cue type, i.e. one ``cue`` id of the prompt tables."""

    source: str | None  # fills ``{source}`` of the id pattern; None for a one-condition type
    label: str
    export_name: str  # the condition's name in the authors' replication package


@dataclass(frozen=True)
class DecisionCue:
    """A cue type as the decision audit shows it: ``name`` is its value in
    ``decision.design.cues`` and the prompt tables' ``cue`` column, ``shows`` one of
    :data:`DECISION_SHOWS`, and ``races`` and ``genders`` what it signals (its planned
    contrasts are among them; an empty one is a dimension it does not signal). A statement cue
    words each race x gender cell by ``descriptor(race, gender)`` (either None where its
    dimension is empty), shown by the prompts file's ``cue_lines.explicit_line``. A cue that
    signals all four races and both genders by a name pair or a statement fills the ranking
    bundles and probes."""

    name: str
    shows: str
    races: tuple[str, ...]
    genders: tuple[str, ...] = DECISION_GENDERS
    descriptor: Callable[[str | None, str | None], str] | None = None

    def __post_init__(self) -> None:
        if self.shows not in DECISION_SHOWS:
            raise ValueError(
                f"decision cue {self.name!r}: shows {self.shows!r}, not one of {DECISION_SHOWS}"
            )
        if (self.shows == "statement") != (self.descriptor is not None):
            raise ValueError(
                f"decision cue {self.name!r}: gives a descriptor exactly when it shows a statement"
            )
        unknown = sorted(set(self.races) - set(RACES)) + sorted(
            set(self.genders) - set(DECISION_GENDERS)
        )
        if unknown or not (self.races or self.genders):
            raise ValueError(
                f"decision cue {self.name!r}: signals races of {RACES} and genders of "
                f"{DECISION_GENDERS}, at least one of them (not {unknown or 'none'})"
            )

    @property
    def fills_bundles(self) -> bool:
        """Whether it can show the four-race Latin-square bundles of rankings and probes."""
        every = set(self.races) == set(RACES) and set(self.genders) == set(DECISION_GENDERS)
        return every and self.shows in ("name_pair", "statement")

    def signals_per_cell(self, names_per_cell: int) -> int:
        """Its signals per race x gender cell: ``names_per_cell`` names, else one."""
        return names_per_cell if self.shows in ("name_pair", "first_name") else 1

    def signals_per_profile(self, names_per_cell: int) -> int:
        """The Rate / Decide rows of one profile (per paraphrase) under this cue."""
        cells = max(len(self.races), 1) * max(len(self.genders), 1)
        return cells * self.signals_per_cell(names_per_cell)


@dataclass(frozen=True)
class CueType(Generic[R]):
    """A kind of cue.

    ``config_key`` names its block under ``cues:`` (present: the cue is on) and the keyword
    the expansion takes its loaded resource under. ``resource_path`` is where its prepared
    resource lies (default ``results/resources/<config_key>.parquet``); with ``{source}``,
    one file per condition source its block names. ``count(cue_type, block, base)`` gives
    the variants its block yields (:data:`VariantCount`; the block's relative paths are read
    under ``base``). ``load(files, settings, task)`` turns the prepared files into the
    resource ``variants(cue_type, resource)`` takes; ``settings`` holds only the
    ``load_keys`` of its block and ``task`` is the task whose prompts are built (default:
    the files concatenated). ``prepare(block)``, when given, builds the resource from the
    block alone (``workflow/scripts/prepare_cue_resource.py`` calls it). A type whose
    ``body`` is not the base prompt gives ``bodies(files, task)``: base_id and text of each
    of the task's base prompts in that body. ``default_template`` (``{value}`` and
    ``{prompt}``) is the wording a study uses when it has none of its own for the type;
    ``export_column`` is the replication-package column that carries the cue value.
    ``races`` are the races its probing conditions signal (``gendered``: and both genders);
    ``decision`` is its use in the decision audit, if any.
    """

    kind: str
    config_key: str
    id_pattern: str
    conditions: tuple[CueCondition, ...]
    variants: Callable[[CueType[R], R], pl.DataFrame]
    count: Callable[[CueType[R], Mapping[str, Any], Path], VariantCount]
    load: Callable[[Sequence[str], Mapping[str, Any], str], Any] = load_frames
    load_keys: tuple[str, ...] = ()
    resource_path: str | None = None
    prepare: Callable[[Mapping[str, Any]], pl.DataFrame] | None = None
    bodies: Callable[[Sequence[str], str], pl.DataFrame] | None = None
    default_template: str | None = None
    body: str = "base"
    gendered: bool = True
    export_column: str | None = None
    decision: DecisionCue | None = None
    races: tuple[str, ...] = field(kw_only=True)

    def __post_init__(self) -> None:
        if not self.conditions:
            raise ValueError(f"cue type {self.kind!r} has no conditions")
        if not set(self.races) <= set(RACES):
            raise ValueError(f"cue type {self.kind!r}: races {self.races} not all in {RACES}")
        if self.body not in BODIES:
            raise ValueError(f"cue type {self.kind!r}: body {self.body!r} is not one of {BODIES}")
        if (self.body == "base") != (self.bodies is None):
            raise ValueError(
                f"cue type {self.kind!r}: gives bodies exactly when its body is not 'base'"
            )
        sources = [c.source for c in self.conditions]
        slots = self.id_pattern.count("{source}")
        if slots == 1:
            well_formed = None not in sources and len(set(sources)) == len(sources)
        else:
            well_formed = slots == 0 and sources == [None]
        if not well_formed:
            raise ValueError(
                f"cue type {self.kind!r}: {self.id_pattern!r} needs distinct sources on its "
                "conditions if it has {source} (once), else one condition without a source"
            )
        if self.default_template is not None:
            check_template(self.kind, self.default_template)

    def cue_id(self, source: str | None) -> str:
        """Condition id of ``source``, e.g. ``name_rosenman``."""
        return self.id_pattern.replace("{source}", source or "")

    def cue_expr(self, source: pl.Expr) -> pl.Expr:
        """The condition id as an expression of the source column."""
        if "{source}" not in self.id_pattern:
            return pl.lit(self.id_pattern)
        before, after = self.id_pattern.split("{source}")
        return pl.lit(before) + source + pl.lit(after)

    def resource_files(self, block: Mapping[str, Any]) -> tuple[str, ...]:
        """The prepared resource files of the config block ``block``."""
        path = self.resource_path or f"results/resources/{self.config_key}.parquet"
        if "{source}" not in path:
            return (path,)
        return tuple(path.replace("{source}", source) for source in self.sources if source in block)

    @property
    def condition_ids(self) -> tuple[str, ...]:
        return tuple(self.cue_id(c.source) for c in self.conditions)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(c.source for c in self.conditions if c.source is not None)


class CueRegistry:
    """Cue types in expansion order: the prompt tables list their variants in this order.

    Figures and tables list conditions after the no-cue baseline in condition-id order, so
    relabelling a condition never reorders them.
    """

    def __init__(
        self, cue_types: Iterable[CueType[Any]] = (), decision_only: Iterable[DecisionCue] = ()
    ) -> None:
        self._types: dict[str, CueType[Any]] = {}
        self._decision_only = tuple(decision_only)
        for cue_type in cue_types:
            self.register(cue_type)

    def register(self, cue_type: CueType[Any]) -> CueType[Any]:
        """Add ``cue_type`` after the registered ones; its kind, config key and condition
        ids must be new."""
        clashes = [
            what
            for what, taken in (
                ("kind", cue_type.kind in self._types),
                ("config key", cue_type.config_key in {t.config_key for t in self}),
                ("condition id", bool(set(cue_type.condition_ids) & {NO_CUE, *self.cue_ids()})),
                (
                    "decision cue name",
                    cue_type.decision is not None
                    and cue_type.decision.name in self.decision_cues(),
                ),
            )
            if taken
        ]
        if clashes:
            raise ValueError(f"cue type {cue_type.kind!r}: {', '.join(clashes)} already taken")
        self._types[cue_type.kind] = cue_type
        return cue_type

    def unregister(self, kind: str) -> CueType[Any]:
        return self._types.pop(kind)

    def __iter__(self) -> Iterator[CueType[Any]]:
        return iter(list(self._types.values()))

    def __len__(self) -> int:
        return len(self._types)

    def __contains__(self, kind: object) -> bool:
        return kind in self._types

    def __getitem__(self, kind: str) -> CueType[Any]:
        return self._types[kind]

    def decision_cues(self) -> dict[str, DecisionCue]:
        """Name -> the decision audit's cue types: the decision-only ones, then those of the
        cue types in registry order (the order of the ``cue`` column's values)."""
        cues = [*self._decision_only, *(t.decision for t in self if t.decision is not None)]
        names = [cue.name for cue in cues]
        clash = sorted({name for name in names if names.count(name) > 1})
        if clash:
            raise ValueError(f"decision cue names taken twice: {clash}")
        return {cue.name: cue for cue in cues}

    def cue_ids(self) -> tuple[str, ...]:
        """Every condition id, in registry order."""
        return tuple(cid for t in self for cid in t.condition_ids)

    def _display(self) -> list[tuple[str, CueCondition]]:
        rows = [(t.cue_id(c.source), c) for t in self for c in t.conditions]
        return sorted(rows, key=lambda row: row[0])

    def labels(self) -> dict[str, str]:
        """Condition id -> display label, the baseline first, in display order."""
        return {NO_CUE: BASELINE_LABEL, **{cid: c.label for cid, c in self._display()}}

    def export_names(self) -> dict[str, str]:
        """Condition id -> name in the replication package, the baseline first."""
        names = {cid: c.export_name for cid, c in self._display()}
        return {NO_CUE: BASELINE_EXPORT_NAME, **names}

    def export_columns(self) -> dict[str, tuple[str, ...]]:
        """Replication-package column -> the kinds whose cue value it carries."""
        columns: dict[str, tuple[str, ...]] = {}
        for t in self:
            if t.export_column is not None:
                columns[t.export_column] = (*columns.get(t.export_column, ()), t.kind)
        return columns


def variant_rows(
    cue_type: CueType[Any],
    frame: pl.DataFrame,
    *,
    source: pl.Expr,
    value: pl.Expr,
    cue_text: pl.Expr | None = None,
    uid_variant: pl.Expr | None = None,
) -> pl.DataFrame:
    """Cue-variant rows of a frame with race and gender columns, one per frame row.

    ``cue_text`` is what a template shows (default: the cue value); ``uid_variant`` separates
    rows that share a cue value in the prompt uid.
    """
    return frame.select(
        cue=cue_type.cue_expr(source),
        cue_type=pl.lit(cue_type.kind),
        cue_source=source,
        race=pl.col("race"),
        gender=pl.col("gender"),
        cue_value=value,
        cue_text=value if cue_text is None else cue_text,
        body=pl.lit(cue_type.body),
        uid_variant=pl.lit(None, pl.String) if uid_variant is None else uid_variant,
    )
