"""Per-prompt random streams: the stream of a prompt depends only on (run seed, prompt uid).

Torch-free, so API backends (which pass a per-prompt seed to the server) import no torch.
"""

from __future__ import annotations

import hashlib

import numpy as np


def prompt_seed(seed: int, prompt_uid: str) -> int:
    """64-bit seed of one prompt's random stream, a function of the run seed and its uid."""
    digest = hashlib.sha256(f"cueaudit\x1f{seed}\x1f{prompt_uid}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def prompt_uniforms(seed: int, prompt_uid: str, n: int) -> np.ndarray:
    """The first ``n`` uniforms of a prompt's stream (one per generated token)."""
    return np.random.Generator(np.random.PCG64(prompt_seed(seed, prompt_uid))).random(n)


def native_seed(seed: int, prompt_uid: str) -> int:
    """The 31-bit per-prompt seed a backend with a seed parameter receives (OpenAI, vLLM)."""
    return prompt_seed(seed, prompt_uid) % (2**31 - 1)
