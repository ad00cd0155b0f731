"""Rendering the decision audit's prompts from the wording in ``resources/decision/prompts.yaml``.

One profile is shown the same way in every format (:func:`render_candidate`): the name line
("Applicant: <full name>"; "Patient: <full name>" in triage), the hobby or neighbourhood line
of irrelevant-attribute bundles, the title line (in paraphrase-matched bundles one of the
domain's four ``title_line_variants``), the profile text. A single-profile prompt
(Rate, Decide) is ``instruction, profile, answer line``; a ranking prompt shows four such
blocks headed "Candidate A" ... "Candidate D" in the order given. A domain marked
``name_in_text`` (the aid domain: FairFund-Bench's first-person appeals, which hold the name)
shows the text alone. The instruction is chosen by format, paraphrase id and domain, the
answer line by format and mode (text, json, tool). A candidate shown under a cue other than a
name pair (:mod:`cueaudit.decision.cue_signals`) has a first name in the name line, or no name: the
file's ``cue_lines`` give the line in its place (``unnamed_line``) and the explicit statement
(``explicit_line``, "The applicant is a Black female.").

Templates fill ``{field}`` placeholders; each template allows only its own fields (checked
when the file is loaded) and leaves every other brace alone, so JSON examples need no
escaping.

One module on purpose: loading the prompts file and rendering from it share the wording's
checked templates; a renderer per format.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from cueaudit.config import check_yaml_duplicate_keys
from cueaudit.errors import InputError

#: The domains whose candidates are profiles shown under a name line (the default design).
PROFILE_DOMAINS: Final = ("hiring", "lending", "triage")
#: FairFund-Bench's charitable-aid appeals (:mod:`cueaudit.decision.aid`): the name is inside
#: the first-person text, so its prompts show the appeal alone.
AID_DOMAIN: Final = "aid"
DOMAINS: Final = (*PROFILE_DOMAINS, AID_DOMAIN)
#: The judgement formats and the modes each is asked in.
MODES: Final[Mapping[str, tuple[str, ...]]] = {
    "rate": ("text", "tool"),
    "decide": ("text", "tool"),
    "rank": ("text", "json", "tool"),
}
FORMATS: Final = tuple(MODES)
ATTRIBUTE_KINDS: Final = ("hobby", "neighbourhood")
#: The ``attribute_kind`` of paraphrase-matched candidates: their title line is worded by the
#: ``attribute``-th (w1-w4) of the domain's ``title_line_variants``.
TITLE_WORDING: Final = "title_wording"
TITLE_VARIANTS: Final = 4
PROBES: Final = ("choice", "free")
#: The forced-choice option that names fairness or bias (its position is recorded per prompt).
FAIRNESS_OPTION: Final = "Fairness"

_FIELD_RE = re.compile(r"\{(\w+)\}")
#: A function (tool) name as the OpenAI and vLLM tool APIs accept it.
TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
LAYOUT_FIELDS: Final = ("instruction", "body", "answer")
#: The forced-choice question's fields: the option lines and the labels, in the prompt's order.
CHOICE_FIELDS: Final = ("options", "labels")
_TOP_KEYS: Final = (
    *("candidate_labels", "domains", "attribute_lines", "candidate_header", "layout"),
    *("instructions", "answers", "tools", "probes"),
)


@dataclass(frozen=True)
class Candidate:
    """One profile as shown: the name (None: a cue that shows none), the optional irrelevant
    attribute, title and text, and the explicit descriptor of an explicit cue."""

    name: str | None
    title: str
    text: str
    attribute_kind: str | None = None
    attribute: str | None = None
    descriptor: str | None = None


@dataclass(frozen=True)
class ToolWording:
    name: str
    description: str
    argument_description: str


@dataclass(frozen=True)
class Probe:
    """A probe's question; the forced choice's options (label, description) in their base
    order, each shown by ``option_line`` and listed in ``{labels}`` joined by
    ``label_separators`` (between labels, before the last); the free text's rules."""

    question: str
    options: tuple[tuple[str, str], ...] = ()
    option_line: str = "{label}: {description}"
    label_separators: tuple[str, str] = (", ", " or ")
    rules: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(label for label, _ in self.options)


