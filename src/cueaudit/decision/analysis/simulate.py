"""A simulator of the decision audit: :class:`AnalysisFrames` of the schemas of
:data:`cueaudit.decision.analysis.frames.SCHEMAS`, drawn from a generative model whose planted
effects are, by construction, the estimands of the analysis.

**The design is the real one.** Every prompt comes from
:func:`cueaudit.decision.prompts.build_decision_prompts` (and :func:`explode_candidates`) on
the shipped profiles, name pairs and attribute lists, per arm as the workflow builds them (an
extension's design is the primary design with its keys replaced); the prompt text is dropped.
Each prompt is answered once per model and seed of its arm.

**The generative model.** Every profile ``p`` and name pair ``k`` has a latent quality

    q = tier_quality[tier] + u_p + v_k + w_model,

``u, v, w`` normal with SDs ``profile_sd, pair_sd, model_sd``, clipped at ±2 SD (symmetric,
so their mean stays zero) and drawn afresh for each study (``seed``); ``u`` adds the fixed
``profile_quality`` of a profile, if the settings give one (applications of unequal quality).
The formats read it:

Rate (identity link)
    the expected rating ``m = rate_center + rate_scale * q + mode shift + planted`` must lie
    in [1, 5] (checked from the settings: a setting that could leave it is refused). The
    rating is an integer whose expectation is exactly ``m``: with probability ``rate_spread``
    ``1 + Binomial(4, (m - 1) / 4)``, else ``m`` rounded at random to a neighbouring integer
    (``floor(m) + Bernoulli(m - floor(m))``). So ``E[y] = m`` is linear in the planted
    effect, and a planted +0.047 is exactly the difference of expected ratings of focal and
    reference rows. Because the Rate/Decide design crosses every profile with every name pair
    (and model, mode, paraphrase) and the random effects have mean zero, the lmm's race and
    gender coefficients (:mod:`~cueaudit.decision.analysis.fitters`) are unbiased for the
    planted values: the planted value *is* the estimand.
Decide (linear probability)
    ``y ~ Bernoulli(decide_center + decide_scale * q + mode shift + planted)``; the
    probability is checked to lie in [0, 1] as for Rate. The same argument makes the planted
    probability difference the estimand.
Rank (competition ranks)
    an answer is fully tied (every candidate rank 1) with its bundle type's
    ``tie_rates``. Otherwise, with probability ``1 - rank_lapse``, candidates are ranked by the
    utilities ``rank_scale * q + N(0, rank_noise_sd)`` (no ties); with probability
    ``rank_lapse`` (a lapse) one candidate is put first, candidate ``j`` with probability
    ``1/4 + (d_j - mean(d)) / (2 * rank_lapse)``, and the other three follow in random order.
    ``d_j`` holds the candidate's planted effects in positions: the first-listed gain
    (``position_gain`` of the bundle type, on position 1) and the planted race and gender
    rank contrasts, each divided by ``1 - tie_rate`` of the bundle type. A lapse gives the
    chosen candidate 4 points and the others 2 on average, so the lapse adds exactly
    ``d_j - mean(d)`` to a candidate's expected points, whatever the utilities; ties then
    scale it by ``1 - tie_rate``. In a disguised bundle each race, each position and two of
    each gender appear once (twice; in a position-balanced bundle two of each race and gender),
    so ``mean(d)`` is one constant and the planted values are exactly the expected differences
    in points (position 1 minus positions 2-4; focal minus reference; the half-of-list contrast
    of a first-listed gain g is g / 2). The quality-ranked part carries none of them: its
    expected points depend only on the tiers shown, and the orthogonal Latin squares give every
    race, position and gender the same tiers beside the same company in every block, with
    profile and name effects drawn independently of race. (The lmm weights name pairs by their
    rows, which differ by one or two bundles between pairs; that is the only way a nuisance can
    reach its estimate.)
    A bundle type tied always (the matched ones, by default) carries no effect.
Probes
    the probe recognises an audit (``"Fairness"`` / ``"fairness_bias"``) with the rate of
    :attr:`SimulationSettings.recognition` for its probe and bundle type, plus, for the forced
    choice, :attr:`SimulationSettings.recognition_position_shift` at the position its prompt
    lists the Fairness option (none by default: recognition does not depend on the position);
    otherwise one of the other labels of the prompt file, at random. Where
    :attr:`SimulationSettings.recognition_if_tied` names the probe and bundle type, a probe
    whose bundle the same model tied in its text ranking (same seed and paraphrase) recognises
    with that rate instead (an association of recognition with ties; none by default).

``model_planted`` adds a model's own planted effects to its rows (a model x group
interaction), and ``mode_planted`` a mode's own (a mode x group interaction), by the same
mechanisms; ``cue_planted`` a cue type's own to the rows of that
cue type (:mod:`cueaudit.decision.cue_signals`), and ``profile_disparity_sd`` a per-profile
deviation
of the focal group (a profile x group effect ``a_p``, times ``cue_disparity`` of the row's cue
type), the same mechanisms again: in a Rate or Decide row it moves the expectation, in a
ranking the lapse's choice of the focal candidate (so per profile, or per bundle, the focal
group's deviation from the reference follows ``a_p`` under every cue type that carries it).
The signals of cue types beyond name pairs (first names, explicit descriptors, dialect texts)
draw their ``v`` from a stream of their own, so adding a cue type leaves the name pairs' draws
alone.

Any answer fails to parse with probability ``parse_failure`` (a null ``y``; a ranking with
null ranks; a probe with a null label), independently of everything else, so it never biases
a contrast; ``failure_by_group`` raises it for one model's Rate and Decide answers about one
race or gender (a differential non-response). Option scores (``score``) are the expectation
of the answer (``m``, or the probability of yes) plus the answer's own deviation
(``score_sd``) for text answers, and null for tool calls.

Draws come from :class:`numpy.random.Generator` streams named by their role (profile, pair,
model, each arm's table), each seeded from ``(seed, crc32(role))``: a study is a
deterministic function of the settings and the seed, and changing one part of the settings
leaves the other parts' draws alone (common random numbers).

One module on purpose: every table's draws come from one generative model (its random
effects and common random numbers), which split apart would have to be passed around whole.
"""

