"""Synthetic probing-study data with planted effects, in the pipeline's own table schemas
(test support: the probing analyses' tests check that they recover what is planted).

The simulator writes the tables the analysis reads (``results/prompts/{task}.parquet`` and
``results/outcomes/{model}/seed{seed}/{task}.parquet``, plus a ``race_prediction`` task whose
prompts point at the advice prompts through ``source_prompt_uid``) and knows the population
values every analysis should recover: group ratios, correlations of cue-induced deviations,
race-prediction precision/recall, readability shifts and regression coefficients.

Outcome model, for base prompt b, cue c, race r, gender g, model m (seeds pooled)::

    y = alpha_b + mu[c, r] + nu[c, g] + L[c, r] . f_b + beta . x + e

with ``alpha_b ~ N(level, tau^2)`` the prompt level, ``f_b ~ N(0, I)`` prompt factors (drawn per
model) that give the deviation vectors their correlations, ``x`` the regressors of Tables 5-7
(inferred race, Flesch-Kincaid grade) and ``e ~ N(0, sigma^2)`` (``usd`` tasks). Binary tasks
draw ``answer ~ Bernoulli(clip(y, 0, 1))`` and report ``p_affirmative = clip(y, 0, 1)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np
import polars as pl

from cueaudit.cues import REGISTRY, CueRegistry
from cueaudit.cues.vocabulary import NO_CUE
from cueaudit.io import write_parquet
from cueaudit.probing.race_prediction import TASK as RACE_PREDICTION_TASK
from cueaudit.probing.study import RACE_LABELS as LABELS

PROMPT_SCHEMA: dict[str, pl.DataType] = {
    "prompt_uid": pl.String(),
    "task": pl.String(),
    "base_id": pl.String(),
    "cue": pl.String(),
    "cue_type": pl.String(),
    "cue_source": pl.String(),
    "race": pl.String(),
    "gender": pl.String(),
    "cue_value": pl.String(),
    "text": pl.String(),
    "fk_grade": pl.Float64(),
}
OUTCOME_SCHEMA: dict[str, pl.DataType] = {
    "prompt_uid": pl.String(),
    "model": pl.String(),
    "seed": pl.Int64(),
    "task": pl.String(),
    "answer": pl.Float64(),
    "parse_error": pl.String(),
    "p_affirmative": pl.Float64(),
    "answer_mass": pl.Float64(),
    "answer_label": pl.String(),
}

#: (cue_type, cue_source, races carried, carries gender): the simulator's design of a condition.
Design = tuple[str, str | None, tuple[str, ...], bool]


def cue_design(registry: CueRegistry = REGISTRY) -> dict[str, Design]:
    """Condition id -> its design, in condition-id order."""
    rows = {
        t.cue_id(c.source): (t.kind, c.source, t.races, t.gendered)
        for t in registry
        for c in t.conditions
    }
    return dict(sorted(rows.items()))


CUE_DESIGN: Final[dict[str, Design]] = cue_design()


@dataclass(frozen=True)
class SimSpec:
    """Design and planted effects of one synthetic study."""

    tasks: Mapping[str, str] = field(default_factory=lambda: {"healthcare": "binary"})
    cues: Sequence[str] = ("name_rosenman", "explicit", "dialog_cad", "dialect_aave")
    models: Sequence[str] = ("m1",)
    seeds: Sequence[int] = (0, 1)
    n_base: int = 40
    variants: int = 2  # prompts (names, dialog clusters, ...) per cue x race x gender
    level: float = 0.5  # mean prompt level alpha_b
    tau: float = 0.1  # sd of alpha_b across base prompts
    sigma: float = 0.2  # response noise sd (usd tasks)
    mu: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # cue -> race -> shift
    nu: Mapping[str, float] = field(default_factory=dict)  # gender -> shift (all cues)
    loadings: Mapping[str, Sequence[float]] = field(default_factory=dict)  # "cue/race" -> L
    fk_level: float = 8.0
    fk_tau: float = 1.5  # sd of base-prompt FK grade
    fk_shift: Mapping[str, float] = field(default_factory=dict)  # cue -> FK shift
    fk_noise: float = 0.5  # sd of FK across variants of one base prompt and cue
    p_label: Mapping[str, Mapping[str, tuple[float, float]]] = field(default_factory=dict)
    beta_inferred: Mapping[str, float] = field(default_factory=dict)  # label -> effect
    beta_fk: float = 0.0
    parse_failure: float = 0.0  # share of unparsed answers
    unparsed_cues: Sequence[str] = ()  # cues whose answers never parse
    race_prediction: bool = True
    seed: int = 0

    def shift(self, cue: str, race: str | None) -> float:
        return float(self.mu.get(cue, {}).get(race or NO_CUE, 0.0))

    def loading(self, cue: str, race: str | None) -> np.ndarray:
        return np.asarray(self.loadings.get(f"{cue}/{race}", ()), dtype=float)

    def label_probs(self, cue: str, race: str | None) -> tuple[float, float]:
        """(P(Black), P(Unknown)) of the race prediction for a prompt of ``cue`` and ``race``."""
        return self.p_label.get(cue, {}).get(race or NO_CUE, (0.05, 0.05))


def _uid(*parts: object) -> str:
    return hashlib.sha1("\x1f".join(map(str, parts)).encode()).hexdigest()[:16]


def simulate_prompts(spec: SimSpec, task: str, rng: np.random.Generator) -> pl.DataFrame:
    """Prompt table of one advice task: base prompts x cue variants plus the no-cue baseline."""
    rows: list[tuple[object, ...]] = []
    fk_base = spec.fk_level + spec.fk_tau * rng.standard_normal(spec.n_base)
    for b in range(spec.n_base):
        base_id = f"{task[:1]}{b:05d}"
        text = f"Base prompt {b} of {task}."
        rows.append(
            (_uid(task, b, NO_CUE), task, base_id, NO_CUE, NO_CUE, None, None, None, None, text,
             float(fk_base[b]))
        )  # fmt: skip
        for cue in spec.cues:
            cue_type, source, races, gendered = CUE_DESIGN[cue]
            for race in races:
                for gender in ("male", "female") if gendered else (None,):
                    for v in range(spec.variants):
                        value = f"{cue}-{race}-{gender}-{v}"
                        fk = fk_base[b] + spec.fk_shift.get(cue, 0.0)
                        fk += spec.fk_noise * rng.standard_normal()
                        rows.append(
                            (_uid(task, b, cue, value), task, base_id, cue, cue_type, source,
                             race, gender, value, f"[{value}]\nUSER: {text}", float(fk))
                        )  # fmt: skip
    return pl.DataFrame(rows, schema=PROMPT_SCHEMA, orient="row")


def race_prediction_prompts(advice: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """The race-prediction task: one annotation prompt per advice prompt."""
    frame = pl.concat(advice)
    return frame.with_columns(
        source_prompt_uid=pl.col("prompt_uid"),
        source_task=pl.col("task"),
        prompt_uid=pl.col("prompt_uid").map_elements(
            lambda u: _uid(RACE_PREDICTION_TASK, u), return_dtype=pl.String
        ),
        task=pl.lit(RACE_PREDICTION_TASK),
        text=pl.lit("Infer the race of the user: ") + pl.col("text"),
    )


def _labels(
    spec: SimSpec, prompts: pl.DataFrame, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Drawn labels (0 Black, 1 White, 2 Unknown) and the parse mask, one per prompt."""
    p = np.array(
        [spec.label_probs(c, r) for c, r in zip(prompts["cue"], prompts["race"], strict=True)]
    )
    u = rng.random(prompts.height)
    label = np.where(u < p[:, 0], 0, np.where(u < p[:, 0] + p[:, 1], 2, 1))
    parsed = rng.random(prompts.height) >= spec.parse_failure
    return label, parsed


