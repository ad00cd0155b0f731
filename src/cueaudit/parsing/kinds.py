"""The registry of outcome kinds: what a task's answer is, how to ask for it, how to read it.

=========  ==============================================================  ===================
kind       columns (after the common ones of cueaudit.parsing.responses)   tool / field
=========  ==============================================================  ===================
binary     answer (1.0 Yes, 0.0 No), p_affirmative, answer_mass            submit_decision /
                                                                           decision
usd        answer (yearly US dollars)                                      submit_amount /
                                                                           amount
label      answer_label, p_label_<label>..., label_mass                    submit_label / label
race       label with the probing study's reasons (no_race_label, ...)     submit_label / label
rating     answer (1..scale), p_rating_<k>..., expected_rating,            submit_rating /
           rating_mass                                                     rating
ranking    ranks (competition ranks per candidate), tie, n_ranked          submit_ranking /
                                                                           ranks
=========  ==============================================================  ===================

``classified_text`` (tool ``submit_answer``, field ``answer``) sorts free text into the
categories of its ``rules`` setting; its columns are ``answer_label`` (the category) and
``matched_text`` (the span that decided it).

A kind is configured by the task's answer settings (a mapping, all keys optional):

``format``
    ``"text"`` (default), ``"json"`` (output constrained to the kind's JSON schema) or
    ``"tool"`` (the kind's tool, forced unless ``tool_choice`` says otherwise).
``tool_name``, ``tool_description``
    The tool offered with ``format: tool`` (defaults per kind: ``submit_decision``, ...).
``argument``, ``argument_description``
    The field of the JSON answer / tool arguments holding the answer, and its description.
``tool_choice``
    ``"auto"``, ``"required"`` ... (default: the tool's name, i.e. forced).
``score_options``
    Score the kind's options beside the generation (default: with ``format: text``).

plus the kind's own settings (``min_usd``/``max_usd``, ``labels``, ``scale``, ``candidates``,
``rules`` of ``classified_text``).
Defaults are neutral one-liners; a study passes its own wording in the settings.

A tool call is a source, not a kind: its arguments are read by the kind's structured parser
into the same columns as a JSON or text answer. The decision study's yes/no decision is the
``binary`` kind (tool ``submit_decision``, field ``decision``).

One module on purpose: it is the registry of outcome kinds, one class a kind, each short; a
kind read in one place is the point.
"""

from __future__ import annotations

import dataclasses
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Final, Literal, Self, TypeVar

import polars as pl

from cueaudit.errors import InputError
from cueaudit.inference.core import AnswerSpec, Option, Tool, canonical_json
from cueaudit.parsing import ranking, rating, structured, text
from cueaudit.parsing.structured import loads_object

AnswerFormat = Literal["text", "json", "tool"]
FORMATS: Final = ("text", "json", "tool")

#: The binary options; their keys are those cached answers of the old format migrate to.
YES: Final = Option("Yes", ("Yes", "yes", "YES"))
NO: Final = Option("No", ("No", "no", "NO"))


@dataclass(frozen=True)
class Parsed:
    """One answer read by a kind: its columns (absent ones are null) and the failure reason."""

    values: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    reason: str | None = None

    def __post_init__(self) -> None:
        # null values are dropped so that equal outcomes compare equal
        object.__setattr__(self, "values", {k: v for k, v in self.values.items() if v is not None})


def _reasons(*names: str, **own: str) -> Mapping[str, str]:
    """Reasons of a kind: 'empty', 'refusal' and the named study-1 text reasons, its own, then
    the JSON reasons."""
    study_one = {n: text.REASONS[n] for n in ("empty", "refusal", *names)}
    return MappingProxyType({**study_one, **own, **structured.REASONS})


K = TypeVar("K", bound="OutcomeKind")