@dataclass(frozen=True)
class PromptResources:
    """The validated contents of a prompts file (layout in the file's own comments)."""

    source: str
    candidate_labels: tuple[str, ...]
    name_lines: Mapping[str, str]
    title_lines: Mapping[str, str]
    #: Per domain with a name line, four meaning-preserving wordings of its title line (the
    #: paraphrase-matched bundles'; optional: a domain without them cannot have those bundles).
    title_variants: Mapping[str, tuple[str, ...]]
    attribute_lines: Mapping[str, str]
    candidate_header: str
    layout: str
    instructions: Mapping[str, Mapping[str, Mapping[str, str]]]
    answers: Mapping[str, Mapping[str, str]]
    tools: Mapping[str, ToolWording]
    probe_layout: str
    probes: Mapping[str, Probe]
    #: ``cue_lines`` (optional in the file; needed only by cues other than name pairs): the
    #: line in place of the name line of each name-line domain, the explicit statement's.
    unnamed_lines: Mapping[str, str] = field(default_factory=dict)
    explicit_lines: Mapping[str, str] = field(default_factory=dict)

    def paraphrases(self, fmt: str) -> tuple[str, ...]:
        """The paraphrase ids of a format, in file order."""
        return tuple(self.instructions[fmt])


def yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML error as ``line L, column C: problem`` (the file's own line, 1-based)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None)
    if mark is None or not problem:
        return str(error)
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def read_yaml(path: str | Path) -> Any:
    """A YAML file's contents; InputError naming the file for one that cannot be read, is not
    valid YAML (its line and column) or gives a key twice."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise InputError(source, f"not valid YAML: {yaml_problem(error)}") from error
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(source, f"cannot read: {error}") from error
    check_yaml_duplicate_keys(text, source)
    return raw


def fill(template: str, **fields: str) -> str:
    """``template`` with each ``{field}`` of ``fields`` replaced (other braces are kept)."""
    return _FIELD_RE.sub(lambda m: fields.get(m.group(1), m.group(0)), template)


class _Reader:
    """Reads the file's keys, each error naming the key path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def mapping(self, value: Any, path: str, keys: Sequence[str] = ()) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise InputError(self.source, "expected a mapping", path or None)
        missing = [k for k in keys if k not in value]
        if missing:
            raise InputError(self.source, f"missing key '{missing[0]}'", path or None)
        return value

    def template(
        self, value: Any, path: str, fields: Sequence[str] = (), required: Sequence[str] = ()
    ) -> str:
        if not isinstance(value, str) or not value.strip():
            raise InputError(self.source, "expected a non-empty string", path)
        found = set(_FIELD_RE.findall(value))
        unknown = sorted(found - set(fields))
        if unknown:
            allowed = ", ".join(f"{{{f}}}" for f in fields) or "none"
            raise InputError(
                self.source, f"unknown field {{{unknown[0]}}} (allowed: {allowed})", path
            )
        missing = [f for f in required if f not in found]
        if missing:
            raise InputError(
                self.source,
                f"the template must show {{{missing[0]}}}: without it every prompt would lose it",
                path,
            )
        return value

    def strings(self, value: Any, path: str, minimum: int) -> tuple[str, ...]:
        if not isinstance(value, list) or len(value) < minimum:
            raise InputError(self.source, f"expected a list of at least {minimum} strings", path)
        items = tuple(self.template(v, f"{path}[{i}]") for i, v in enumerate(value))
        if len(set(items)) < len(items):
            raise InputError(self.source, "entries must be distinct", path)
        return items

    def per_key(
        self,
        value: Any,
        path: str,
        keys: Sequence[str],
        fields: Sequence[str] = (),
        required: Sequence[str] = (),
    ) -> dict[str, str]:
        section = self.mapping(value, path, keys)
        return {k: self.template(section[k], f"{path}.{k}", fields, required) for k in keys}


def _check_distinct_paraphrases(
    source: str, fmt: str, variants: Mapping[str, Mapping[str, str]]
) -> None:
    """Two paraphrases worded alike in a domain would make the paraphrase factor a copy."""
    for domain in DOMAINS:
        seen: dict[str, str] = {}
        for pid, texts in variants.items():
            key = " ".join(texts[domain].split()).casefold()
            if key in seen:
                raise InputError(
                    source,
                    f"paraphrases {seen[key]} and {pid} are worded alike in {domain}: a "
                    "paraphrase must differ, or the paraphrase factor measures nothing",
                    f"instructions.{fmt}.{pid}.{domain}",
                )
            seen[key] = pid


def load_prompt_resources(path: str | Path) -> PromptResources:
    """The prompts file, checked key by key: every domain, format and mode has its wording,
    every format at least two paraphrases, every template only its own fields and every field
    a prompt needs (the name, the candidate's label, the answer line, ...); no key twice."""
    source = str(path)
    raw = read_yaml(path)
    read = _Reader(source)
    top = read.mapping(raw, "", _TOP_KEYS)
    domains = read.mapping(top["domains"], "domains", DOMAINS)
    name_lines: dict[str, str] = {}
    title_lines: dict[str, str] = {}
    title_variants: dict[str, tuple[str, ...]] = {}
    for d in DOMAINS:
        if _name_in_text(read, domains[d], f"domains.{d}"):
            continue
        entry = read.mapping(domains[d], f"domains.{d}", ("name_line", "title_line"))
        name_lines[d] = read.template(
            entry["name_line"], f"domains.{d}.name_line", ("name",), ("name",)
        )
        title_lines[d] = read.template(
            entry["title_line"], f"domains.{d}.title_line", ("title",), ("title",)
        )
        if "title_line_variants" in entry:
            title_variants[d] = _title_variants(read, entry["title_line_variants"], d)
    instructions = read.mapping(top["instructions"], "instructions", FORMATS)
    paraphrased: dict[str, dict[str, dict[str, str]]] = {}
    for fmt in FORMATS:
        variants = read.mapping(instructions[fmt], f"instructions.{fmt}")
        if len(variants) < 2:
            raise InputError(source, "expected at least two paraphrases", f"instructions.{fmt}")
        paraphrased[fmt] = {
            str(pid): read.per_key(text, f"instructions.{fmt}.{pid}", DOMAINS)
            for pid, text in variants.items()
        }
        _check_distinct_paraphrases(source, fmt, paraphrased[fmt])
    answers = read.mapping(top["answers"], "answers", FORMATS)
    tools = read.mapping(top["tools"], "tools", FORMATS)
    for fmt in FORMATS:
        name = read.mapping(tools[fmt], f"tools.{fmt}", ("name",))["name"]
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise InputError(
                source,
                f"{name!r} is not a tool name (letters, digits, _ and -, at most 64: the "
                "OpenAI and vLLM tool APIs refuse others)",
                f"tools.{fmt}.name",
            )
    tool_keys = ("name", "description", "argument_description")
    probes = read.mapping(top["probes"], "probes", ("layout", *PROBES))
    choice = read.mapping(
        probes["choice"],
        "probes.choice",
        ("question", "option_line", "label_separators", "options"),
    )
    free = read.mapping(probes["free"], "probes.free", ("question", "rules"))
    rules = read.mapping(free["rules"], "probes.free.rules")
    unnamed_lines, explicit_lines = _cue_lines(read, top.get("cue_lines"), list(name_lines))
    return PromptResources(
        source=source,
        candidate_labels=read.strings(top["candidate_labels"], "candidate_labels", 4),
        name_lines=name_lines,
        title_lines=title_lines,
        title_variants=title_variants,
        attribute_lines=read.per_key(
            top["attribute_lines"], "attribute_lines", ATTRIBUTE_KINDS, ("value",), ("value",)
        ),
        candidate_header=read.template(
            top["candidate_header"], "candidate_header", ("label",), ("label",)
        ),
        layout=read.template(top["layout"], "layout", LAYOUT_FIELDS, LAYOUT_FIELDS),
        instructions=paraphrased,
        answers={
            fmt: read.per_key(answers[fmt], f"answers.{fmt}", MODES[fmt], ("tool_name",))
            for fmt in FORMATS
        },
        tools={
            fmt: ToolWording(**read.per_key(tools[fmt], f"tools.{fmt}", tool_keys))
            for fmt in FORMATS
        },
        probe_layout=read.template(
            probes["layout"], "probes.layout", ("task", "question"), ("task", "question")
        ),
        probes={
            "choice": Probe(
                read.template(
                    choice["question"], "probes.choice.question", CHOICE_FIELDS, CHOICE_FIELDS
                ),
                options=_options(read, choice["options"]),
                option_line=read.template(
                    choice["option_line"],
                    "probes.choice.option_line",
                    ("label", "description"),
                    ("label", "description"),
                ),
                label_separators=_separators(read, choice["label_separators"]),
            ),
            "free": Probe(
                read.template(free["question"], "probes.free.question"),
                rules=tuple(
                    (str(c), read.strings(p, f"probes.free.rules.{c}", 1)) for c, p in rules.items()
                ),
            ),
        },
        unnamed_lines=unnamed_lines,
        explicit_lines=explicit_lines,
    )


def _cue_lines(
    read: _Reader, value: Any, named: Sequence[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The optional ``cue_lines``: ``unnamed_line`` for every domain with a name line (no
    fields: it stands where the name was), ``explicit_line`` for every domain (it must show
    ``{descriptor}``, the statement it exists for)."""
    if value is None:
        return {}, {}
    section = read.mapping(value, "cue_lines", ("unnamed_line", "explicit_line"))
    unnamed = read.per_key(section["unnamed_line"], "cue_lines.unnamed_line", named)
    explicit = read.per_key(
        section["explicit_line"], "cue_lines.explicit_line", DOMAINS, ("descriptor",),
        ("descriptor",),
    )  # fmt: skip
    return unnamed, explicit


def _name_in_text(read: _Reader, value: Any, path: str) -> bool:
    """A domain marked ``name_in_text: true`` shows its candidates' texts alone (they carry the
    name themselves), so it has no name or title line."""
    entry = read.mapping(value, path)
    if "name_in_text" not in entry:
        return False
    if entry["name_in_text"] is not True or set(entry) != {"name_in_text"}:
        raise InputError(
            read.source, "name_in_text must be true and the domain's only key", f"{path}"
        )
    return True


def _title_variants(read: _Reader, value: Any, domain: str) -> tuple[str, ...]:
    """A domain's :data:`TITLE_VARIANTS` distinct wordings of its title line, each showing
    ``{title}``."""
    path = f"domains.{domain}.title_line_variants"
    if not isinstance(value, list) or len(value) != TITLE_VARIANTS:
        raise InputError(read.source, f"expected a list of {TITLE_VARIANTS} wordings", path)
    variants = tuple(
        read.template(v, f"{path}[{i}]", ("title",), ("title",)) for i, v in enumerate(value)
    )
    if len(set(variants)) < len(variants):
        raise InputError(read.source, "entries must be distinct", path)
    return variants


def title_variant_texts(resources: PromptResources) -> list[tuple[str, str, str]]:
    """``(label, field, text)`` of every title-line wording without its ``{title}`` field
    (labelled by the file, the field its key), for the demographic check of the stimuli."""
    return [
        (resources.source, f"domains.{domain}.title_line_variants[{i}]", text)
        for domain, variants in resources.title_variants.items()
        for i, variant in enumerate(variants)
        if (text := fill(variant, title="").strip())
    ]


def _options(read: _Reader, value: Any) -> tuple[tuple[str, str], ...]:
    """The forced choice's options, label -> description, at least two, one of them
    :data:`FAIRNESS_OPTION`."""
    path = "probes.choice.options"
    options = read.mapping(value, path)
    if len(options) < 2:
        raise InputError(read.source, "expected at least two options", path)
    labels = read.strings([str(label) for label in options], path, 2)
    if FAIRNESS_OPTION not in labels:
        raise InputError(
            read.source, f"the options must include {FAIRNESS_OPTION!r} (recognition)", path
        )
    return tuple(
        (label, read.template(description, f"{path}.{label}"))
        for label, description in zip(labels, options.values(), strict=True)
    )


def _separators(read: _Reader, value: Any) -> tuple[str, str]:
    path = "probes.choice.label_separators"
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise InputError(
            read.source, "expected two strings (between labels, before the last)", path
        )
    return value[0], value[1]


def _check(resources: PromptResources, fmt: str, mode: str, paraphrase: str) -> None:
    if fmt not in MODES or mode not in MODES[fmt]:
        raise InputError(resources.source, f"no mode {mode!r} of format {fmt!r}", "answers")
    if paraphrase not in resources.instructions[fmt]:
        known = ", ".join(resources.paraphrases(fmt))
        raise InputError(
            resources.source,
            f"no paraphrase {paraphrase!r} (known: {known})",
            f"instructions.{fmt}",
        )


def render_candidate(
    resources: PromptResources, domain: str, candidate: Candidate, label: str | None = None
) -> str:
    """One profile as shown in every format (headed "Candidate <label>" in a ranking); in a
    domain without a name line (the aid appeals) the text alone, which must hold the name
    (or, for a cue that shows none, the explicit statement and the text). A candidate without
    a name shows ``cue_lines.unnamed_line`` in place of the name line, and a descriptor adds
    ``cue_lines.explicit_line`` under it."""
    lines = [fill(resources.candidate_header, label=label)] if label is not None else []
    if domain not in resources.name_lines:
        if candidate.attribute_kind is not None:
            raise InputError(
                resources.source,
                f"domain {domain!r} shows its texts alone: no {candidate.attribute_kind} line "
                "(irrelevant-attribute bundles need a domain with a name line)",
                f"domains.{domain}",
            )
        if candidate.name is not None and candidate.name not in candidate.text:
            raise InputError(
                resources.source,
                f"domain {domain!r} shows no name line, and the text lacks {candidate.name!r}",
                f"domains.{domain}",
            )
        lines += _explicit_line(resources, domain, candidate)
        return "\n".join([*lines, candidate.text.strip()])
    if candidate.name is not None:
        lines.append(fill(resources.name_lines[domain], name=candidate.name))
    else:
        lines.append(_cue_line(resources, resources.unnamed_lines, "unnamed_line", domain))
    lines += _explicit_line(resources, domain, candidate)
    title_line = resources.title_lines[domain]
    if candidate.attribute_kind == TITLE_WORDING:
        title_line = _title_variant(resources, domain, candidate.attribute)
    elif candidate.attribute_kind is not None:
        template = resources.attribute_lines[candidate.attribute_kind]
        lines.append(fill(template, value=candidate.attribute or ""))
    lines.append(fill(title_line, title=candidate.title))
    lines.append(candidate.text.strip())
    return "\n".join(lines)


def _title_variant(resources: PromptResources, domain: str, wording: str | None) -> str:
    """The title line of wording ``w1``-``w4`` (the paraphrase-matched bundles)."""
    variants = resources.title_variants.get(domain)
    if not variants:
        raise InputError(
            resources.source,
            f"paraphrase-matched bundles need {TITLE_VARIANTS} title_line_variants of domain "
            f"{domain!r}",
            f"domains.{domain}",
        )
    index = int(wording[1:]) - 1 if wording and wording[1:].isdigit() else -1
    if not 0 <= index < len(variants):
        raise InputError(resources.source, f"no title wording {wording!r}", f"domains.{domain}")
    return variants[index]


def _cue_line(resources: PromptResources, lines: Mapping[str, str], key: str, domain: str) -> str:
    if domain not in lines:
        raise InputError(
            resources.source,
            f"no {key} for domain {domain!r}: a cue other than a name pair needs the file's "
            "cue_lines",
            f"cue_lines.{key}",
        )
    return lines[domain]


def _explicit_line(resources: PromptResources, domain: str, candidate: Candidate) -> list[str]:
    if candidate.descriptor is None:
        return []
    template = _cue_line(resources, resources.explicit_lines, "explicit_line", domain)
    return [fill(template, descriptor=candidate.descriptor)]


def _prompt(
    resources: PromptResources, domain: str, fmt: str, mode: str, paraphrase: str, body: str
) -> str:
    _check(resources, fmt, mode, paraphrase)
    answer = fill(resources.answers[fmt][mode], tool_name=resources.tools[fmt].name)
    instruction = resources.instructions[fmt][paraphrase][domain]
    return fill(resources.layout, instruction=instruction, body=body, answer=answer)


def render_single(
    resources: PromptResources,
    *,
    domain: str,
    fmt: str,
    mode: str,
    paraphrase: str,
    candidate: Candidate,
) -> str:
    """A Rate or Decide prompt for one profile."""
    if fmt == "rank":
        raise InputError(resources.source, "a ranking shows four candidates", "format")
    body = render_candidate(resources, domain, candidate)
    return _prompt(resources, domain, fmt, mode, paraphrase, body)


def render_bundle(
    resources: PromptResources,
    *,
    domain: str,
    mode: str,
    paraphrase: str,
    candidates: Sequence[Candidate],
) -> str:
    """A ranking prompt: the candidates labelled A, B, ... in the order given."""
    labels = resources.candidate_labels
    if len(candidates) != len(labels):
        raise InputError(
            resources.source, f"{len(candidates)} candidates for {len(labels)} labels", "bundle"
        )
    blocks = [
        render_candidate(resources, domain, c, label)
        for c, label in zip(candidates, labels, strict=True)
    ]
    return _prompt(resources, domain, "rank", mode, paraphrase, "\n\n".join(blocks))