def simulate(spec: SimSpec, root: str | Path) -> dict[str, list[Path]]:
    """Write prompts and outcomes under ``root`` (the workflow's ``results/`` layout).

    Returns the written paths, keyed ``prompts`` and ``outcomes``.
    """
    rng = np.random.default_rng(spec.seed)
    root = Path(root)
    written: dict[str, list[Path]] = {"prompts": [], "outcomes": []}
    prompts = {task: simulate_prompts(spec, task, rng) for task in spec.tasks}
    rp_prompts = race_prediction_prompts(list(prompts.values())) if spec.race_prediction else None
    for task, frame in prompts.items():
        path = root / "prompts" / f"{task}.parquet"
        write_parquet(frame, path)
        written["prompts"].append(path)
    if rp_prompts is not None:
        path = root / "prompts" / f"{RACE_PREDICTION_TASK}.parquet"
        write_parquet(rp_prompts, path)
        written["prompts"].append(path)
    label_names = np.array(LABELS)
    rp_parts: dict[tuple[str, int], list[pl.DataFrame]] = {}
    for model in spec.models:
        for task, frame in prompts.items():
            codes = frame["base_id"].rank("dense").cast(pl.Int64).to_numpy() - 1
            n_factors = max((len(v) for v in spec.loadings.values()), default=0)
            f = rng.standard_normal((spec.n_base, max(n_factors, 1)))
            alpha = spec.level + spec.tau * rng.standard_normal(spec.n_base)
            mean = alpha[codes].copy()
            for i, (cue, race, gender) in enumerate(
                zip(frame["cue"], frame["race"], frame["gender"], strict=True)
            ):
                mean[i] += spec.shift(cue, race) + spec.nu.get(gender or NO_CUE, 0.0)
                load = spec.loading(cue, race)
                if load.size:
                    mean[i] += float(load @ f[codes[i], : load.size])
            mean += spec.beta_fk * frame["fk_grade"].to_numpy()
            for seed in spec.seeds:
                label, label_parsed = _labels(spec, frame, rng)
                y = mean.copy()
                for code, name in enumerate(LABELS):
                    y += spec.beta_inferred.get(name, 0.0) * (label == code)
                parsed = rng.random(frame.height) >= spec.parse_failure
                parsed &= ~frame["cue"].is_in(list(spec.unparsed_cues)).to_numpy()
                if spec.tasks[task] == "binary":
                    p = np.clip(y, 0.0, 1.0)
                    answer = (rng.random(frame.height) < p).astype(float)
                    p_aff: np.ndarray | None = p
                else:
                    answer = y + spec.sigma * rng.standard_normal(frame.height)
                    p_aff = None
                out = pl.DataFrame(
                    {
                        "prompt_uid": frame["prompt_uid"],
                        "model": model,
                        "seed": seed,
                        "task": task,
                        "answer": np.where(parsed, answer, np.nan),
                        "parse_error": pl.Series(
                            [None if ok else "no_yes_no" for ok in parsed], dtype=pl.String
                        ),
                        "p_affirmative": p_aff,
                        "answer_mass": None if p_aff is None else np.ones(frame.height),
                        "answer_label": None,
                    }
                ).with_columns(pl.col("answer").fill_nan(None))
                path = root / "outcomes" / model / f"seed{seed}" / f"{task}.parquet"
                write_parquet(out.cast(OUTCOME_SCHEMA), path)  # type: ignore[arg-type]
                written["outcomes"].append(path)
                if rp_prompts is None:
                    continue
                src = pl.DataFrame(
                    {
                        "source_prompt_uid": frame["prompt_uid"],
                        "answer_label": np.where(label_parsed, label_names[label], None),
                    }
                )
                rp = rp_prompts.filter(pl.col("source_task") == task).join(
                    src, on="source_prompt_uid", how="left"
                )
                rp_out = rp.select(
                    "prompt_uid",
                    model=pl.lit(model),
                    seed=pl.lit(seed),
                    task=pl.lit(RACE_PREDICTION_TASK),
                    answer=pl.lit(None),
                    parse_error=pl.when(pl.col("answer_label").is_null())
                    .then(pl.lit("no_label"))
                    .otherwise(None),
                    p_affirmative=pl.lit(None),
                    answer_mass=pl.lit(None),
                    answer_label="answer_label",
                ).cast(OUTCOME_SCHEMA)  # type: ignore[arg-type]
                rp_parts.setdefault((model, seed), []).append(rp_out)
    for (model, seed), parts in rp_parts.items():
        path = root / "outcomes" / model / f"seed{seed}" / f"{RACE_PREDICTION_TASK}.parquet"
        write_parquet(pl.concat(parts), path)
        written["outcomes"].append(path)
    return written