def _declare(
    name: str, tool: str, argument: str, reasons: Mapping[str, str]
) -> Callable[[type[K]], type[K]]:
    """Name a kind, its default tool and answer field, and its null reasons."""

    def declare(cls: type[K]) -> type[K]:
        cls.name, cls.default_tool, cls.default_argument = name, tool, argument
        cls.reasons = reasons
        return cls

    return declare


def _setting_error(kind: str, message: str, key: str | None = None) -> InputError:
    return InputError(f"answer settings of outcome kind {kind!r}", message, field=key)


@dataclass(frozen=True, kw_only=True)
class OutcomeKind(ABC):
    """A kind of answer, configured by a task's answer settings (see the module docstring)."""

    name: ClassVar[str]
    #: Every reason its parsers give instead of a value, with what it means.
    reasons: ClassVar[Mapping[str, str]]
    default_tool: ClassVar[str]
    default_argument: ClassVar[str]

    format: AnswerFormat = "text"
    tool_name: str = ""
    tool_description: str = ""
    argument: str = ""
    argument_description: str = ""
    tool_choice: str = ""
    score_options: bool | None = None

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Self:
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise _setting_error(
                cls.name, f"unknown setting; known: {', '.join(known)}", unknown[0]
            )
        values: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()
        }
        return cls(**values)

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise _setting_error(self.name, f"one of {', '.join(FORMATS)}", "format")
        if self.score_options is not None and not isinstance(self.score_options, bool):
            raise _setting_error(self.name, "true or false", "score_options")
        defaults = {
            "tool_name": self.default_tool,
            "tool_description": f"Submit the {self.default_tool.removeprefix('submit_')}.",
            "argument": self.default_argument,
            "argument_description": self.describe_argument(),
            "tool_choice": self.tool_name or self.default_tool,
        }
        for key, default in defaults.items():
            value = getattr(self, key)
            if not isinstance(value, str):
                raise _setting_error(self.name, "a string", key)
            if not value:
                object.__setattr__(self, key, default)

    # --- what the kind is ------------------------------------------------------------------
    @abstractmethod
    def value_columns(self) -> dict[str, pl.DataType]:
        """The columns its parsers fill, with their types."""

    def score_columns(self) -> dict[str, pl.DataType]:
        """The columns computed from option scores (none for kinds without options)."""
        return {}

    def columns(self) -> dict[str, pl.DataType]:
        return {**self.value_columns(), **self.score_columns()}

    def options(self) -> tuple[Option, ...]:
        """The closed set of answers whose probabilities are scored (none by default)."""
        return ()

    @abstractmethod
    def value_schema(self) -> dict[str, Any]:
        """The JSON schema of the answer's field (without its description)."""

    @abstractmethod
    def describe_argument(self) -> str:
        """The default description of the answer's field."""

    # --- how to ask for it -----------------------------------------------------------------
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the answer object (the tool's arguments, or the JSON output)."""
        field = {**self.value_schema(), "description": self.argument_description}
        return {
            "type": "object",
            "properties": {self.argument: field},
            "required": [self.argument],
            "additionalProperties": False,
        }

    def tool(self) -> Tool:
        return Tool.of(self.tool_name, self.tool_description, self.parameters())

    def answer_spec(self) -> AnswerSpec:
        """What the backend is asked for: options to score, a JSON schema or the tool."""
        score = self.format == "text" if self.score_options is None else self.score_options
        options = self.options() if score else ()
        if self.format == "json":
            return AnswerSpec(options=options, json_schema=canonical_json(self.parameters()))
        if self.format == "tool":
            return AnswerSpec(options=options, tools=(self.tool(),), tool_choice=self.tool_choice)
        return AnswerSpec(options=options)

    # --- how to read it --------------------------------------------------------------------
    @abstractmethod
    def parse_text(self, answer: str | None) -> Parsed:
        """A free-text completion."""

    @abstractmethod
    def parse_value(self, value: Any) -> Parsed:
        """The answer's field of a JSON answer or of the tool arguments."""

    def parse_structured(self, answer: Any) -> Parsed:
        """A decoded JSON answer (tool arguments or a constrained completion)."""
        if not isinstance(answer, dict):
            return Parsed(reason="invalid_json")
        if self.argument not in answer:
            return Parsed(reason="missing_field")
        return self.parse_value(answer[self.argument])

    def parse_json(self, answer: str | None) -> Parsed:
        """A completion constrained to :meth:`parameters`."""
        if answer is None or not answer.strip():
            return Parsed(reason="empty")
        return self.parse_structured(loads_object(answer))

    def parse_tool_calls(self, calls: Any) -> Parsed:
        """The decoded ``tool_calls`` column: a list of {"name", "arguments"}."""
        if not isinstance(calls, list):
            return Parsed(reason="invalid_json")
        mine = [c for c in calls if isinstance(c, dict) and c.get("name") == self.tool_name]
        if not mine:
            return Parsed(reason="wrong_tool")
        if len(mine) > 1:
            return Parsed(reason="several_tool_calls")
        arguments = mine[0].get("arguments")
        if isinstance(arguments, str):
            arguments = loads_object(arguments)
        return self.parse_structured(arguments)

    # --- how a model would have written it ---------------------------------------------------
    def value_of(self, value: Any) -> Any:
        """The answer field's JSON value for an outcome value (the inverse of
        :meth:`parse_value`); kinds that can be rendered override it."""
        raise InputError(self.name, "this kind cannot render answers", "kind")

    def text_of(self, value: Any) -> str:
        """A free-text answer that :meth:`parse_text` reads as ``value``."""
        return str(self.value_of(value))

    def render(self, value: Any) -> dict[str, Any]:
        """The response columns (``completion``, ``tool_calls``, ``constrained``) of a model
        that answered ``value`` in this kind's format: the tool call, the constrained JSON
        or the text. Used to plant answers that go through the parsers as real ones do."""
        if self.format == "tool":
            call = {"name": self.tool_name, "arguments": {self.argument: self.value_of(value)}}
            return {"completion": "", "tool_calls": canonical_json([call]), "constrained": False}
        if self.format == "json":
            answer = canonical_json({self.argument: self.value_of(value)})
            return {"completion": answer, "tool_calls": None, "constrained": True}
        return {"completion": self.text_of(value), "tool_calls": None, "constrained": False}

    def option_scores(self, logprobs: Mapping[str, float] | None) -> dict[str, float | None]:
        """The score columns from option log-probabilities (all null when one is missing).

        Probabilities are exp(logprob); the mass column is their sum, the others are
        normalised over the options (null when the mass is 0).
        """
        columns: dict[str, float | None] = dict.fromkeys(self.score_columns())
        options = self.options()
        if logprobs is None or not all(_is_number(logprobs.get(o.key())) for o in options):
            return columns
        probabilities = [math.exp(logprobs[o.key()]) for o in options]
        mass = sum(probabilities)
        columns.update(self.normalised_scores(probabilities, mass))
        return columns

    def normalised_scores(self, probabilities: Sequence[float], mass: float) -> dict[str, float]:
        """The score columns from the options' probabilities and their sum."""
        return {}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _float_answer(parsed: text.ParsedAnswer) -> Parsed:
    return Parsed({"answer": parsed.value}, parsed.reason)


_ANSWER: Final = {"answer": pl.Float64()}


@_declare(
    "binary",
    "submit_decision",
    "decision",
    _reasons("no_yes_no", "both_yes_and_no", "negated_answer"),
)
@dataclass(frozen=True, kw_only=True)
class BinaryKind(OutcomeKind):
    """Yes / No (the probing study's advice; the decision study's decision)."""

    def value_columns(self) -> dict[str, pl.DataType]:
        return dict(_ANSWER)

    def score_columns(self) -> dict[str, pl.DataType]:
        return {"p_affirmative": pl.Float64(), "answer_mass": pl.Float64()}

    def options(self) -> tuple[Option, ...]:
        return (YES, NO)

    def normalised_scores(self, probabilities: Sequence[float], mass: float) -> dict[str, float]:
        p_yes, _ = probabilities
        return {"answer_mass": mass} | ({"p_affirmative": p_yes / mass} if mass > 0 else {})

    def value_schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": ["yes", "no"]}

    def describe_argument(self) -> str:
        return "yes or no"

    def parse_text(self, answer: str | None) -> Parsed:
        return _float_answer(text.parse_binary(answer))

    def value_of(self, value: Any) -> str:
        return "yes" if float(value) == 1.0 else "no"

    def text_of(self, value: Any) -> str:
        return self.value_of(value).capitalize()

    def parse_value(self, value: Any) -> Parsed:
        """ "yes"/"no" in any case (or JSON true/false)."""
        if isinstance(value, bool):
            return Parsed({"answer": float(value)})
        word = value.strip().lower() if isinstance(value, str) else None
        if word in ("yes", "no"):
            return Parsed({"answer": 1.0 if word == "yes" else 0.0})
        return Parsed(reason="invalid_value")


@_declare(
    "usd",
    "submit_amount",
    "amount",
    _reasons(
        "no_number",
        "not_yearly",
        "implausible_amount",
        "foreign_currency",
        "negative_amount",
        "mismatched_range",
    ),
)
@dataclass(frozen=True, kw_only=True)
class UsdKind(OutcomeKind):
    """A yearly salary in US dollars (the probing study)."""

    min_usd: float = 1_000
    max_usd: float = 10_000_000

    def __post_init__(self) -> None:
        bounds = (self.min_usd, self.max_usd)
        if any(isinstance(b, bool) or not isinstance(b, int | float) for b in bounds):
            raise _setting_error(self.name, "numbers", "min_usd")
        if not 0 <= self.min_usd <= self.max_usd:
            raise _setting_error(self.name, "0 <= min_usd <= max_usd", "max_usd")
        super().__post_init__()

    def value_columns(self) -> dict[str, pl.DataType]:
        return dict(_ANSWER)

    def value_schema(self) -> dict[str, Any]:
        return {"type": "number"}

    def describe_argument(self) -> str:
        return "a yearly amount in US dollars"

    def parse_text(self, answer: str | None) -> Parsed:
        return _float_answer(text.parse_usd(answer, min_usd=self.min_usd, max_usd=self.max_usd))

    def parse_value(self, value: Any) -> Parsed:
        """A number (taken as yearly) or a string read as text."""
        if isinstance(value, str):
            return self.parse_text(value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return Parsed(reason="invalid_value")
        if not self.min_usd <= value <= self.max_usd:
            return Parsed(reason="implausible_amount")
        return Parsed({"answer": float(value)})


def _slug(label: str) -> str:
    return re.sub(r"\W+", "_", label.lower()).strip("_")


@_declare(
    "label",
    "submit_label",
    "label",
    _reasons(
        "negated_answer",
        no_label="none of the labels as the answer",
        several_labels="more than one of the labels",
    ),
)
@dataclass(frozen=True, kw_only=True)
class LabelKind(OutcomeKind):
    """One label of a closed set (default: race prediction's Black / White / Unknown)."""

    no_label: ClassVar[str] = "no_label"
    several_labels: ClassVar[str] = "several_labels"

    labels: tuple[str, ...] = text.RACE_LABELS

    def __post_init__(self) -> None:
        slugs = [_slug(label) for label in self.labels] if isinstance(self.labels, tuple) else []
        if len(slugs) < 2 or not all(slugs) or len(set(slugs)) < len(slugs):
            raise _setting_error(self.name, "two or more distinct labels", "labels")
        super().__post_init__()

    def value_columns(self) -> dict[str, pl.DataType]:
        return {"answer_label": pl.String()}

    def score_columns(self) -> dict[str, pl.DataType]:
        columns: dict[str, pl.DataType] = {
            f"p_label_{_slug(lb)}": pl.Float64() for lb in self.labels
        }
        return columns | {"label_mass": pl.Float64()}

    def options(self) -> tuple[Option, ...]:
        return tuple(
            Option(lb, tuple(dict.fromkeys((lb, lb.lower(), lb.upper())))) for lb in self.labels
        )

    def normalised_scores(self, probabilities: Sequence[float], mass: float) -> dict[str, float]:
        names = [f"p_label_{_slug(label)}" for label in self.labels]
        shares = (
            dict(zip(names, (p / mass for p in probabilities), strict=True)) if mass > 0 else {}
        )
        return shares | {"label_mass": mass}

    def value_schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.labels)}

    def describe_argument(self) -> str:
        return "one of: " + ", ".join(self.labels)

    def parse_text(self, answer: str | None) -> Parsed:
        parsed = text.parse_label(
            answer, self.labels, no_label=self.no_label, several_labels=self.several_labels
        )
        return Parsed({"answer_label": parsed.label}, parsed.reason)

    def parse_value(self, value: Any) -> Parsed:
        """One of the labels, in any case."""
        canonical = {label.lower(): label for label in self.labels}
        label = canonical.get(value.strip().lower()) if isinstance(value, str) else None
        return Parsed({"answer_label": label}, None if label else "invalid_value")


