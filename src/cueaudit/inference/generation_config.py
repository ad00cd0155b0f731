"""A local model's own sampling parameters: its generation config, read as transformers reads it.

The HF and vLLM backends sample with the config's ``decoding`` block over these values
(cueaudit.inference.core.Decoding.from_config); ``prepare_model`` records them in the model's
manifest once.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from cueaudit.errors import InputError

log = logging.getLogger(__name__)


def offline_hub() -> None:
    """Never reach the model hub at run time."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


#: Neutral values of the sampling parameters transformers applies when neither the model nor
#: the caller sets them (``GenerationConfig._get_default_generation_params`` in transformers 5;
#: the attribute defaults of ``GenerationConfig`` before it). Used only when that is missing.
FRAMEWORK_DEFAULTS: dict[str, Any] = {
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 50,
    "min_p": None,
    "repetition_penalty": 1.0,
}
#: Sampling settings of a generation config that no backend here applies, with their neutral
#: values: a model setting one of them otherwise is sampled without it (logged, recorded).
NOT_APPLIED: dict[str, Any] = {
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "top_h": None,
    "no_repeat_ngram_size": 0,
    "encoder_repetition_penalty": 1.0,
}
_RANGES = {  # key: (lowest, highest, lowest allowed?)
    "temperature": (0.0, None, False),
    "top_p": (0.0, 1.0, False),
    "top_k": (0, None, True),
    "min_p": (0.0, 1.0, True),
    "repetition_penalty": (0.0, None, False),
}


def generation_defaults(path: str | Path, shown: str | None = None) -> dict[str, Any]:
    """The sampling parameters a model samples with under transformers when the caller sets
    none: its generation config (``generation_config.json`` of the folder or hub snapshot, else
    the one transformers derives from ``config.json``), unset values filled with the framework
    defaults, exactly as ``generate`` resolves them.

    Returns ``{"source": where they came from, "sampling": {key: value} for
    cueaudit.inference.core.SAMPLING_KEYS (None: not applied), "not_applied": {key: value}}``.
    ``do_sample`` is not read: the studies always sample, at the configured temperature.
    ``shown`` names the folder in ``source`` and in errors (default: ``path``).
    """
    from transformers import AutoConfig, GenerationConfig

    offline_hub()
    where, name = str(path), shown or str(path)
    try:
        config = GenerationConfig.from_pretrained(where)
        source = f"{name}/generation_config.json"
    except (OSError, ValueError) as error:
        if isinstance(error, ValueError) or (Path(where) / "generation_config.json").is_file():
            # there, but unreadable (not JSON) or refused by transformers
            message = f"cannot read the model's generation config ({error})"
            raise InputError(f"{name}/generation_config.json", message) from error
        try:
            config = GenerationConfig.from_model_config(AutoConfig.from_pretrained(where))
            source = f"{name}/config.json (no generation_config.json)"
        except (OSError, ValueError) as error:
            message = f"cannot read the model's generation config ({error})"
            raise InputError(name, message) from error
    global_defaults = getattr(GenerationConfig, "_get_default_generation_params", None)
    framework = global_defaults() if global_defaults is not None else FRAMEWORK_DEFAULTS
    sampling: dict[str, Any] = {}
    for key in FRAMEWORK_DEFAULTS:
        value = getattr(config, key, None)
        sampling[key] = value if value is not None else framework.get(key)
        _check_range(key, sampling[key], source)
    not_applied = {
        key: getattr(config, key)
        for key, neutral in NOT_APPLIED.items()
        if getattr(config, key, None) not in (None, neutral)
    }
    if not_applied:
        log.warning("%s sets %s, which cueaudit's samplers do not apply", source, not_applied)
    return {"source": source, "sampling": sampling, "not_applied": not_applied}


def _check_range(key: str, value: Any, source: str) -> None:
    if value is None:
        return
    low, high, closed = _RANGES[key]
    if (value < low if closed else value <= low) or (high is not None and value > high):
        bound = f"{'>=' if closed else '>'} {low}" + (f" and <= {high}" if high is not None else "")
        raise InputError(source, f"{key} is {value!r}; it must be {bound}", key)