# ---------------------------------------------------------------------------------------------
# Population values the analyses should recover


def expected_mean(spec: SimSpec, cue: str, race: str | None) -> float:
    """Population mean outcome (linear, unclipped scale) of prompts of ``cue`` and ``race``,
    averaged over the genders the cue carries."""
    gendered = cue != NO_CUE and CUE_DESIGN[cue][3]
    genders = ("male", "female") if gendered else (NO_CUE,)
    nu = float(np.mean([spec.nu.get(g, 0.0) for g in genders]))
    p_black, p_unknown = spec.label_probs(cue, race)
    p = {"Black": p_black, "Unknown": p_unknown, "White": 1.0 - p_black - p_unknown}
    labels = sum(spec.beta_inferred.get(k, 0.0) * v for k, v in p.items())
    fk = spec.fk_level + spec.fk_shift.get(cue, 0.0)
    return spec.level + spec.shift(cue, race) + nu + spec.beta_fk * fk + labels


def true_ratio(spec: SimSpec, cue: str, focal: str = "Black", reference: str = "White") -> float:
    """Population Black/White mean ratio of a cue; a cue without the reference group is
    compared with the no-cue baseline, as the analysis does."""
    if reference not in CUE_DESIGN[cue][2]:
        return expected_mean(spec, cue, focal) / expected_mean(spec, NO_CUE, None)
    return expected_mean(spec, cue, focal) / expected_mean(spec, cue, reference)


