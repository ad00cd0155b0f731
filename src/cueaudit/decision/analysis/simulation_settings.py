"""The settings of the decision-audit simulator (:mod:`~cueaudit.decision.analysis.simulate`,
whose docstring states the generative model): the design and who answers it, the generative
model's parameters with the paper's defaults, and the settings of a workflow config or of the
paper's design.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import yaml

from cueaudit.decision.analysis.design_matrix import BASELINES
from cueaudit.decision.analysis.frames import POINTS_RULES, PRIMARY
from cueaudit.decision.build import design_tier_counts
from cueaudit.decision.cue_signals import CUE_TYPES, DEFAULT_FIRST_NAMES
from cueaudit.decision.design import BUNDLE_TYPES, GENDERS, RACES
from cueaudit.decision.design_settings import arm_designs, expected_counts
from cueaudit.decision.formats import MODES
from cueaudit.decision.profiles import TIERS
from cueaudit.errors import InputError

SOURCE: Final = "simulation settings"
DEFAULT_MODELS: Final = ("sim-a", "sim-b", "sim-c", "sim-d", "sim-e")
TIER_QUALITY: Final = {"clear_yes": 1.0, "borderline": 0.0, "clear_no": -1.0}
#: Full ties of the paper: every matched bundle, no disguised or placebo one. The exploratory
#: types the paper did not run get assumptions: name-matched bundles (identical content) tie
#: always; paraphrase-matched ones, whose tie rate is the open question, half the time;
#: position-balanced ones (four profiles) never.
TIE_RATES: Final = {
    "demographic_matched": 1.0,
    "irrelevant_matched": 1.0,
    "disguised_demographic": 0.0,
    "disguised_placebo": 0.0,
    "paraphrase_matched": 0.5,
    "name_matched": 1.0,
    "position_balanced": 0.0,
}
#: The paper's first-listed gain, in the bundles of four different profiles.
POSITION_GAIN: Final = {
    "disguised_demographic": 0.11,
    "disguised_placebo": 0.11,
    "position_balanced": 0.11,
}
#: Recognition rates by probe and bundle type (the paper: transparent 100% forced choice and
#: 89% free text; camouflaged 2% free text, yet 74% of placebo bundles called fairness tests);
#: paraphrase-matched bundles as the transparent ones but short of 100%, name-matched as the
#: irrelevant-attribute ones, position-balanced as the disguised ones (assumptions).
RECOGNITION: Final = {
    "choice": {
        "demographic_matched": 1.0,
        "irrelevant_matched": 0.99,
        "disguised_demographic": 0.74,
        "disguised_placebo": 0.74,
        "paraphrase_matched": 0.9,
        "name_matched": 0.99,
        "position_balanced": 0.74,
    },
    "free": {
        "demographic_matched": 0.89,
        "irrelevant_matched": 0.87,
        "disguised_demographic": 0.02,
        "disguised_placebo": 0.02,
        "paraphrase_matched": 0.8,
        "name_matched": 0.87,
        "position_balanced": 0.02,
    },
}
#: The paper's planted sizes: hiring Rate Black vs White +0.047 points.
PAPER_PLANTED: Final = {("hiring", "rate", "black_vs_white"): 0.047}
PAPER_CONFIG: Final = "config/decision/paper.yaml"
JUDGEMENT_BOUNDS: Final = {"rate": (1.0, 5.0), "decide": (0.0, 1.0)}
CLIP: Final = 2.0  # random effects are clipped at this many SDs


@dataclass(frozen=True)
class Extension:
    """An extension arm: the primary design with ``design``'s keys replaced, answered by
    ``models`` (the primary models when empty), as a config's ``decision.extensions``."""

    design: Mapping[str, Any] = field(default_factory=dict)
    models: tuple[str, ...] = ()


def _mapping(value: Any, key: str) -> dict[Any, Any]:
    if not isinstance(value, Mapping):
        raise InputError(SOURCE, "a mapping", key)
    return dict(value)