from __future__ import annotations

import dataclasses
import functools
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import polars as pl

from cueaudit.cues.name_pairs import load_name_pairs
from cueaudit.decision.aid import with_aid
from cueaudit.decision.analysis.frames import (
    RECOGNISED_LABELS,
    SCHEMAS,
    AnalysisFrames,
    with_points,
)
from cueaudit.decision.analysis.simulation_settings import (
    CLIP,
    SOURCE,
    SimulationSettings,
    planted_group,
)
from cueaudit.decision.cue_signals import CUE_TYPES, cue_resources, is_cue_signal
from cueaudit.decision.design import BUNDLE_SIZE, RACES
from cueaudit.decision.design_settings import DesignSettings
from cueaudit.decision.formats import load_prompt_resources
from cueaudit.decision.profiles import load_attribute_list, load_profiles
from cueaudit.decision.prompts import build_decision_prompts, explode_candidates
from cueaudit.decision.tasks import task_spec
from cueaudit.errors import InputError

_DESIGN_COLUMNS: Final = ("prompt_uid", "task", "arm", "cue", "domain", "mode", "paraphrase")
_CANDIDATE_COLUMNS: Final = ("profile_id", "tier", "pair_id", "race", "gender")


# --- the design ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArmDesign:
    """One arm's prompts without their text: judgements one row per prompt, rankings one row
    per candidate of a bundle prompt (its four rows together, in position order), probes one
    row per prompt."""

    arm: str
    models: tuple[str, ...]
    judgements: pl.DataFrame
    rankings: pl.DataFrame
    probes: pl.DataFrame
    probe_labels: Mapping[str, tuple[str, ...]]  # probe -> its labels