@_declare(
    "race",
    "submit_label",
    "label",
    _reasons("no_race_label", "several_race_labels", "negated_answer"),
)
@dataclass(frozen=True, kw_only=True)
class RaceKind(LabelKind):
    """Race prediction (Appendix C.1.1): the label kind with the probing study's reasons."""

    no_label = "no_race_label"
    several_labels = "several_race_labels"


@_declare("rating", "submit_rating", "rating", _reasons(**rating.REASONS))
@dataclass(frozen=True, kw_only=True)
class RatingKind(OutcomeKind):
    """A whole-number rating on 1..scale (the decision study's 1-5 priority rating)."""

    scale: int = 5

    def __post_init__(self) -> None:
        if isinstance(self.scale, bool) or not isinstance(self.scale, int) or self.scale < 2:
            raise _setting_error(self.name, "an integer of at least 2", "scale")
        super().__post_init__()

    def value_columns(self) -> dict[str, pl.DataType]:
        return dict(_ANSWER)

    def score_columns(self) -> dict[str, pl.DataType]:
        ratings: dict[str, pl.DataType] = {f"p_rating_{k}": pl.Float64() for k in self._ratings}
        return ratings | {"expected_rating": pl.Float64(), "rating_mass": pl.Float64()}

    @property
    def _ratings(self) -> range:
        return range(1, self.scale + 1)

    def options(self) -> tuple[Option, ...]:
        return tuple(Option(str(k), (str(k),)) for k in self._ratings)

    def normalised_scores(self, probabilities: Sequence[float], mass: float) -> dict[str, float]:
        if not mass > 0:
            return {"rating_mass": mass}
        shares = [p / mass for p in probabilities]
        columns = {f"p_rating_{k}": p for k, p in zip(self._ratings, shares, strict=True)}
        expected = math.fsum(k * p for k, p in zip(self._ratings, shares, strict=True))
        return columns | {"expected_rating": expected, "rating_mass": mass}

    def value_schema(self) -> dict[str, Any]:
        return {"type": "integer", "minimum": 1, "maximum": self.scale}

    def describe_argument(self) -> str:
        return f"an integer from 1 to {self.scale}"

    def value_of(self, value: Any) -> int:
        rated = int(value)
        if rated != value or not 1 <= rated <= self.scale:
            raise InputError(self.name, f"{value!r} is not a rating from 1 to {self.scale}")
        return rated

    def parse_text(self, answer: str | None) -> Parsed:
        return _float_answer(rating.parse_rating(answer, self.scale, self.argument))

    def parse_value(self, value: Any) -> Parsed:
        return _float_answer(rating.parse_rating_value(value, self.scale))