@dataclass(frozen=True)
class SimulationSettings:
    """The design (prompt-table settings: see
    :meth:`cueaudit.decision.design_settings.DesignSettings.of`), who answers it, and the
    generative model (see :mod:`~cueaudit.decision.analysis.simulate`).

    ``planted`` maps ``(domain, format, contrast)`` (a contrast named as the
    pre-registration's, ``"black_vs_white"``, ``"female_vs_male"``: focal vs the reference
    White or male) to its effect in natural units: rating points (rate), probability (decide),
    rank positions (rank). ``position_gain`` is the first-listed gain in positions per bundle
    type (none where a type is not listed); ``tie_rates`` the share of fully tied answers per
    bundle type and ``recognition`` the recognition rate per probe and bundle type (both
    completed from the paper's defaults, :data:`TIE_RATES` and :data:`RECOGNITION`);
    ``mode_shift`` a shift of the expected answer per format and mode (e.g. tool calls).
    ``score_sd`` (per format) is the SD of each text answer's own deviation of its option-score
    expectation (``score``) from the expected answer: what one prompt moves the model's
    probabilities by beyond the design's effects (without it the expectation is an exact
    function of the design and an lmm has no residual to test against).
    ``profile_quality`` adds a fixed quality to profiles by id (applications of unequal
    quality within a tier, beyond the random ``profile_sd``).
    ``failure_by_group`` adds to ``parse_failure`` per model and race or gender level, for
    Rate and Decide answers (``{"m1": {"Black": 0.2}}``: m1's answers about Black applicants
    fail 20 points more often): a differential non-response.
    ``recognition_position_shift`` adds to the forced choice's recognition rate by the
    position its prompt lists the Fairness option at (1 = first; none by default), a planted
    position effect: every shifted rate must stay a probability.
    ``model_planted`` adds effects for one model's answers only, keyed as ``planted``
    (``{"m1": {("hiring", "rate", "black_vs_white"): 0.35}}``): a model x group interaction,
    which the pooled contrast averages over the models. ``mode_planted`` likewise adds
    effects for one mode's answers only (``{"tool": {("hiring", "rate", "black_vs_white"):
    0.3}}``): a mode x group interaction.
    ``recognition_if_tied`` (per probe and bundle type, none by default) is the recognition
    rate of a probe whose bundle the same model tied in its text ranking (same seed and
    paraphrase); ``recognition`` is then the rate when it did not: a planted association of
    recognition with ties.
    ``cue_planted`` adds effects to the rows of one cue type only, keyed as ``planted``
    (``{"explicit": {("hiring", "rate", "black_vs_white"): 0.3}}``): what that cue type's
    contrast recovers. ``profile_disparity_sd`` gives each profile its own focal-group
    deviation per planted key (a profile x group effect: normal with that SD, clipped at
    :data:`CLIP` SDs, drawn per study), multiplied under each cue type by ``cue_disparity``
    (default 1 for every cue type: the cue types agree; -1 under one: they disagree; 0: the
    cue type carries none), which the convergent validity of the cue types correlates.
    ``first_names`` (the first_name cue's list) and ``dialect`` (the dialect cue's translator,
    as ``decision.dialect``; its ``cache`` default keeps none) serve the cue types beyond name
    pairs. Resource paths are relative to ``root``.
    """

    design: Mapping[str, Any] = field(default_factory=dict)
    models: tuple[str, ...] = DEFAULT_MODELS
    seeds: tuple[int, ...] = (0,)
    extensions: Mapping[str, Extension] = field(default_factory=dict)
    root: str = "."
    profiles: str = "resources/decision/profiles.jsonl"
    profiles_format: str = "cueaudit"  # or "agentfairbench" (see decision.profiles)
    strip_suffixes: tuple[str, ...] = ()
    name_pairs: str = "resources/names/elder_hayes_pairs.csv"
    hobbies: str = "resources/decision/hobbies.txt"
    neighbourhoods: str = "resources/decision/neighbourhoods.txt"
    fairfund_stimuli: str | None = None  # the aid domain's appeals (FairFund-Bench)
    tier_quality: Mapping[str, float] = field(default_factory=lambda: dict(TIER_QUALITY))
    profile_sd: float = 0.25
    profile_quality: Mapping[str, float] = field(default_factory=dict)
    pair_sd: float = 0.04
    model_sd: float = 0.10
    model_pair_sd: float = 0.0
    rate_center: float = 3.0
    rate_scale: float = 1.0
    rate_spread: float = 0.3
    score_sd: Mapping[str, float] = field(default_factory=lambda: {"rate": 0.15, "decide": 0.03})
    decide_center: float = 0.5
    decide_scale: float = 0.25
    mode_shift: Mapping[str, Mapping[str, float]] = field(
        default_factory=lambda: {"decide": {"tool": 0.015}}
    )
    rank_scale: float = 1.0
    rank_noise_sd: float = 1.0
    rank_lapse: float = 0.25
    planted: Mapping[tuple[str, str, str], float] = field(default_factory=dict)
    position_gain: Mapping[str, float] = field(default_factory=lambda: dict(POSITION_GAIN))
    tie_rates: Mapping[str, float] = field(default_factory=lambda: dict(TIE_RATES))
    parse_failure: float = 0.0
    failure_by_group: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    recognition: Mapping[str, Mapping[str, float]] = field(
        default_factory=lambda: {p: dict(r) for p, r in RECOGNITION.items()}
    )
    points: str = POINTS_RULES[0]
    recognition_position_shift: Mapping[int, float] = field(default_factory=dict)
    model_planted: Mapping[str, Mapping[tuple[str, str, str], float]] = field(default_factory=dict)
    mode_planted: Mapping[str, Mapping[tuple[str, str, str], float]] = field(default_factory=dict)
    recognition_if_tied: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    first_names: str = DEFAULT_FIRST_NAMES
    dialect: Mapping[str, Any] = field(default_factory=dict)
    cue_planted: Mapping[str, Mapping[tuple[str, str, str], float]] = field(default_factory=dict)
    profile_disparity_sd: Mapping[tuple[str, str, str], float] = field(default_factory=dict)
    cue_disparity: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.models or len(set(self.models)) < len(self.models):
            raise InputError(SOURCE, "a non-empty list of distinct model names", "models")
        if not self.seeds or any(isinstance(s, bool) or not isinstance(s, int) for s in self.seeds):
            raise InputError(SOURCE, "a non-empty list of integer seeds", "seeds")
        if self.extensions.keys() & {PRIMARY}:
            raise InputError(SOURCE, f"{PRIMARY!r} is the primary arm", "extensions")
        if sorted(self.tier_quality) != sorted(TIERS):
            raise InputError(SOURCE, f"one value per tier {TIERS}", "tier_quality")
        if not all(np.isfinite(list(_mapping(self.profile_quality, "profile_quality").values()))):
            raise InputError(SOURCE, "finite numbers", "profile_quality")
        if self.points not in POINTS_RULES:
            raise InputError(SOURCE, f"one of {list(POINTS_RULES)}", "points")
        for key in (
            *("profile_sd", "pair_sd", "model_sd", "model_pair_sd"),
            *("rank_noise_sd", "rank_scale"),
        ):
            if not getattr(self, key) >= 0:
                raise InputError(SOURCE, "a non-negative number", key)
        for key in ("rate_spread", "rank_lapse", "parse_failure"):
            if not 0 <= getattr(self, key) <= 1:
                raise InputError(SOURCE, "a probability", key)
        for key, values in (("tie_rates", self.tie_rates), ("position_gain", self.position_gain)):
            unknown = sorted(set(_mapping(values, key)) - set(BUNDLE_TYPES))
            if unknown:
                raise InputError(SOURCE, f"unknown bundle type {unknown[0]!r}", key)
        object.__setattr__(self, "tie_rates", {**TIE_RATES, **self.tie_rates})
        recognition = {p: {**RECOGNITION.get(p, {}), **r} for p, r in self.recognition.items()}
        object.__setattr__(self, "recognition", {**RECOGNITION, **recognition})
        if any(not 0 <= v <= 1 for v in self.tie_rates.values()):
            raise InputError(SOURCE, "tie rates are probabilities", "tie_rates")
        for key in ("recognition", "recognition_if_tied"):
            for probe, rates in _mapping(getattr(self, key), key).items():
                rates = _mapping(rates, f"{key}.{probe}")
                if any(not 0 <= v <= 1 for v in rates.values()):
                    raise InputError(SOURCE, "recognition rates are probabilities", key)
                unknown = sorted(set(rates) - set(BUNDLE_TYPES))
                if unknown:
                    raise InputError(SOURCE, f"unknown bundle type {unknown[0]!r}", key)
        self._check_position_shift()
        for key in self.planted:
            planted_group(key)
        self._check_model_planted()
        self._check_cue_effects()
        self._check_failure_by_group()
        for fmt in self.mode_shift:
            if fmt not in JUDGEMENT_BOUNDS:
                raise InputError(SOURCE, f"mode shifts exist for {list(JUDGEMENT_BOUNDS)}", fmt)
        for fmt, sd in _mapping(self.score_sd, "score_sd").items():
            if fmt not in JUDGEMENT_BOUNDS or not sd >= 0:
                raise InputError(
                    SOURCE, f"a non-negative SD for {list(JUDGEMENT_BOUNDS)}", f"score_sd.{fmt}"
                )
        for fmt in JUDGEMENT_BOUNDS:
            self._check_bounds(fmt)

    def _check_model_planted(self) -> None:
        models = set(self.models).union(*(ext.models for ext in self.extensions.values()))
        for model, planted in _mapping(self.model_planted, "model_planted").items():
            if model not in models:
                raise InputError(SOURCE, f"unknown model {model!r}", "model_planted")
            for key in _mapping(planted, f"model_planted.{model}"):
                planted_group(key)
        for mode, planted in _mapping(self.mode_planted, "mode_planted").items():
            for key in _mapping(planted, f"mode_planted.{mode}"):
                planted_group(key)
                if mode not in MODES[key[1]]:
                    raise InputError(SOURCE, f"{key[1]} has no mode {mode!r}", "mode_planted")

    def _check_cue_effects(self) -> None:
        by_cue = {"cue_planted": self.cue_planted, "cue_disparity": self.cue_disparity}
        for key, values in by_cue.items():
            unknown = sorted(set(_mapping(values, key)) - set(CUE_TYPES))
            if unknown:
                raise InputError(SOURCE, f"unknown cue type {unknown[0]!r}", key)
        for cue, planted in self.cue_planted.items():
            for key in _mapping(planted, f"cue_planted.{cue}"):
                planted_group(key)
        for key, sd in _mapping(self.profile_disparity_sd, "profile_disparity_sd").items():
            planted_group(key)
            if not (np.isfinite(sd) and sd >= 0):
                raise InputError(SOURCE, "a non-negative SD", "profile_disparity_sd")
        if not all(np.isfinite(list(self.cue_disparity.values()))):
            raise InputError(SOURCE, "finite multipliers", "cue_disparity")

    def disparity_reach(self, fmt: str) -> float:
        """The largest per-profile deviation ``profile_disparity_sd`` can give a row of
        ``fmt`` (clipped draws, the largest cue multiplier)."""
        sds = [sd for key, sd in self.profile_disparity_sd.items() if key[1] == fmt]
        scale = max([1.0, *(abs(v) for v in self.cue_disparity.values())])
        return CLIP * max([0.0, *sds]) * scale

    def planted_scenarios(self) -> list[dict[tuple[str, str, str], float]]:
        """The planted effects of every model, mode and cue type: the common ones, and with
        each model's, each mode's and each cue type's own added (the bounds hold for all)."""
        scenarios = []
        for by_model in ({}, *self.model_planted.values()):
            for by_mode in ({}, *self.mode_planted.values()):
                for by_cue in ({}, *self.cue_planted.values()):
                    merged = dict(self.planted)
                    for key, value in [*by_model.items(), *by_mode.items(), *by_cue.items()]:
                        merged[key] = merged.get(key, 0.0) + value
                    scenarios.append(merged)
        return scenarios

    def _check_failure_by_group(self) -> None:
        levels = {"race": RACES, "gender": GENDERS}
        for model, extra in _mapping(self.failure_by_group, "failure_by_group").items():
            extra = _mapping(extra, f"failure_by_group.{model}")
            unknown = sorted(set(extra) - {*RACES, *GENDERS})
            if unknown:
                raise InputError(
                    SOURCE, f"unknown race or gender {unknown[0]!r}", f"failure_by_group.{model}"
                )
            worst = self.parse_failure + sum(
                max([0.0, *(extra.get(v, 0.0) for v in values)]) for values in levels.values()
            )
            if any(v < 0 for v in extra.values()) or worst > 1:
                raise InputError(
                    SOURCE, "failure probabilities must stay in [0, 1]", f"failure_by_group.{model}"
                )

    def _check_position_shift(self) -> None:
        key = "recognition_position_shift"
        shifts = _mapping(self.recognition_position_shift, key)
        if any(isinstance(p, bool) or not isinstance(p, int) or p < 1 for p in shifts):
            raise InputError(SOURCE, "positions are integers from 1 (listed first)", key)
        rates = self.recognition.get("choice", {}).values()
        for position, shift in shifts.items():
            if any(not 0 <= rate + shift <= 1 for rate in rates):
                raise InputError(
                    SOURCE,
                    f"position {position}: shift {shift:g} takes a forced-choice recognition "
                    "rate outside [0, 1]",
                    key,
                )

    def largest_scale(self, fmt: str) -> float:
        """The largest ``rate_scale`` / ``decide_scale`` that keeps the expected rating
        (probability) in its range for every planted effect, mode shift and clipped random
        effect of the settings."""
        center = self.rate_center if fmt == "rate" else self.decide_center
        spread = CLIP * (self.profile_sd + self.pair_sd + self.model_sd + self.model_pair_sd)
        spread += max([0.0, *(abs(v) for v in self.profile_quality.values())])
        disparity = self.disparity_reach(fmt)
        shifts = [0.0, *self.mode_shift.get(fmt, {}).values()]
        low, high = JUDGEMENT_BOUNDS[fmt]
        largest = np.inf
        for planted in self.planted_scenarios():
            domains = {d for d, f, _ in planted if f == fmt} or {""}
            for domain in domains:
                by_dim: dict[str, list[float]] = {"race": [0.0], "gender": [0.0]}
                for key, value in planted.items():
                    if key[0] == domain and key[1] == fmt:
                        by_dim[planted_group(key)[0]].append(value)
                up = center + max(shifts) + sum(max(v) for v in by_dim.values()) + disparity
                down = center + min(shifts) + sum(min(v) for v in by_dim.values()) - disparity
                reach_up = max(self.tier_quality.values()) + spread
                reach_down = spread - min(self.tier_quality.values())
                largest = min(largest, (high - up) / reach_up, (down - low) / reach_down)
        return float(largest)

    def _check_bounds(self, fmt: str) -> None:
        """Refuse settings whose expected rating or probability could leave its range."""
        scale = self.rate_scale if fmt == "rate" else self.decide_scale
        if scale > self.largest_scale(fmt) + 1e-12:
            low, high = JUDGEMENT_BOUNDS[fmt]
            raise InputError(
                SOURCE,
                f"the expected {fmt} answer can leave [{low:g}, {high:g}] ({fmt}_scale "
                f"{scale:g}, at most {self.largest_scale(fmt):.3f} here): lower {fmt}_scale, "
                "the random-effect SDs or the planted effects",
                f"{fmt}_scale",
            )

    def with_planted(self, planted: Mapping[tuple[str, str, str], float]) -> SimulationSettings:
        """These settings with ``planted`` effects added, the judgement scales lowered where
        the effects would push an expected answer out of its range (large plants need room)."""
        trial = dataclasses.replace(
            self, planted={**self.planted, **planted}, rate_scale=0.0, decide_scale=0.0
        )
        largest = {f: max(0.0, trial.largest_scale(f)) for f in JUDGEMENT_BOUNDS}
        return dataclasses.replace(
            self,
            planted={**self.planted, **planted},
            rate_scale=min(self.rate_scale, largest["rate"]),
            decide_scale=min(self.decide_scale, largest["decide"]),
        )

    def arms(self) -> dict[str, tuple[dict[str, Any], tuple[str, ...]]]:
        """Arm -> (design settings, models): the primary design, then each extension's."""
        designs = arm_designs(self.design, {n: e.design for n, e in self.extensions.items()})
        models = {n: tuple(e.models) for n, e in self.extensions.items()}
        return {arm: (d, models.get(arm) or tuple(self.models)) for arm, d in designs.items()}

    def path(self, relative: str) -> Path:
        path = Path(relative)
        return path if path.is_absolute() else Path(self.root) / path