@dataclass(frozen=True)
class SimulationDesign:
    arms: tuple[ArmDesign, ...]
    profile_ids: tuple[str, ...]
    pair_ids: tuple[str, ...]


def build_design(settings: SimulationSettings) -> SimulationDesign:
    """Every arm's prompts, from :func:`build_decision_prompts` on the settings' resources."""
    profiles = load_profiles(
        settings.path(settings.profiles),
        settings.profiles_format,  # type: ignore[arg-type]
        settings.strip_suffixes,
    )
    pairs = load_name_pairs(settings.path(settings.name_pairs))
    hobbies = load_attribute_list(settings.path(settings.hobbies))
    neighbourhoods = load_attribute_list(settings.path(settings.neighbourhoods))
    designs = [DesignSettings.of(design) for design, _ in settings.arms().values()]
    domains = {d for design in designs for d in design.domains}
    stimuli = settings.fairfund_stimuli and settings.path(settings.fairfund_stimuli)
    profiles, appeals = with_aid(profiles, pairs, stimuli or None, sorted(domains))
    cache = settings.dialect.get("cache")
    resources = cue_resources(
        {cue for design in designs for cue in design.cues},
        profiles,
        first_names=settings.path(settings.first_names),
        dialect=settings.dialect,
        dialect_cache=":memory:" if cache is None else settings.path(cache),
    )
    build = functools.partial(
        build_decision_prompts, profiles, pairs, hobbies, neighbourhoods, appeals=appeals
    )
    arms = []
    signals: set[str] = set()
    for arm, (design, models) in settings.arms().items():
        design = {**design, "prompts": str(settings.path(DesignSettings.of(design).prompts))}
        tables = build(design, arm, cue_resources=resources)
        labels = probe_labels(design["prompts"])
        arms.append(_arm_design(arm, models, tables, labels))
        for table in (arms[-1].judgements, arms[-1].rankings):
            signals |= {p for p in table["pair_id"].drop_nulls() if is_cue_signal(p)}
    return SimulationDesign(
        tuple(arms),
        tuple(sorted(profiles["profile_id"].to_list())),
        tuple(sorted(pairs["pair_id"].to_list()) + sorted(signals)),
    )


def probe_labels(prompts: str | Path) -> dict[str, tuple[str, ...]]:
    """The answer labels of each probe in a prompt file (forced choice; free-text categories)."""
    resources = load_prompt_resources(prompts)
    return {
        "choice": tuple(resources.probes["choice"].labels),
        "free": tuple(category for category, _ in resources.probes["free"].rules),
    }


def _arm_design(
    arm: str,
    models: tuple[str, ...],
    tables: Mapping[str, pl.DataFrame],
    labels: Mapping[str, Any],
) -> ArmDesign:
    formats = {task: task_spec(task).format for task in tables}
    single = [t for task, t in tables.items() if formats[task] in ("rate", "decide")]
    ranked = [t for task, t in tables.items() if formats[task] == "rank"]
    probed = [t for task, t in tables.items() if formats[task] == "probe"]
    judgements = [t.select(*_DESIGN_COLUMNS, "format", *_CANDIDATE_COLUMNS) for t in single]
    rankings = [
        explode_candidates(t).select(
            *_DESIGN_COLUMNS,
            "bundle_type",
            "bundle_id",
            "position",
            *_CANDIDATE_COLUMNS,
            "attribute",
            "pseudo_race",
        )
        for t in ranked
    ]
    probes = [
        t.select(*_DESIGN_COLUMNS, "probe", "bundle_type", "bundle_id", "fairness_position")
        for t in probed
    ]

    def stack(parts: list[pl.DataFrame], schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
        if parts:
            return pl.concat(parts)
        return pl.DataFrame(schema={c: schema[c] for c in schema if c not in _OUTCOMES})

    return ArmDesign(
        arm,
        models,
        stack(judgements, SCHEMAS["judgements"]).select(
            [c for c in SCHEMAS["judgements"] if c not in _OUTCOMES]
        ),
        stack(rankings, SCHEMAS["rankings"]).select(
            [c for c in SCHEMAS["rankings"] if c not in _OUTCOMES]
        ),
        stack(probes, SCHEMAS["probes"]).select(
            [c for c in SCHEMAS["probes"] if c not in _OUTCOMES]
        ),
        dict(labels),
    )


_OUTCOMES: Final = frozenset(
    {"model", "seed", "generated", "y", "score", "rank", "points", "points_rule", "tie"}
    | {"label", "recognised"}
)


def _answered(table: pl.DataFrame, models: Sequence[str], seeds: Sequence[int]) -> pl.DataFrame:
    """The prompts once per model and seed (model-major, prompts in their order)."""
    parts = [
        table.with_columns(model=pl.lit(m, pl.String), seed=pl.lit(s, pl.Int64))
        for m in models
        for s in seeds
    ]
    return pl.concat(parts) if parts else table.with_columns(model=pl.lit(None, pl.String))


# --- drawing ---------------------------------------------------------------------------------
def _stream(seed: int, role: str) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(SOURCE, f"a non-negative integer seed, got {seed!r}", "seed")
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(role.encode())]))