def _default_candidates(n: int) -> tuple[str, ...]:
    return tuple(chr(ord("A") + i) for i in range(n))


@_declare("ranking", "submit_ranking", "ranks", _reasons(**ranking.REASONS))
@dataclass(frozen=True, kw_only=True)
class RankingKind(OutcomeKind):
    """A ranking of n candidates, ties allowed (rules: :mod:`cueaudit.parsing.ranking`)."""

    candidates: tuple[str, ...] = ()
    n_candidates: int | None = None

    def __post_init__(self) -> None:
        n = self.n_candidates
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 2 or n > 26):
            raise _setting_error(self.name, "an integer from 2 to 26", "n_candidates")
        if not self.candidates:
            object.__setattr__(self, "candidates", _default_candidates(n or 4))
        labels = self.candidates
        if not isinstance(labels, tuple) or not all(isinstance(c, str) for c in labels):
            raise _setting_error(self.name, "a list of labels", "candidates")
        if len(labels) < 2 or len(set(labels)) < len(labels) or n not in (None, len(labels)):
            raise _setting_error(
                self.name, "two or more distinct labels, n_candidates of them", "candidates"
            )
        if any(not c.strip() or c.strip().isdigit() for c in labels):
            raise _setting_error(self.name, "labels must not be empty or integers", "candidates")
        super().__post_init__()

    def value_columns(self) -> dict[str, pl.DataType]:
        return {"ranks": pl.List(pl.Int64()), "tie": pl.Boolean(), "n_ranked": pl.Int64()}

    def value_schema(self) -> dict[str, Any]:
        n = len(self.candidates)
        rank = {"type": "integer", "minimum": 1, "maximum": n}
        return {"type": "array", "items": rank, "minItems": n, "maxItems": n}

    def describe_argument(self) -> str:
        return (
            f"the rank of each candidate in the order {', '.join(self.candidates)}; "
            "1 is best, tied candidates share a rank"
        )

    @staticmethod
    def _columns(parsed: ranking.ParsedRanking) -> Parsed:
        ranks = list(parsed.ranks) if parsed.ranks is not None else None
        return Parsed(
            {"ranks": ranks, "tie": parsed.tie, "n_ranked": parsed.n_ranked}, parsed.reason
        )

    def value_of(self, value: Any) -> list[int]:
        ranks = [int(r) for r in value]
        if len(ranks) != len(self.candidates) or not all(1 <= r <= len(ranks) for r in ranks):
            raise InputError(self.name, f"{value!r} is not one rank per candidate")
        return ranks

    def text_of(self, value: Any) -> str:
        """A chain, best first, ties joined by "=": ranks [2, 1, 2, 4] read "B > A = C > D"."""
        ranks = self.value_of(value)
        groups = [
            " = ".join(c for c, r in zip(self.candidates, ranks, strict=True) if r == level)
            for level in sorted(set(ranks))
        ]
        return " > ".join(groups)

    def parse_text(self, answer: str | None) -> Parsed:
        return self._columns(ranking.parse_ranking(answer, self.candidates, self.argument))

    def parse_value(self, value: Any) -> Parsed:
        return self._columns(ranking.parse_ranking_value(value, self.candidates))