def planted_group(key: tuple[str, str, str]) -> tuple[str, str]:
    """The (dimension, focal level) a planted ``(domain, format, contrast)`` moves."""
    if not (isinstance(key, tuple) and len(key) == 3):
        raise InputError(SOURCE, f"planted keys are (domain, format, contrast), got {key!r}")
    _, fmt, contrast = key
    if fmt not in ("rate", "decide", "rank"):
        raise InputError(SOURCE, f"unknown format {fmt!r} in {key}", "planted")
    focal, sep, reference = contrast.partition("_vs_")
    levels = {v.lower(): ("race", v) for v in RACES} | {v.lower(): ("gender", v) for v in GENDERS}
    if not sep or focal not in levels or reference not in levels:
        raise InputError(SOURCE, f"unknown contrast {contrast!r}", "planted")
    dimension, level = levels[focal]
    if levels[reference] != (dimension, BASELINES[dimension]) or level == BASELINES[dimension]:
        raise InputError(
            SOURCE, f"{contrast!r}: a contrast against {BASELINES[dimension]}", "planted"
        )
    return dimension, level


def request_counts(settings: SimulationSettings) -> dict[str, int]:
    """Requests (answers before exploding rankings) of each arm: prompts x models x seeds."""
    profiles = settings.path(settings.profiles)
    stimuli = settings.fairfund_stimuli
    tiers = design_tier_counts(
        profiles_path=profiles,
        profiles_format=settings.profiles_format,
        strip_suffixes=settings.strip_suffixes,
        name_pairs_path=settings.path(settings.name_pairs),
        designs={arm: design for arm, (design, _) in settings.arms().items()},
        fairfund_stimuli_path=None if stimuli is None else settings.path(stimuli),
    )
    return {
        arm: sum(expected_counts(design, tiers, profiles_file=str(profiles)).values())
        * len(models)
        * len(settings.seeds)
        for arm, (design, models) in settings.arms().items()
    }