def true_correlation(
    spec: SimSpec, a: tuple[str, str], b: tuple[str, str], n_a: int, n_b: int, n_0: int
) -> float:
    """Population correlation across base prompts of the estimated deviations of two (cue, race)
    series of a ``usd`` task, where ``n_a``, ``n_b``, ``n_0`` are the responses per base prompt
    of each series and of the baseline (the shared baseline noise adds sigma^2 / n_0)."""
    la, lb = spec.loading(*a), spec.loading(*b)
    k = max(la.size, lb.size)
    la, lb = np.pad(la, (0, k - la.size)), np.pad(lb, (0, k - lb.size))
    s2 = spec.sigma**2
    cov = float(la @ lb) + s2 / n_0
    va = float(la @ la) + s2 / n_a + s2 / n_0
    vb = float(lb @ lb) + s2 / n_b + s2 / n_0
    return cov / np.sqrt(va * vb)


def true_race_metrics(spec: SimSpec, cue: str) -> dict[str, float | None]:
    """Population precision/recall of the Black and White classes for one cue, with the
    design's equal number of prompts per race."""
    races = CUE_DESIGN[cue][2]
    pb = {r: spec.label_probs(cue, r)[0] for r in races}
    pw = {r: 1.0 - sum(spec.label_probs(cue, r)) for r in races}
    out: dict[str, float | None] = {}
    for cls, p in (("Black", pb), ("White", pw)):
        if cls not in races:
            out[f"precision_{cls}"] = out[f"recall_{cls}"] = None
            continue
        predicted = sum(p.values())
        out[f"recall_{cls}"] = p[cls]
        out[f"precision_{cls}"] = p[cls] / predicted if predicted > 0 else None
    return out
