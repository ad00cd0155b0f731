"""Registry of cue types: one row per kind of cue, everything the studies derive from it.

A :class:`CueType` says how its condition ids are formed (``name_<source>``), the display
label and replication-package name of each condition, the prompt template that puts a cue
value in front of the prompt, which body the prompt uses, which groups it covers, and the
function that turns the type's prepared resource into cue-variant rows (:data:`CUE_COLUMNS`).
A new cue type is a module with that function plus one :class:`CueType` in :data:`REGISTRY`;
the expansion, the display labels, the export names and the simulator's design follow.

The templates are Table 2's wording. They sit on the rows, with the labels and export names
(equally the probing study's), because a row without its template cannot be expanded; a study
that words its prompts differently builds its own :class:`CueRegistry` from
``dataclasses.replace(row, template=...)`` and passes it to the expansion.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

import polars as pl

from cueaudit.cues.vocabulary import DIALOG_SOURCES, NAME_SOURCES, NO_CUE, RACES

CUE_COLUMNS: Final = (
    "cue",
    "cue_type",
    "cue_source",
    "race",
    "gender",
    "cue_value",
    "prefix",
    "body",
    "uid_variant",
)
#: Bodies a cue-variant row may use: the base prompt or its AAVE translation.
BODIES: Final = ("base", "dialect")
BASELINE_LABEL: Final = "No cue"
BASELINE_EXPORT_NAME: Final = "neutral"

# Table 2's prefixes. A newline separates the memory line from the USER tag and a space the
# tag from the prompt, so words never fuse across the joins (readability counts stay additive).
NAME_TEMPLATE: Final = "[MEMORY: User name is {value}]\nUSER: {prompt}"
EXPLICIT_TEMPLATE: Final = "[MEMORY: User is {value}]\nUSER: {prompt}"
DIALOG_TEMPLATE: Final = "{value}\nUSER: {prompt}"

R = TypeVar("R")


@dataclass(frozen=True)
class CueCondition:
    """One condition of a cue type, i.e. one ``cue`` id of the prompt tables."""

    source: str | None  # fills ``{source}`` of the id pattern; None for a one-condition type
    label: str
    export_name: str  # the condition's name in the authors' replication package


@dataclass(frozen=True)
class CueType(Generic[R]):
    """A kind of cue; ``variants(cue_type, resource)`` returns its rows of :data:`CUE_COLUMNS`.

    ``resource`` is the keyword :func:`cueaudit.probing.expansion.cue_variants` takes the
    prepared resource under; ``template`` has ``{value}`` and ``{prompt}`` (None: no prefix);
    ``export_column`` is the replication-package column that carries the cue value.
    """

    kind: str
    resource: str
    id_pattern: str
    conditions: tuple[CueCondition, ...]
    variants: Callable[[CueType[R], R], pl.DataFrame]
    template: str | None = None
    body: str = "base"
    races: tuple[str, ...] = RACES
    gendered: bool = True
    export_column: str | None = None

    def __post_init__(self) -> None:
        if not self.conditions:
            raise ValueError(f"cue type {self.kind!r} has no conditions")
        if self.body not in BODIES:
            raise ValueError(f"cue type {self.kind!r}: body {self.body!r} is not one of {BODIES}")
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
        template = self.template
        # The expansion joins prefix and prompt with one space, so the template must too.
        if template is not None and not (
            template.count("{value}") == 1
            and template.count("{prompt}") == 1
            and template.endswith(" {prompt}")
        ):
            raise ValueError(
                f"cue type {self.kind!r}: template {template!r} needs one {{value}} and must "
                "end with ' {prompt}'"
            )

    def cue_id(self, source: str | None) -> str:
        """Condition id of ``source``, e.g. ``name_rosenman``."""
        return self.id_pattern.replace("{source}", source or "")

    def cue_expr(self, source: pl.Expr) -> pl.Expr:
        """The condition id as an expression of the source column."""
        if "{source}" not in self.id_pattern:
            return pl.lit(self.id_pattern)
        before, after = self.id_pattern.split("{source}")
        return pl.lit(before) + source + pl.lit(after)

    def prefix_expr(self, value: pl.Expr) -> pl.Expr:
        """The template up to the prompt with ``value`` filled in (None without a template).

        The expansion puts the prompt after the prefix and one space, so that space is not
        part of the prefix.
        """
        if self.template is None:
            return pl.lit(None, pl.String)
        head = self.template.removesuffix(" {prompt}")
        before, after = head.split("{value}")
        return pl.lit(before) + value + pl.lit(after)

    @property
    def condition_ids(self) -> tuple[str, ...]:
        return tuple(self.cue_id(c.source) for c in self.conditions)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(c.source for c in self.conditions if c.source is not None)


#: (cue_type, cue_source, races carried, carries gender), the simulator's design of a condition.
Design = tuple[str, str | None, tuple[str, ...], bool]


class CueRegistry:
    """Cue types in expansion order: ``cue_variants`` emits their rows in this order.

    Figures and tables list conditions after the no-cue baseline in condition-id order, so
    relabelling a condition never reorders them.
    """

    def __init__(self, cue_types: Iterable[CueType[Any]] = ()) -> None:
        self._types: dict[str, CueType[Any]] = {}
        for cue_type in cue_types:
            self.register(cue_type)

    def register(self, cue_type: CueType[Any]) -> CueType[Any]:
        """Add ``cue_type`` after the registered ones; its kind, resource keyword and
        condition ids must be new."""
        clashes = [
            what
            for what, taken in (
                ("kind", cue_type.kind in self._types),
                ("resource", cue_type.resource in {t.resource for t in self}),
                ("condition id", bool(set(cue_type.condition_ids) & {NO_CUE, *self.cue_ids()})),
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

    def cue_ids(self) -> tuple[str, ...]:
        """Every condition id, in registry order."""
        return tuple(cid for t in self for cid in t.condition_ids)

    def _display(self) -> list[tuple[str, CueType[Any], CueCondition]]:
        rows = [(t.cue_id(c.source), t, c) for t in self for c in t.conditions]
        return sorted(rows, key=lambda row: row[0])

    def labels(self) -> dict[str, str]:
        """Condition id -> display label, the baseline first, in display order."""
        return {NO_CUE: BASELINE_LABEL, **{cid: c.label for cid, _, c in self._display()}}

    def export_names(self) -> dict[str, str]:
        """Condition id -> name in the replication package, the baseline first."""
        names = {cid: c.export_name for cid, _, c in self._display()}
        return {NO_CUE: BASELINE_EXPORT_NAME, **names}

    def design(self) -> dict[str, Design]:
        """Condition id -> (cue_type, cue_source, races, gendered), in display order."""
        return {cid: (t.kind, c.source, t.races, t.gendered) for cid, t, c in self._display()}

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
    prefix_value: pl.Expr | None = None,
    uid_variant: pl.Expr | None = None,
) -> pl.DataFrame:
    """Cue-variant rows of a frame with race and gender columns, one per frame row.

    ``prefix_value`` fills the template (default: the cue value); ``uid_variant`` separates
    rows that share a cue value in the prompt uid.
    """
    return frame.select(
        cue=cue_type.cue_expr(source),
        cue_type=pl.lit(cue_type.kind),
        cue_source=source,
        race=pl.col("race"),
        gender=pl.col("gender"),
        cue_value=value,
        prefix=cue_type.prefix_expr(value if prefix_value is None else prefix_value),
        body=pl.lit(cue_type.body),
        uid_variant=pl.lit(None, pl.String) if uid_variant is None else uid_variant,
    )


def name_variants(cue_type: CueType[pl.DataFrame], names: pl.DataFrame) -> pl.DataFrame:
    """Names (name, race, gender, source; see cueaudit.cues.names)."""
    return variant_rows(cue_type, names, source=pl.col("source"), value=pl.col("name"))


def explicit_variants(cue_type: CueType[pl.DataFrame], explicit: pl.DataFrame) -> pl.DataFrame:
    """Descriptors (descriptor, category, race, gender; see cueaudit.cues.explicit)."""
    return variant_rows(cue_type, explicit, source=pl.col("category"), value=pl.col("descriptor"))


def dialog_variants(cue_type: CueType[pl.DataFrame], dialog: pl.DataFrame) -> pl.DataFrame:
    """Dialog clusters (cluster_id, source, race, gender, prefix; see
    cueaudit.cues.dialog.clusters): the four members of a cluster share its id as value."""
    return variant_rows(
        cue_type,
        dialog,
        source=pl.col("source"),
        value=pl.col("cluster_id"),
        prefix_value=pl.col("prefix"),
        uid_variant=pl.col("race") + pl.lit("|") + pl.col("gender"),
    )


def dialect_variants(cue_type: CueType[str], translator: str) -> pl.DataFrame:
    """The one variant of a dialect: its value is the translator id (the body carries the cue)."""
    (condition,) = cue_type.conditions
    (race,) = cue_type.races
    row = {
        "cue": cue_type.cue_id(condition.source),
        "cue_type": cue_type.kind,
        "cue_source": condition.source,
        "race": race,
        "gender": None,
        "cue_value": translator,
        "prefix": None,
        "body": cue_type.body,
        "uid_variant": None,
    }
    return pl.DataFrame([row], schema=dict.fromkeys(CUE_COLUMNS, pl.String))


def _per_source(
    sources: Iterable[str], labels: Iterable[str], export_names: Iterable[str]
) -> tuple[CueCondition, ...]:
    return tuple(CueCondition(*row) for row in zip(sources, labels, export_names, strict=True))


NAME_CUE_TYPE: Final = CueType(
    kind="name",
    resource="names",
    id_pattern="name_{source}",
    conditions=_per_source(
        NAME_SOURCES,
        ("Name (R)", "Name (EH)", "Name (T)"),
        ("name_specific_rosenman", "name_specific_hayes_elder", "name_specific_tzioumis"),
    ),
    variants=name_variants,
    template=NAME_TEMPLATE,
    export_column="name",
)
DIALECT_CUE_TYPE: Final = CueType(
    kind="dialect",
    resource="dialect",
    id_pattern="dialect_{source}",
    conditions=(CueCondition("aave", "Dialect (AAVE)", "dialect"),),
    variants=dialect_variants,
    body="dialect",
    races=("Black",),
    gendered=False,
)
DIALOG_CUE_TYPE: Final = CueType(
    kind="dialog",
    resource="dialog",
    id_pattern="dialog_{source}",
    conditions=_per_source(
        DIALOG_SOURCES, ("Dialog (CAD)", "Dialog (PRISM)"), ("convo_prefix", "convo_prefix_prism")
    ),
    variants=dialog_variants,
    template=DIALOG_TEMPLATE,
    export_column="convo_concat_id",
)
EXPLICIT_CUE_TYPE: Final = CueType(
    kind="explicit",
    resource="explicit",
    id_pattern="explicit",
    conditions=(CueCondition(None, "Explicit", "explicit"),),
    variants=explicit_variants,
    template=EXPLICIT_TEMPLATE,
)

#: The study's cue types, in the order the prompt tables list them.
REGISTRY: Final = CueRegistry([NAME_CUE_TYPE, DIALECT_CUE_TYPE, DIALOG_CUE_TYPE, EXPLICIT_CUE_TYPE])
