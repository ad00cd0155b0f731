"""The aid-domain replication: cueaudit's contrasts on FairFund-Bench's own stimuli beside the
published ones (``resources/decision/fairfund_published.yaml``: each value with its source).

For every arm with aid rows and every published (format, contrast), the contrast is fitted as
the planned family's are (:func:`~cueaudit.decision.analysis.contrasts.fit_cell`, the lmm; rank
on the ``disguised_demographic`` bundles, FairFund's ``race_disguised``), with its t interval
at the pre-registration's alpha. Rate is in rating points, rank in positions with the sign
flipped so that a positive contrast is favourable (cueaudit's points = 5 - rank, and
FairFund's own scoring), so the two stand side by side in the same unit. The table says
whether the direction agrees (:func:`direction_agrees`) and whether the published value lies
in the interval (:func:`published_in_interval`). Both are descriptive: the replication is an
extension, outside the pre-registered family.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import polars as pl

from cueaudit.decision.analysis.contrasts import CONTRASTS_SCHEMA, fit_cell
from cueaudit.decision.analysis.design_matrix import RANK_BUNDLE_TYPES, default_contrasts
from cueaudit.decision.analysis.fitters import FAMILY_ESTIMATOR
from cueaudit.decision.analysis.frames import AnalysisFrames
from cueaudit.decision.analysis.verdicts import estimate_fields
from cueaudit.decision.formats import AID_DOMAIN, read_yaml
from cueaudit.errors import InputError

PUBLISHED_VALUES: Final = "resources/decision/fairfund_published.yaml"
REPLICATION_FORMATS: Final = ("rate", "rank")

_FIT_COLUMNS: Final = ("estimator", "unit", "estimate", "se", "df", "ci_low", "ci_high")
REPLICATION_SCHEMA: Final[Mapping[str, pl.DataType]] = {
    "arm": pl.String(),
    **{c: CONTRASTS_SCHEMA[c] for c in ("domain", "format", "contrast", *_FIT_COLUMNS)},
    "ci_level": pl.Float64(),
    "p_value": pl.Float64(),
    "n_obs": pl.Int64(),
    "published": pl.Float64(),
    "direction_agrees": pl.Boolean(),
    "published_in_ci": pl.Boolean(),
    "replicated_by_paper": pl.Float64(),
    "note": pl.String(),
    "source": pl.String(),
}


@dataclass(frozen=True)
class PublishedContrast:
    """A published aid contrast: its format and name, FairFund's value, the value the 002
    paper's own replication found (None when it reports none) and where both are stated."""

    format: str
    contrast: str
    published: float
    replicated_by_paper: float | None
    source: str


def load_published(path: str | Path = PUBLISHED_VALUES) -> tuple[PublishedContrast, ...]:
    """The published contrasts of a published-values file; InputError naming the file and key
    for bad YAML, a missing or non-numeric value, an unknown format or contrast."""
    src = str(path)
    raw = read_yaml(path)
    if not isinstance(raw, Mapping) or not isinstance(raw.get("contrasts"), list):
        raise InputError(src, "expected a mapping with a list of contrasts", "contrasts")
    known = {c.contrast for c in default_contrasts()}
    out = []
    for i, entry in enumerate(raw["contrasts"]):
        key = f"contrasts[{i}]"
        if not isinstance(entry, Mapping):
            raise InputError(src, "expected a mapping", key)
        fmt, contrast = entry.get("format"), entry.get("contrast")
        if fmt not in REPLICATION_FORMATS:
            raise InputError(
                src, f"{fmt!r} is not one of {list(REPLICATION_FORMATS)}", f"{key}.format"
            )
        if contrast not in known:
            raise InputError(src, f"{contrast!r} is not one of {sorted(known)}", f"{key}.contrast")
        source = entry.get("source")
        if not isinstance(source, str) or not source.strip():
            raise InputError(src, "every published value names its source", f"{key}.source")
        out.append(
            PublishedContrast(
                fmt,
                contrast,
                _number(entry, "published", src, key),
                _number(entry, "replicated_by_paper", src, key, optional=True),
                " ".join(source.split()),
            )
        )
    pairs = [(c.format, c.contrast) for c in out]
    if len(set(pairs)) < len(pairs):
        raise InputError(src, "a (format, contrast) is listed twice", "contrasts")
    return tuple(out)


def _number(
    entry: Mapping[str, Any], name: str, src: str, key: str, *, optional: bool = False
) -> Any:
    value = entry.get(name)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise InputError(src, f"expected a number, got {value!r}", f"{key}.{name}")
    return float(value)


def direction_agrees(estimate: float, published: float) -> bool | None:
    """Whether an estimate has the published value's sign; None when either is zero or not
    finite (no direction to compare)."""
    if not (np.isfinite(estimate) and np.isfinite(published)) or estimate == 0 or published == 0:
        return None
    return bool(np.sign(estimate) == np.sign(published))


def published_in_interval(low: float, high: float, published: float) -> bool | None:
    """Whether the published value lies in ``[low, high]``; None without a finite interval."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return None
    return bool(low <= published <= high)


def aid_arms(frames: AnalysisFrames) -> list[str]:
    """The arms with aid-domain judgements or rankings."""
    arms: set[str] = set()
    for frame in (frames.judgements, frames.rankings):
        arms |= set(frame.filter(pl.col("domain") == AID_DOMAIN)["arm"].to_list())
    return sorted(arms)


def aid_replication(
    frames: AnalysisFrames,
    published: Sequence[PublishedContrast],
    *,
    alpha: float = 0.05,
    bundle_types: Sequence[str] = RANK_BUNDLE_TYPES,
) -> pl.DataFrame:
    """The replication table (:data:`REPLICATION_SCHEMA`): one row per arm with aid rows and
    published contrast, by the family's estimator; empty when no arm ran the aid domain."""
    specs = {c.contrast: c for c in default_contrasts()}
    records = []
    for arm in aid_arms(frames):
        data = frames.arm(arm)
        for fmt in REPLICATION_FORMATS:
            wanted = [p for p in published if p.format == fmt]
            if not wanted:
                continue
            fit = fit_cell(
                data,
                AID_DOMAIN,
                fmt,
                [specs[p.contrast] for p in wanted],
                estimator=FAMILY_ESTIMATOR,
                bundle_types=bundle_types,
            )
            for p in wanted:
                row = estimate_fields(fit, fit.estimates[p.contrast], alpha)
                low, high = float(row["ci_low"]), float(row["ci_high"])  # type: ignore[arg-type]
                records.append(
                    row
                    | {
                        "arm": arm,
                        "domain": AID_DOMAIN,
                        "format": fmt,
                        "contrast": p.contrast,
                        "ci_level": 1 - alpha,
                        "published": p.published,
                        "direction_agrees": direction_agrees(
                            float(row["estimate"]),  # type: ignore[arg-type]
                            p.published,
                        ),
                        "published_in_ci": published_in_interval(low, high, p.published),
                        "replicated_by_paper": p.replicated_by_paper,
                        "source": p.source,
                    }
                )
    return pl.DataFrame(records, schema=dict(REPLICATION_SCHEMA))