Rules = tuple[tuple[str, tuple[str, ...]], ...]

_CLASSIFIED_REASONS: Final = MappingProxyType(
    {
        "empty": text.REASONS["empty"],
        "no_category": "no rule of any category matches the answer",
        **structured.REASONS,
    }
)


def _rules_of(kind: str, rules: Any) -> Rules:
    """The ``rules`` setting as (category, patterns) pairs in order, every regex checked."""
    pairs = list(rules.items()) if isinstance(rules, Mapping) else rules
    if not isinstance(pairs, list | tuple) or not pairs:
        raise _setting_error(kind, "a non-empty mapping of category to regexes", "rules")
    normalised: list[tuple[str, tuple[str, ...]]] = []
    for pair in pairs:
        category, patterns = pair if isinstance(pair, list | tuple) and len(pair) == 2 else ("", ())
        if not isinstance(category, str) or not category.strip():
            raise _setting_error(kind, f"{pair!r}: a non-empty category name", "rules")
        if not isinstance(patterns, list | tuple) or not patterns:
            raise _setting_error(kind, f"{category!r}: a non-empty list of regexes", "rules")
        for pattern in patterns:
            try:
                re.compile(pattern, re.IGNORECASE)
            except (re.error, TypeError) as error:
                raise _setting_error(
                    kind, f"{category!r}: bad regex {pattern!r}: {error}", "rules"
                ) from error
        normalised.append((category, tuple(patterns)))
    categories = [category for category, _ in normalised]
    if len(set(categories)) < len(categories):
        raise _setting_error(kind, "categories must be distinct", "rules")
    return tuple(normalised)