def _effects(rng: np.random.Generator, n: int, sd: float) -> np.ndarray:
    return np.clip(rng.standard_normal(n), -CLIP, CLIP) * sd


def _lookup(values: pl.Series, table: Mapping[str, float]) -> np.ndarray:
    return values.replace_strict(dict(table), return_dtype=pl.Float64, default=0.0).to_numpy()


@dataclass(frozen=True)
class _Latent:
    profile: dict[str, float]
    pair: dict[str, float]
    model: dict[str, float]
    model_pair: dict[str, float]  # keyed "model\x1fpair"
    #: each planted key's per-profile deviation of the focal group (profile_disparity_sd)
    disparity: dict[tuple[str, str, str], dict[str, float]] = dataclasses.field(
        default_factory=dict
    )

    def quality(self, rows: pl.DataFrame, tiers: Mapping[str, float]) -> np.ndarray:
        both = rows.select(pl.concat_str(["model", "pair_id"], separator="\x1f")).to_series()
        return (
            _lookup(rows["tier"], tiers)
            + _lookup(rows["profile_id"], self.profile)
            + _lookup(rows["pair_id"], self.pair)
            + _lookup(rows["model"], self.model)
            + (_lookup(both, self.model_pair) if self.model_pair else 0.0)
        )


def _latent(
    settings: SimulationSettings,
    profile_ids: Sequence[str],
    pair_ids: Sequence[str],
    models: Sequence[str],
    seed: int,
) -> _Latent:
    profile = _effects(_stream(seed, "profile"), len(profile_ids), settings.profile_sd)
    unknown = sorted(set(settings.profile_quality) - set(profile_ids))
    if unknown:
        raise InputError(SOURCE, f"no profile {unknown[0]!r} in the design", "profile_quality")
    profile = profile + np.array([settings.profile_quality.get(p, 0.0) for p in profile_ids])
    # the signals of cue types beyond name pairs draw from their own stream
    signals = [p for p in pair_ids if is_cue_signal(p)]
    pair_ids = [p for p in pair_ids if not is_cue_signal(p)]
    pair = _effects(_stream(seed, "pair"), len(pair_ids), settings.pair_sd)
    model_pair: dict[str, float] = {}
    if settings.model_pair_sd > 0:
        for m in models:
            rng = _stream(seed, f"model-pair/{m}")
            draws = _effects(rng, len(pair_ids), settings.model_pair_sd)
            model_pair |= {f"{m}\x1f{k}": float(v) for k, v in zip(pair_ids, draws, strict=True)}
    signal = _effects(_stream(seed, "pair/cue"), len(signals), settings.pair_sd)
    disparity = {
        key: dict(
            zip(
                profile_ids,
                _effects(_stream(seed, "disparity/" + "/".join(key)), len(profile_ids), sd),
                strict=True,
            )
        )
        for key, sd in settings.profile_disparity_sd.items()
    }
    return _Latent(
        dict(zip(profile_ids, profile.tolist(), strict=True)),
        dict(zip(pair_ids, pair.tolist(), strict=True))
        | dict(zip(signals, signal.tolist(), strict=True)),
        {m: float(_effects(_stream(seed, f"model/{m}"), 1, settings.model_sd)[0]) for m in models},
        model_pair,
        disparity,
    )


