"""What every study's figures share: matplotlib's object API on the Agg canvas (no pyplot
state, no display), one resolution, atomic PNG / PDF writing, and a titled placeholder for a
figure without data."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from cueaudit.errors import InputError
from cueaudit.io import atomic_path

logger = logging.getLogger(__name__)

DPI: Final = 150


def new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, path: str | Path) -> None:
    """Write PNG at ``path``; for a ``.pdf`` path write the PDF and a PNG next to it."""
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix not in (".png", ".pdf"):
        raise InputError(str(out), "figure path must end in .png or .pdf")
    out.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".pdf":
        with atomic_path(out) as tmp:
            fig.savefig(tmp, format="pdf")
        out = out.with_suffix(".png")
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI)


def empty_figure(path: str | Path, title: str, message: str) -> None:
    """A figure that says why it has no data (logged as a warning)."""
    logger.warning("%s: %s (%s)", title, message, path)
    fig = new_figure(6.0, 3.0)
    fig.suptitle(title)
    fig.text(0.5, 0.5, message, ha="center", va="center", wrap=True, fontsize=11)
    save_figure(fig, path)