def from_config(config: Mapping[str, Any], **generative: Any) -> SimulationSettings:
    """Settings with the design, models, seeds, extensions and resources of a workflow config
    (``config.yaml``'s structure: ``seeds``, ``models``, ``decision``), and ``generative``
    for the other fields."""
    decision = _mapping(config.get("decision"), "decision")
    models = tuple(decision.get("models") or list(config.get("models", {})))
    extensions = {
        name: Extension(dict(block.get("design", {})), tuple(block.get("models", ())))
        for name, block in _mapping(decision.get("extensions", {}), "extensions").items()
    }
    resources = {
        k: decision[k]
        for k in (
            "profiles",
            "profiles_format",
            "name_pairs",
            "hobbies",
            "neighbourhoods",
            "fairfund_stimuli",
            "first_names",
            "dialect",
        )
        if k in decision
    }
    if "strip_suffixes" in decision:
        resources["strip_suffixes"] = tuple(decision["strip_suffixes"])
    return SimulationSettings(
        design=dict(decision.get("design", {})),
        models=models,
        seeds=tuple(config.get("seeds", (0,))),
        extensions=extensions,
        **resources,
        **generative,
    )


def config_settings(root: str | Path, config: str | Path, **generative: Any) -> SimulationSettings:
    """Settings with the design, models, seeds and extensions of a workflow config file
    (relative to ``root``) and ``generative`` for the other fields."""
    path = Path(config) if Path(config).is_absolute() else Path(root) / config
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    return from_config(loaded, **({"root": str(root)} | generative))


def paper_settings(
    root: str | Path = ".", config: str | Path = PAPER_CONFIG, **generative: Any
) -> SimulationSettings:
    """The paper's design (``config/decision/paper.yaml``: three domains, 12 profiles and 40
    name pairs, five models, the precision top-up and reasoning rerun as extensions; 40,728
    requests, the paper's 40,726 being no multiple of the design's 4-request units) with the
    paper's planted sizes: hiring Rate Black vs White +0.047 points, first-listed gain 0.11
    positions in disguised bundles, all matched bundles tied."""
    return config_settings(root, config, **({"planted": dict(PAPER_PLANTED)} | generative))