def _planted(
    rows: pl.DataFrame,
    settings: SimulationSettings,
    fmt_column: str | None,
    latent: _Latent | None = None,
) -> np.ndarray:
    """The planted effect of each row (its domain, format and groups; its model's own,
    ``model_planted``; its mode's own, ``mode_planted``; its cue type's own, ``cue_planted``;
    and with ``latent``, its profile's deviation of the focal group times its cue type's
    ``cue_disparity``)."""
    total = np.zeros(rows.height)
    planted: list[tuple[tuple[str, str, str], Any, tuple[str, str] | None]] = [
        (key, value, None) for key, value in settings.planted.items()
    ]
    by_factor = (
        ("model", settings.model_planted),
        ("mode", settings.mode_planted),
        ("cue", settings.cue_planted),
    )
    for column, by in by_factor:
        for level_of, extra in by.items():
            planted += [(key, value, (column, level_of)) for key, value in extra.items()]
    if latent is not None:
        for key, by_profile in latent.disparity.items():
            scale = _lookup(rows["cue"], {c: 1.0 for c in CUE_TYPES} | dict(settings.cue_disparity))
            planted.append((key, _lookup(rows["profile_id"], by_profile) * scale, None))
    for key, value, only in planted:
        domain, fmt, _ = key
        dimension, level = planted_group(key)
        hit = (rows["domain"] == domain) & (rows[dimension] == level)
        if only is not None:
            hit = hit & (rows[only[0]] == only[1])
        if fmt_column is not None:
            hit = hit & (rows[fmt_column] == fmt)
        elif fmt != "rank":
            continue
        total += np.where(hit.to_numpy(), value, 0.0)
    return total


def _judgements(
    rows: pl.DataFrame, settings: SimulationSettings, latent: _Latent, rng: np.random.Generator
) -> pl.DataFrame:
    n = rows.height
    quality = latent.quality(rows, settings.tier_quality)
    fmt = rows["format"].to_numpy()
    mode = rows["mode"].to_numpy()
    shift = np.zeros(n)
    for f, by_mode in settings.mode_shift.items():
        for m, value in by_mode.items():
            shift += np.where((fmt == f) & (mode == m), value, 0.0)
    offset = shift + _planted(rows, settings, "format", latent)
    rate = fmt == "rate"
    expected = (
        np.where(
            rate,
            settings.rate_center + settings.rate_scale * quality,
            settings.decide_center + settings.decide_scale * quality,
        )
        + offset
    )
    u = rng.random((n, 7))
    p = np.clip((expected - 1.0) / 4.0, 0.0, 1.0)
    binomial = 1.0 + (u[:, 1:5] < p[:, None]).sum(axis=1)
    floor = np.floor(expected)
    rounded = floor + (u[:, 5] < expected - floor)
    rating = np.where(u[:, 0] < settings.rate_spread, binomial, rounded)
    y = np.where(rate, rating, (u[:, 1] < expected).astype(np.float64))
    failure = np.full(n, settings.parse_failure)
    for model, extra in settings.failure_by_group.items():
        for level, value in extra.items():
            dimension = "race" if level in RACES else "gender"
            failure += value * ((rows["model"] == model) & (rows[dimension] == level)).to_numpy()
    parsed = u[:, 6] >= failure
    # drawn after every other draw of the stream, so the answers are those without it
    deviation = rng.standard_normal(n) * np.where(
        rate, settings.score_sd.get("rate", 0.0), settings.score_sd.get("decide", 0.0)
    )
    score = expected + deviation
    return rows.with_columns(
        y=pl.Series(np.where(parsed, y, np.nan)).fill_nan(None),
        score=pl.Series(np.where(parsed & (mode == "text"), score, np.nan)).fill_nan(None),
    )