@_declare("classified_text", "submit_answer", "answer", _CLASSIFIED_REASONS)
@dataclass(frozen=True, kw_only=True)
class ClassifiedTextKind(OutcomeKind):
    """Free text sorted into categories by the ``rules`` setting.

    ``rules`` maps each category to regular expressions (or is a list of ``[category,
    [regex, ...]]`` pairs, for settings whose key order may be lost). Categories are tried in
    the order given and the first with a pattern found anywhere in the answer
    (case-insensitive ``re.search``) wins, so a broad category goes last; ``matched_text``
    is that pattern's match. An answer no rule matches gives ``no_category``.
    """

    rules: Mapping[str, Sequence[str]] | Rules = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules", _rules_of(self.name, self.rules))
        super().__post_init__()

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(category for category, _ in self._rules)

    @property
    def _rules(self) -> Rules:
        rules = self.rules
        assert isinstance(rules, tuple)  # normalised in __post_init__
        return rules

    def value_columns(self) -> dict[str, pl.DataType]:
        return {"answer_label": pl.String(), "matched_text": pl.String()}

    def value_schema(self) -> dict[str, Any]:
        return {"type": "string"}

    def describe_argument(self) -> str:
        return "the answer in your own words"

    def parse_text(self, answer: str | None) -> Parsed:
        if answer is None or not answer.strip():
            return Parsed(reason="empty")
        for category, patterns in self._rules:
            for pattern in patterns:
                found = re.search(pattern, answer, re.IGNORECASE)
                if found:
                    return Parsed({"answer_label": category, "matched_text": found.group(0)})
        return Parsed(reason="no_category")

    def parse_value(self, value: Any) -> Parsed:
        return self.parse_text(value) if isinstance(value, str) else Parsed(reason="invalid_value")


#: Every outcome kind, by name.
KINDS: Final[Mapping[str, type[OutcomeKind]]] = MappingProxyType(
    {
        k.name: k
        for k in (
            BinaryKind,
            UsdKind,
            LabelKind,
            RaceKind,
            RatingKind,
            RankingKind,
            ClassifiedTextKind,
        )
    }
)

#: Every reason any kind gives instead of a value.
NULL_REASONS: Final[Mapping[str, str]] = MappingProxyType(
    {reason: doc for kind in KINDS.values() for reason, doc in kind.reasons.items()}
)


def get_kind(kind: str, settings: Mapping[str, Any] | None = None) -> OutcomeKind:
    """The kind named ``kind`` configured by a task's answer settings."""
    if kind not in KINDS:
        raise InputError(
            "outcome kind", f"unknown kind {kind!r}; known: {', '.join(KINDS)}", "kind"
        )
    return KINDS[kind].from_settings(settings or {})


def answer_spec(kind: str, settings: Mapping[str, Any] | None = None) -> AnswerSpec:
    """What a task of this kind asks the backend for (options, JSON schema, tool)."""
    return get_kind(kind, settings).answer_spec()
