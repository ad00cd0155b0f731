"""The registry of cue types: one :class:`~cueaudit.cues.cue_type.CueType` row per kind of
cue, in the order the prompt tables list them.

A new cue type is a module with its variant and count functions (and the preparation of its
resource) plus one row here, a block under ``cues:`` in the schema and the rule that prepares
its resource in ``workflow/rules/cues.smk`` (see "Adding a cue type" in
``docs/architecture.md``); the expansion, its expected counts, the display labels and the
export names follow from the rows. A row's ``decision`` makes it a cue type of the decision
audit too (``decision.design.cues``); the name pairs are the decision audit's own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from cueaudit.cues.cue_type import CueCondition, CueRegistry, CueType, DecisionCue
from cueaudit.cues.dialect.variants import (
    dialect_variant_count,
    dialect_variants,
    task_translations,
    translator_id,
)
from cueaudit.cues.dialog.clusters import dialog_variant_count, dialog_variants
from cueaudit.cues.explicit import (
    explicit_variant_count,
    explicit_variants,
    prepare_explicit,
    race_gender_descriptor,
)
from cueaudit.cues.names import load_sampled_names, name_variant_count, name_variants
from cueaudit.cues.vocabulary import NAME_LIST_RACES, RACES


def _per_source(
    sources: Iterable[str], labels: Iterable[str], export_names: Iterable[str]
) -> tuple[CueCondition, ...]:
    return tuple(CueCondition(*row) for row in zip(sources, labels, export_names, strict=True))


NAME_CUE_TYPE: Final = CueType(
    kind="name",
    config_key="names",
    id_pattern="name_{source}",
    conditions=_per_source(
        ("rosenman", "elder_hayes", "tzioumis"),
        ("Name (R)", "Name (EH)", "Name (T)"),
        ("name_specific_rosenman", "name_specific_hayes_elder", "name_specific_tzioumis"),
    ),
    variants=name_variants,
    count=name_variant_count,
    load=load_sampled_names,
    load_keys=("per_group", "sample_seed"),
    export_column="name",
    races=NAME_LIST_RACES,
    decision=DecisionCue("first_name", shows="first_name", races=NAME_LIST_RACES),
)
DIALECT_CUE_TYPE: Final = CueType(
    kind="dialect",
    config_key="dialect",
    id_pattern="dialect_{source}",
    conditions=(CueCondition("aave", "Dialect (AAVE)", "dialect"),),
    variants=dialect_variants,
    count=dialect_variant_count,
    load=translator_id,
    resource_path="results/resources/dialect_aave.parquet",
    bodies=task_translations,
    body="dialect",
    races=("Black",),
    gendered=False,
    # the aid appeals in AAVE against their original wording (the race contrast's reference)
    decision=DecisionCue("dialect", shows="own_words", races=("Black", "White"), genders=()),
)
DIALOG_CUE_TYPE: Final = CueType(
    kind="dialog",
    config_key="dialog",
    id_pattern="dialog_{source}",
    conditions=_per_source(
        ("cad", "prism"), ("Dialog (CAD)", "Dialog (PRISM)"), ("convo_prefix", "convo_prefix_prism")
    ),
    variants=dialog_variants,
    count=dialog_variant_count,
    resource_path="results/resources/dialog_{source}.parquet",
    export_column="convo_concat_id",
    races=NAME_LIST_RACES,
)
EXPLICIT_CUE_TYPE: Final = CueType(
    kind="explicit",
    config_key="explicit",
    id_pattern="explicit",
    conditions=(CueCondition(None, "Explicit", "explicit"),),
    variants=explicit_variants,
    count=explicit_variant_count,
    resource_path="results/resources/explicit_descriptors.parquet",
    prepare=prepare_explicit,
    races=NAME_LIST_RACES,
    decision=DecisionCue(
        "explicit", shows="statement", races=RACES, descriptor=race_gender_descriptor
    ),
)
#: Elder & Hayes's first + last name pairs: the decision audit's pre-registered cue.
NAME_PAIR_CUE: Final = DecisionCue("name_pair", shows="name_pair", races=RACES)

#: The cue types, in the order the prompt tables list them.
REGISTRY: Final = CueRegistry(
    [NAME_CUE_TYPE, DIALECT_CUE_TYPE, DIALOG_CUE_TYPE, EXPLICIT_CUE_TYPE],
    decision_only=[NAME_PAIR_CUE],
)
