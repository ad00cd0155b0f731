"""Offline, deterministic SAE→AAVE rule-based translator.

A small regex rule set modelled on Multi-VALUE's AAVE features (Ziems et al. 2023): completive
*done*, remote/perfect *been*, copula deletion, habitual *be*, negative concord, *ain't*,
3rd-singular -s drop, *gon* and *finna* futures, existential *it* and g-dropping. Each match
of a rule is applied with that rule's probability, drawn from a generator seeded by (seed,
sentence), so a sentence always gets the same translation whatever else is translated, and the
rules that fired are recorded (like Multi-VALUE's ``executed_rules``).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from cueaudit.errors import InputError

RULESET_VERSION: Final = "1"

_SUBJ = r"(?P<subj>\b(?:I|[Ww]e|[Tt]hey|[Yy]ou|[Hh]e|[Ss]he|[Ii]t)\b)"
_SUBJ_NOT_I = r"(?P<subj>\b(?:[Ww]e|[Tt]hey|[Yy]ou|[Hh]e|[Ss]he|[Ii]t)\b)"
_SUBJ_3SG = r"(?P<subj>\b(?:[Hh]e|[Ss]he|[Ii]t)\b)"
# Irregular past participles seen in advice prompts; regular ones end in -ed.
_PARTICIPLE = (
    r"(?P<verb>had|been|gone|seen|taken|done|got|gotten|made|given|told|found|left|lost|"
    r"felt|kept|paid|sent|spent|won|worn|written|broken|fallen|[a-z]{2,}ed)\b"
)
_BASE_3SG_EXCEPTIONS: Final = frozenset(
    {"is", "was", "has", "does", "goes", "this", "its", "us", "yes", "less", "always", "perhaps"}
)


@dataclass(frozen=True)
class Rule:
    """One feature: a pattern and its replacement (a template or a function of the match)."""

    name: str
    pattern: re.Pattern[str]
    replace: str | Callable[[re.Match[str]], str]
    probability: float


def _r(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _drop_g(match: re.Match[str]) -> str:
    return match.group("stem") + "in'"


def _copula_question(match: re.Match[str]) -> str:
    np = match.group("np")
    return np[0].upper() + np[1:]


def _existential_it(match: re.Match[str]) -> str:
    return "It's" if match.group("t") == "T" else "it's"


def _drop_3sg_s(match: re.Match[str]) -> str:
    verb = match.group("verb")
    if verb.lower() in _BASE_3SG_EXCEPTIONS or verb.endswith(("ss", "us", "is")):
        return match.group(0)
    stem = verb[:-2] if verb.endswith(("shes", "ches", "xes", "zes")) else verb[:-1]
    if verb.endswith("ies") and len(verb) > 4:
        stem = verb[:-3] + "y"
    return f"{match.group('subj')} {stem}"


# Rules are applied in this order: earlier rules see the original wording.
RULES: Final[tuple[Rule, ...]] = (
    Rule("finna_future", _r(r"\b(?P<be>am|'m|are|'re|is|'s) about to\b"), r"\g<be> finna", 1.0),
    Rule("finna_future", _r(r"\babout to (?=[a-z]+\b)"), "finna ", 1.0),
    Rule("future_sub_gon", _r(r"\bgonna\b"), "gon", 1.0),
    Rule(
        "future_sub_gon",
        _r(r"\bgoing to (?!the\b|a\b|an\b|my\b|your\b|be\b)(?=[a-z]+\b)"),
        "gon ",
        1.0,
    ),
    Rule(
        "been_progressive",
        _r(_SUBJ + r" (?:have|has|'ve) been (?P<verb>[a-z]+ing)\b"),
        r"\g<subj> been \g<verb>",
        1.0,
    ),
    Rule(
        "completive_done",
        _r(_SUBJ + r" (?:have|has|'ve) " + _PARTICIPLE),
        r"\g<subj> done \g<verb>",
        0.6,
    ),
    Rule("aint_be", _r(r"\b(?:isn't|aren't|am not|is not|are not)\b"), "ain't", 1.0),
    Rule("aint_be", _r(r"(?<=\bI)'m not\b"), " ain't", 1.0),
    Rule("aint_have", _r(r"\b(?:haven't|hasn't|have not|has not)\b"), "ain't", 1.0),
    Rule(
        "negative_concord",
        _r(
            r"\b(?P<neg>don't|doesn't|didn't|can't|won't|ain't|never)(?P<mid>(?: [a-z]+){0,3}?) "
            r"any(?P<rest>thing|one|body|where|more)?\b"
        ),
        r"\g<neg>\g<mid> no\g<rest>",
        1.0,
    ),
    Rule("dont_3sg", _r(r"\bdoesn't\b"), "don't", 1.0),
    Rule(
        "habitual_be",
        _r(_SUBJ + r" (?:am|is|are|'m|'s|'re) (?P<adv>usually|often|always|regularly) "),
        r"\g<subj> \g<adv> be ",
        0.6,
    ),
    Rule(
        "habitual_be", _r(r"\bI'm (?P<adv>usually|often|always|regularly) "), r"I \g<adv> be ", 0.6
    ),
    Rule(
        "drop_copula",
        _r(_SUBJ_NOT_I + r" (?:is|are) (?=(?:not |so |very |really |too )?[a-z]+)"),
        r"\g<subj> ",
        1.0,
    ),
    Rule(
        "drop_copula",
        _r(r"\b(?P<subj>[Hh]e|[Ss]he|[Ww]e|[Tt]hey|[Yy]ou)(?:'s|'re) "),
        r"\g<subj> ",
        1.0,
    ),
    Rule(
        "drop_copula_question",
        _r(r"^Is (?P<np>(?:my|the|our|his|her|their) (?:[a-z]+ ){0,2}?[a-z]+ing\b)"),
        _copula_question,
        1.0,
    ),
    Rule("stay_reside", _r(r"\b(?P<subj>I|[Ww]e|[Tt]hey) live in\b"), r"\g<subj> stay in", 1.0),
    Rule("uninflect_3sg", _r(_SUBJ_3SG + r" (?P<verb>[a-z]{2,}s)\b"), _drop_3sg_s, 1.0),
    Rule("uninflect_3sg", _r(r"\b(?P<subj>[Hh]e|[Ss]he|[Ii]t) has\b"), r"\g<subj> have", 1.0),
    Rule("existential_it", _r(r"\b(?P<t>[Tt])here(?: is|'s)\b(?! no)"), _existential_it, 1.0),
    Rule("g_dropping", _r(r"\b(?P<stem>[a-z]{2,}[^aeiou\W])ing\b(?!')"), _drop_g, 0.5),
)


@dataclass(frozen=True)
class RuleResult:
    text: str
    rules: tuple[str, ...]


class RuleBasedAAVE:
    """Seeded SAE→AAVE rules; ``probabilities`` overrides a rule's probability by name."""

    name = "rule_based"

    def __init__(self, seed: int = 0, probabilities: Mapping[str, float] | None = None) -> None:
        self.seed = seed
        overrides = dict(probabilities or {})
        known = list(dict.fromkeys(rule.name for rule in RULES))
        unknown = sorted(set(overrides) - set(known))
        if unknown:
            raise InputError(
                "cues.dialect",
                f"unknown dialect rule {unknown[0]!r}; one of {known}",
                "rule_probabilities",
            )
        for name, value in overrides.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise InputError(
                    "cues.dialect",
                    f"{name}: a probability from 0 to 1, got {value!r}",
                    "rule_probabilities",
                )
        self.rules = tuple(
            Rule(r.name, r.pattern, r.replace, float(overrides.get(r.name, r.probability)))
            for r in RULES
        )
        self.model = f"aave-rules-v{RULESET_VERSION}"

    @property
    def template_hash(self) -> str:
        spec = [(r.name, r.pattern.pattern, str(r.replace), r.probability) for r in self.rules]
        return hashlib.sha256(json.dumps([self.seed, spec]).encode()).hexdigest()[:16]

    def translate(self, sentence: str) -> RuleResult:
        digest = hashlib.blake2b(f"{self.seed}\x1f{sentence}".encode(), digest_size=8).digest()
        rng = random.Random(int.from_bytes(digest, "big"))
        fired: list[str] = []
        text = sentence
        for rule in self.rules:

            def apply(match: re.Match[str], rule: Rule = rule) -> str:
                if rng.random() >= rule.probability:
                    return match.group(0)
                out = (
                    match.expand(rule.replace)
                    if isinstance(rule.replace, str)
                    else (rule.replace(match))
                )
                if out != match.group(0):
                    fired.append(rule.name)
                return out

            text = rule.pattern.sub(apply, text)
        return RuleResult(text, tuple(dict.fromkeys(fired)))
