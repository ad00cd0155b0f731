"""Atomic file output and logging set-up shared by the workflow scripts."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; it replaces ``path`` only if the block succeeds.

    A failed or killed job therefore never leaves a partial output under its final name.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        # mkstemp creates the file private; give it the permissions of a normal new file.
        umask = os.umask(0)
        os.umask(umask)
        if tmp.is_file():
            tmp.chmod(0o666 & ~umask)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: str | Path, write: Callable[[Path], object]) -> None:
    with atomic_path(path) as tmp:
        write(tmp)


def write_parquet(frame: pl.DataFrame, path: str | Path) -> None:
    write_atomic(path, lambda tmp: frame.write_parquet(tmp, compression="zstd"))


def write_csv(frame: pl.DataFrame, path: str | Path) -> None:
    write_atomic(path, frame.write_csv)


def write_text(text: str, path: str | Path) -> None:
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def setup_logging(log_path: str | Path | None = None, level: int = logging.INFO) -> logging.Logger:
    """Send log records (and uncaught errors) of a workflow script to its rule's log file."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        stream = open(log_path, "w", buffering=1, encoding="utf-8")  # noqa: SIM115
        sys.stderr = stream
        handlers = [logging.StreamHandler(stream)]
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )
    return logging.getLogger("cueaudit")