def _rank_effects(
    rows: pl.DataFrame, settings: SimulationSettings, latent: _Latent | None = None
) -> np.ndarray:
    """Each candidate's planted points effect ``d`` before ties (see the module docstring);
    the profiles' deviations (``profile_disparity_sd``) only with ``latent``."""
    kind = rows["bundle_type"]
    first = (rows["position"] == 1).to_numpy()
    planted = _planted(rows, settings, None, latent)
    d = np.where(first, _lookup(kind, settings.position_gain), 0.0) + planted
    tie = _lookup(kind, settings.tie_rates)
    return np.where(tie < 1, d / np.where(tie < 1, 1.0 - tie, 1.0), 0.0)


def rank_lapse_needed(
    settings: SimulationSettings, rankings: pl.DataFrame, *, at_most_one: bool = True
) -> float:
    """The smallest ``rank_lapse`` that carries the settings' planted rank effects and
    first-listed gain in these ranking rows (one row per candidate, answers in position
    order): a lapse picks candidate j first with probability ``1/4 + spread_j / (2 lapse)``,
    which must stay in [0, 1]. 5% to spare, at most 1 (unless ``at_most_one`` is false: above
    1, no lapse rate carries the effects)."""
    if rankings.is_empty():
        return 0.0
    d = _rank_effects(rankings, settings).reshape(-1, BUNDLE_SIZE)
    spread = d - d.mean(axis=1, keepdims=True)
    need = max(
        float(spread.max(initial=0.0)) / (2 * (1 - 1 / BUNDLE_SIZE)),
        float(-spread.min(initial=0.0)) / (2 / BUNDLE_SIZE),
    )
    return min(1.0, 1.05 * need) if at_most_one else 1.05 * need


def _rankings(
    rows: pl.DataFrame, settings: SimulationSettings, latent: _Latent, rng: np.random.Generator
) -> pl.DataFrame:
    n = rows.height // BUNDLE_SIZE
    shape = (n, BUNDLE_SIZE)
    quality = latent.quality(rows, settings.tier_quality).reshape(shape)
    utility = settings.rank_scale * quality + settings.rank_noise_sd * rng.standard_normal(shape)
    d = _rank_effects(rows, settings, latent).reshape(shape)
    spread = d - d.mean(axis=1, keepdims=True)
    lapse_rate = settings.rank_lapse
    if lapse_rate == 0 and np.any(np.abs(spread) > 1e-12):
        raise InputError(SOURCE, "rank effects need a positive rank_lapse", "rank_lapse")
    choice = 0.25 + (spread / (2 * lapse_rate) if lapse_rate > 0 else 0.0)
    if np.any(choice < -1e-12) or np.any(choice > 1 + 1e-12):
        worst = (
            rows["bundle_type"]
            .to_numpy()
            .reshape(shape)[np.unravel_index(np.argmax(np.abs(choice - 0.25)), shape)]
        )
        raise InputError(
            SOURCE,
            f"rank effects too large for rank_lapse {lapse_rate} in {worst} bundles (a lapse "
            "would need a probability outside [0, 1]): raise rank_lapse",
            "rank_lapse",
        )
    u = rng.random((n, 4))
    keys = rng.random(shape)
    cumulative = np.cumsum(choice, axis=1)
    cumulative[:, -1] = np.inf
    chosen = np.argmax(cumulative > u[:, 1:2], axis=1)
    lapsed = np.where(np.arange(BUNDLE_SIZE) == chosen[:, None], 2.0, keys)
    score = np.where((u[:, 0] < lapse_rate)[:, None], lapsed, utility)
    order = np.argsort(-score, axis=1, kind="stable")
    rank = np.empty(shape, dtype=np.int64)
    np.put_along_axis(rank, order, np.arange(1, BUNDLE_SIZE + 1)[None, :], axis=1)
    tie_rate = _lookup(rows["bundle_type"], settings.tie_rates).reshape(shape)[:, 0]
    tied = u[:, 2] < tie_rate
    rank[tied] = 1
    parsed = np.repeat(u[:, 3] >= settings.parse_failure, BUNDLE_SIZE)
    flat = rank.ravel()
    ranked = rows.with_columns(
        rank=pl.Series(flat, dtype=pl.Int64), tie=pl.Series(np.repeat(tied, BUNDLE_SIZE))
    )
    return with_points(_where_parsed(ranked, parsed, ("rank", "tie")), settings.points)


