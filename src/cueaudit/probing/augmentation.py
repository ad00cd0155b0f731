"""Base-prompt augmentation (§3.1 "Data augmentation"): templates crossed with components.

The paper builds each task's base prompts from parts: healthcare crosses 185 symptom templates
with 24 question variants (4,440 prompts); salary pairs 100 job profiles with 66 cities and
legal 197 scenario templates with 63 cities, each "resampled" to 5,000 prompts.

Files. A templates CSV and one CSV per component, each with columns ``id`` and ``text`` (other
columns are ignored). A template's text names every component by placeholder, ``{question}``
or ``{city}``; a component's texts fill it verbatim.

Crossing. Without a ``total``, every template is filled with every combination of the
components (the components' product in the order they are given), template by template.

Resampling, with a ``total`` N over T templates and M combinations (the paper's wording fixes
only the counts). Each template gets ``N // T`` combinations and ``N % T`` templates one more,
so templates are represented as evenly as N allows (salary: 50 of the 66 cities for each of 100
profiles; legal: 25 or 26 of the 63 cities for each of 197 scenarios). Which templates get the
extra one, and which combinations each template gets, are drawn uniformly without replacement,
so no (template, combination) pair repeats. Every draw comes from a generator seeded by
(seed, template id): the result does not depend on file order, and when templates are added or
removed a template keeps its combinations (a prefix of one seeded permutation, so with one more
or one fewer it keeps all the others).

Output rows: ``base_id`` (``{task}-{template id}-{component ids}``, stable under resampling:
a pair keeps its id whatever else is drawn), ``task``, ``text`` and one ``<name>_id`` column per
part (``template_id`` first), in template file order and then combination order.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import polars as pl

from cueaudit.cues.names import cue_template_text
from cueaudit.errors import InputError
from cueaudit.io import read_csv_records

COLUMNS: Final = ("id", "text")
PLACEHOLDER: Final = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
NAME: Final = re.compile(r"^[a-z][a-z0-9_]*$")
#: Component names whose ``<name>_id`` column would clash with the output's own columns.
RESERVED: Final = frozenset({"template", "base"})
ID: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.]*(?:-[A-Za-z0-9_.]+)*$")


@dataclass(frozen=True)
class Part:
    """The rows of one component (or templates) file: ids, texts and their file lines."""

    name: str
    source: str
    ids: tuple[str, ...]
    texts: tuple[str, ...]
    lines: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.ids)


def read_part(path: str | Path, name: str) -> Part:
    """One component (or templates) CSV with columns ``id`` and ``text``.

    Raises InputError naming the file, field and line for a missing file or column, no rows, an
    empty or repeated id, an id that is not a plain token (letters, digits, ``_``, ``.`` and
    inner ``-``), an empty or repeated text, or a text holding cue-template text (``USER:``).
    """
    src = str(path)
    ids: list[str] = []
    texts: list[str] = []
    lines: list[int] = []
    id_line: dict[str, int] = {}
    text_line: dict[str, int] = {}
    for line, rec in read_csv_records(path, COLUMNS):
        ident, text = rec["id"], rec["text"]
        if not ident:
            raise InputError(src, f"line {line}: empty id", field="id")
        if ident in id_line:
            raise InputError(
                src, f"line {line}: duplicate id {ident!r} (first at line {id_line[ident]})", "id"
            )
        if not ID.match(ident):
            raise InputError(
                src,
                f"line {line}: id {ident!r} must be letters, digits, '_', '.' and inner '-' "
                "(it becomes part of base ids)",
                field="id",
            )
        if not text:
            raise InputError(src, f"line {line}: empty text for id {ident!r}", field="text")
        if text in text_line:
            raise InputError(
                src,
                f"line {line}: the text of id {ident!r} repeats line {text_line[text]}; the two "
                "would make identical prompts",
                field="text",
            )
        tag = cue_template_text(text)
        if tag is not None:
            raise InputError(
                src,
                f"line {line}: the text of id {ident!r} contains the cue template text {tag!r}; "
                "a base prompt must not carry a cue",
                field="text",
            )
        id_line[ident] = line
        text_line[text] = line
        ids.append(ident)
        texts.append(text)
        lines.append(line)
    return Part(name, src, tuple(ids), tuple(texts), tuple(lines))


def check_templates(templates: Part, names: Sequence[str]) -> None:
    """Every template names each component and nothing else."""
    wanted = set(names)
    for ident, text, line in zip(templates.ids, templates.texts, templates.lines, strict=True):
        found = set(PLACEHOLDER.findall(text))
        missing = [n for n in names if n not in found]
        if missing:
            raise InputError(
                templates.source,
                f"line {line}: template {ident!r} lacks the placeholder {{{missing[0]}}} "
                f"(components: {', '.join(names)})",
                field="text",
            )
        unknown = sorted(found - wanted)
        if unknown:
            raise InputError(
                templates.source,
                f"line {line}: template {ident!r} has the placeholder {{{unknown[0]}}}, which "
                f"names no component (components: {', '.join(names)})",
                field="text",
            )


def _check_names(names: Sequence[str]) -> None:
    if not names:
        raise InputError("config", "augmentation needs at least one component", "components")
    for name in names:
        if not NAME.match(name) or name in RESERVED:
            raise InputError(
                "config",
                f"component name {name!r}: must match {NAME.pattern} and not be one of "
                f"{sorted(RESERVED)}",
                field="components",
            )


def _rng(*parts: object) -> random.Random:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def sample_pairs(
    template_ids: Sequence[str], n_combinations: int, total: int | None, seed: int
) -> list[list[int]]:
    """For each template (in order), the sorted indexes of the combinations it is filled with.

    ``total`` None: all of them. Otherwise ``total // T`` each and one more for ``total % T``
    templates, drawn without replacement (see the module docstring).
    """
    n_templates = len(template_ids)
    if total is None:
        return [list(range(n_combinations)) for _ in template_ids]
    if total < 1 or total > n_templates * n_combinations:
        raise InputError(
            "config",
            f"total {total}: must be between 1 and the {n_templates} templates x "
            f"{n_combinations} combinations = {n_templates * n_combinations} distinct prompts",
            field="total",
        )
    each, extra = divmod(total, n_templates)
    # Ranked by a seeded hash of the id, not by position, so file order does not matter.
    ranked = sorted(template_ids, key=lambda t: _rng(seed, "extra", t).random())
    more = set(ranked[:extra])
    return [_draw(seed, t, n_combinations, each + (t in more)) for t in template_ids]


def _draw(seed: int, template_id: str, n_combinations: int, k: int) -> list[int]:
    # The first k of a permutation seeded by the template id: a template that gets one more
    # (or one fewer) combination when the templates change keeps the others.
    order = list(range(n_combinations))
    _rng(seed, "fills", template_id).shuffle(order)
    return sorted(order[:k])


def augment(
    task: str,
    templates: Part,
    components: Sequence[Part],
    *,
    total: int | None = None,
    seed: int = 0,
) -> pl.DataFrame:
    """Base prompts of ``task``: each template filled with combinations of the components."""
    names = [c.name for c in components]
    _check_names(names)
    if len(set(names)) != len(names):
        raise InputError("config", f"components named twice: {names}", field="components")
    check_templates(templates, names)
    combinations = list(itertools.product(*(range(len(c)) for c in components)))
    try:
        picks = sample_pairs(templates.ids, len(combinations), total, seed)
    except InputError as exc:
        raise InputError("config", exc.message, f"probing.tasks.{task}.augment.total") from None
    base_ids: list[str] = []
    texts: list[str] = []
    id_columns: dict[str, list[str]] = {"template_id": [], **{f"{n}_id": [] for n in names}}
    seen: dict[str, str] = {}
    taken: set[str] = set()
    for t, chosen in enumerate(picks):
        template = templates.texts[t]
        for index in chosen:
            combo = combinations[index]
            fills = {c.name: c.texts[i] for c, i in zip(components, combo, strict=True)}
            text = PLACEHOLDER.sub(lambda m, fills=fills: fills[m.group(1)], template)
            ids = [c.ids[i] for c, i in zip(components, combo, strict=True)]
            base_id = "-".join([task, templates.ids[t], *ids])
            if text in seen:
                raise InputError(
                    templates.source,
                    f"{base_id!r} and {seen[text]!r} make the same prompt text; their prompt "
                    "uids would collide",
                    field="text",
                )
            if base_id in taken:
                raise InputError(
                    templates.source,
                    f"two prompts get the base id {base_id!r}: ids joined with '-' are "
                    "ambiguous here; rename an id",
                    field="id",
                )
            seen[text] = base_id
            taken.add(base_id)
            base_ids.append(base_id)
            texts.append(text)
            id_columns["template_id"].append(templates.ids[t])
            for name, ident in zip(names, ids, strict=True):
                id_columns[f"{name}_id"].append(ident)
    return pl.DataFrame(
        {"base_id": base_ids, "task": [task] * len(base_ids), "text": texts, **id_columns},
        schema={c: pl.String for c in ("base_id", "task", "text", *id_columns)},
    )


def augment_files(
    task: str,
    templates: str | Path,
    components: Mapping[str, str | Path],
    *,
    total: int | None = None,
    seed: int = 0,
) -> pl.DataFrame:
    """:func:`augment` over files: ``components`` maps each placeholder name to its CSV."""
    _check_names(list(components))
    parts = [read_part(path, name) for name, path in components.items()]
    return augment(task, read_part(templates, "template"), parts, total=total, seed=seed)


def run_augmentation(
    task: str,
    templates: str | Path,
    components: Mapping[str, str | Path],
    out_path: str | Path,
    *,
    total: int | None = None,
    seed: int = 0,
) -> pl.DataFrame:
    """The ``augment_base_prompts`` rule: the augmented base prompts of ``task`` as a
    base-prompt CSV (``load_base_prompts`` reads it; the id columns ride along)."""
    from cueaudit.io import write_csv

    prompts = augment_files(task, templates, components, total=total, seed=seed)
    write_csv(prompts, out_path)
    return prompts