def _where_parsed(rows: pl.DataFrame, parsed: np.ndarray, columns: Sequence[str]) -> pl.DataFrame:
    """Null ``columns`` where an answer did not parse."""
    mask = pl.Series(parsed)
    return rows.with_columns(
        pl.when(mask).then(pl.col(c)).otherwise(None).alias(c) for c in columns
    )


_PAIRED: Final = ("model", "seed", "bundle_id", "paraphrase")


def _tied_in_text(probes: pl.DataFrame, rankings: pl.DataFrame | None) -> np.ndarray:
    """Whether the same model tied each probe's bundle in its text ranking (same seed and
    paraphrase; False where it gave none or it did not parse)."""
    if rankings is None or rankings.is_empty():
        return np.zeros(probes.height, dtype=bool)
    text = (
        rankings.filter(pl.col("mode") == "text")
        .group_by(_PAIRED)
        .agg(pl.col("tie").first().fill_null(False).alias("_tied"))
    )
    joined = probes.select(_PAIRED).join(text, on=list(_PAIRED), how="left", maintain_order="left")
    return joined["_tied"].fill_null(False).to_numpy()


def _probes(
    rows: pl.DataFrame,
    settings: SimulationSettings,
    labels: Mapping[str, Sequence[str]],
    rng: np.random.Generator,
    rankings: pl.DataFrame | None = None,
) -> pl.DataFrame:
    n = rows.height
    u = rng.random((n, 3))
    probe = rows["probe"].to_numpy()
    label = np.full(n, None, dtype=object)
    tied = _tied_in_text(rows, rankings) if settings.recognition_if_tied else None
    for name, options in labels.items():
        here = probe == name
        rate = _lookup(rows["bundle_type"], settings.recognition.get(name, {}))
        if tied is not None and name in settings.recognition_if_tied:
            if_tied = dict(settings.recognition_if_tied[name])
            linked = rows["bundle_type"].is_in(list(if_tied)).to_numpy() & tied
            rate = np.where(linked, _lookup(rows["bundle_type"], if_tied), rate)
        if name == "choice" and settings.recognition_position_shift:
            position = rows["fairness_position"].cast(pl.String)
            shifts = {str(k): v for k, v in settings.recognition_position_shift.items()}
            rate = rate + _lookup(position, shifts)
        yes = [v for v in options if v in RECOGNISED_LABELS]
        others = np.asarray([v for v in options if v not in RECOGNISED_LABELS], dtype=object)
        if len(yes) != 1 or not len(others):
            raise InputError(SOURCE, f"probe {name}: labels {list(options)}", "probes")
        pick = others[np.minimum((u[:, 1] * len(others)).astype(np.int64), len(others) - 1)]
        label[here] = np.where(u[:, 0] < rate, yes[0], pick)[here]
    named = rows.with_columns(label=pl.Series(label.tolist(), dtype=pl.String))
    named = named.with_columns(recognised=pl.col("label").is_in(list(RECOGNISED_LABELS)))
    return _where_parsed(named, u[:, 2] >= settings.parse_failure, ("label", "recognised"))


def _answer_arm(
    arm: str,
    tables: Mapping[str, pl.DataFrame],
    labels: Mapping[str, Sequence[str]],
    settings: SimulationSettings,
    latent: _Latent,
    seed: int,
) -> dict[str, pl.DataFrame]:
    """Outcomes for one arm's answered rows (each table may be empty)."""
    draw = {"judgements": _judgements, "rankings": _rankings}
    out = {}
    for name, rows in tables.items():
        if rows.is_empty():
            continue
        rng = _stream(seed, f"{arm}/{name}")
        if name == "probes":
            out[name] = _probes(rows, settings, labels, rng, out.get("rankings"))
        else:
            out[name] = draw[name](rows, settings, latent, rng)
    return out


def _frames(parts: Mapping[str, list[pl.DataFrame]]) -> AnalysisFrames:
    frames = {}
    for name, schema in SCHEMAS.items():
        frames[name] = (
            pl.concat(parts[name], how="diagonal_relaxed").select(
                pl.col(c).cast(t) if c != "generated" else pl.lit(None, dtype=t).alias(c)
                for c, t in schema.items()
            )
            if parts[name]
            else pl.DataFrame(schema=dict(schema))
        )
    return AnalysisFrames(**frames)


def simulate(
    settings: SimulationSettings, seed: int = 0, *, design: SimulationDesign | None = None
) -> AnalysisFrames:
    """One simulated study: every arm's prompts answered by its models and seeds.

    ``design`` (from :func:`build_design` on the same settings) saves rebuilding the prompts
    when many studies share a design."""
    design = build_design(settings) if design is None else design
    models = sorted({m for arm in design.arms for m in arm.models})
    latent = _latent(settings, design.profile_ids, design.pair_ids, models, seed)
    parts: dict[str, list[pl.DataFrame]] = {name: [] for name in SCHEMAS}
    for arm in design.arms:
        tables = {
            name: _answered(getattr(arm, name), arm.models, settings.seeds) for name in SCHEMAS
        }
        for name, frame in _answer_arm(
            arm.arm, tables, arm.probe_labels, settings, latent, seed
        ).items():
            parts[name].append(frame)
    return _frames(parts)


def simulate_like(
    frames: AnalysisFrames, settings: SimulationSettings, seed: int = 0
) -> AnalysisFrames:
    """New answers to the prompts of ``frames`` (a real study's, say): the same rows, arms,
    models and seeds, with outcomes drawn from the settings' generative model (its design,
    models and seeds are not used). Rankings are ordered by answer and position."""
    rankings = frames.rankings.sort("arm", "model", "seed", "task", "prompt_uid", "position")
    sizes = rankings.group_by("arm", "model", "seed", "task", "prompt_uid").len()["len"]
    if (sizes != BUNDLE_SIZE).any():
        raise InputError("ranking frame", f"answers of {BUNDLE_SIZE} candidates", "prompt_uid")
    rows = {"judgements": frames.judgements, "rankings": rankings, "probes": frames.probes}
    ids = pl.concat(
        [
            frames.judgements.select("profile_id", "pair_id"),
            rankings.select("profile_id", "pair_id"),
        ]
    )
    models = sorted(set().union(*(set(f["model"].drop_nulls()) for f in rows.values())))
    latent = _latent(
        settings,
        sorted(set(ids["profile_id"].drop_nulls())),
        sorted(set(ids["pair_id"].drop_nulls())),
        models,
        seed,
    )
    labels = probe_labels(settings.path(DesignSettings.of(settings.design).prompts))
    arms = sorted(set().union(*(set(f["arm"].drop_nulls()) for f in rows.values())))
    parts: dict[str, list[pl.DataFrame]] = {name: [] for name in SCHEMAS}
    for arm in arms:
        tables = {name: f.filter(pl.col("arm") == arm) for name, f in rows.items()}
        for name, frame in _answer_arm(arm, tables, labels, settings, latent, seed).items():
            parts[name].append(frame)
    return _frames(parts)
