"""File input and output shared by the library and the workflow scripts: checked readers
(UTF-8 text, JSON Lines, CSV) whose errors name the file and line, atomic writes, path
checks and logging set-up."""

from __future__ import annotations

import csv
import glob
import io
import json
import logging
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, TextIO

import polars as pl

from cueaudit.errors import InputError

#: What a value read from data may look like when it becomes one component of a path.
SAFE_COMPONENT: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}")
SAFE_COMPONENT_RULE: Final = (
    "1 to 128 of letters, digits, '_', '-', '+' and '.', not starting with '.'"
)


def safe_component(value: object, field: str, source: str, line: int | str | None = None) -> str:
    """``value`` as one file-name component, or InputError naming ``source``, ``field`` and
    ``line`` (a line number, or a phrase such as ``"row 3"``): a value read from a file or
    the config never reaches a path unchecked (no separators, no ``..``, no hidden names, no
    control characters)."""
    text = str(value)
    if SAFE_COMPONENT.fullmatch(text) is None:
        where = "" if line is None else f"line {line}: " if isinstance(line, int) else f"{line}: "
        raise InputError(
            source,
            f"{where}{text!r} becomes part of output file names and must be {SAFE_COMPONENT_RULE}",
            field,
        )
    return text


def check_within(path: str | Path, root: str | Path) -> Path:
    """``path`` if it resolves inside the folder ``root``, else InputError naming both.

    The check is lexical (``..`` is resolved, symbolic links are not), so a folder the user
    links to elsewhere on purpose (a shared cache) stays writable.
    """
    resolved, top = Path(os.path.abspath(path)), Path(os.path.abspath(root))
    if not resolved.is_relative_to(top):
        raise InputError(
            str(path), f"output path resolves to {resolved}, outside its output folder {top}"
        )
    return Path(path)


def read_bytes_checked(path: str | Path) -> str:
    """File text (UTF-8), or InputError naming the file for missing, empty or bad encoding."""
    path = Path(path)
    if not path.is_file():
        raise InputError(str(path), "file not found")
    raw = path.read_bytes()
    if not raw.strip():
        raise InputError(str(path), "file is empty")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(str(path), f"not valid UTF-8 at line {line} (byte {exc.start})") from None


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` of a JSON Lines file; each line must be a JSON object."""
    src = str(path)
    for number, line in enumerate(read_bytes_checked(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(src, f"line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise InputError(src, f"line {number}: expected a JSON object")
        yield number, record


def read_csv_records(path: str | Path, required: Sequence[str]) -> list[tuple[int, dict[str, str]]]:
    """Read a UTF-8 CSV file as ``(line number, row)`` pairs with whitespace-stripped values.

    Raises InputError, naming the file (and field or line), when the file is missing or empty,
    is not UTF-8, is not well-formed CSV, lacks a required column or has no data rows.
    """
    src = str(path)
    reader = csv.reader(io.StringIO(read_bytes_checked(path), newline=""))
    try:
        header = [col.strip() for col in next(reader)]
        missing = [col for col in required if col not in header]
        if missing:
            raise InputError(src, f"required column missing (header is {header})", field=missing[0])
        dupes = sorted({col for col in header if header.count(col) > 1})
        if dupes:
            raise InputError(src, "column appears more than once in the header", field=dupes[0])
        records: list[tuple[int, dict[str, str]]] = []
        start = reader.line_num + 1  # a record's first line (a quoted field may span lines)
        for row in reader:
            line, start = start, reader.line_num + 1
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise InputError(
                    src,
                    f"line {line}: {len(row)} fields, header has {len(header)}",
                )
            records.append(
                (
                    line,
                    {col: cell.strip() for col, cell in zip(header, row, strict=True)},
                )
            )
    except csv.Error as exc:
        raise InputError(src, f"malformed CSV at line {reader.line_num}: {exc}") from None
    if not records:
        raise InputError(src, "no data rows below the header")
    return records


def _host_tag() -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", socket.gethostname()) or "host"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


#: A temporary file of another host is stale after this long (its writer's pid is not ours
#: to check).
STALE_FOREIGN_TEMP_S: Final = 24 * 3600


def remove_stale_temps(target: Path) -> list[Path]:
    """Remove temporary files of earlier atomic writes of ``target`` whose writer is gone
    (killed before it could clean up): those of this host whose process no longer runs, and
    those of other hosts (or of the old naming) older than a day."""
    pattern = re.compile(
        rf"\.{re.escape(target.name)}\.(?:(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)-)?[a-z0-9_]+\.tmp"
    )
    if not target.parent.is_dir():
        return []
    removed: list[Path] = []
    host, now = _host_tag(), time.time()
    for leftover in target.parent.glob(f".{glob.escape(target.name)}.*.tmp"):
        match = pattern.fullmatch(leftover.name)
        if match is None:
            continue
        try:
            if match["pid"] is not None and match["host"] == host:
                stale = not _pid_alive(int(match["pid"]))
            else:
                stale = now - leftover.lstat().st_mtime > STALE_FOREIGN_TEMP_S
            if not stale:
                continue
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()
        except FileNotFoundError:  # another writer's clean-up got there first
            continue
        removed.append(leftover)
    return removed


@contextmanager
def atomic_path(path: str | Path, root: str | Path | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; it replaces ``path`` only if the block succeeds.

    A failed or killed job therefore never leaves a partial output under its final name; the
    temporary file of a killed one is removed by the next write of the same path. With
    ``root``, a path that resolves outside that folder is refused before anything is written.
    """
    target = Path(path)
    if root is not None:
        check_within(target, root)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target)
    fd, tmp_name = tempfile.mkstemp(
        prefix=f".{target.name}.{_host_tag()}-{os.getpid()}-", suffix=".tmp", dir=target.parent
    )
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


@contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """A staging folder ``<path>.partial`` that replaces ``path`` when the block succeeds and
    is removed when it fails (and, after a killed attempt, when the next one starts), so a
    failure never leaves a partial folder under the final name."""
    out = Path(path)
    stage = out.with_name(out.name + ".partial")
    shutil.rmtree(stage, ignore_errors=True)  # left by a killed earlier attempt
    stage.mkdir(parents=True)
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    shutil.rmtree(out, ignore_errors=True)
    stage.rename(out)


def write_atomic(
    path: str | Path, write: Callable[[Path], object], root: str | Path | None = None
) -> None:
    with atomic_path(path, root) as tmp:
        write(tmp)


def write_parquet(
    frame: pl.DataFrame,
    path: str | Path,
    root: str | Path | None = None,
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write ``frame`` atomically, with ``metadata`` as the file's key-value metadata."""
    meta = dict(metadata) if metadata else None
    write_atomic(
        path, lambda tmp: frame.write_parquet(tmp, compression="zstd", metadata=meta), root
    )


def write_csv(frame: pl.DataFrame, path: str | Path, root: str | Path | None = None) -> None:
    write_atomic(path, frame.write_csv, root)


def write_text(text: str, path: str | Path, root: str | Path | None = None) -> None:
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), root)


#: The logger whose records a workflow script also shows on the console: inference's progress
#: and retries (a long job is not silent; a failing endpoint is seen as it fails).
CONSOLE_LOGGER: Final = "cueaudit.inference"


def setup_logging(
    log_path: str | Path | None = None,
    level: int = logging.INFO,
    console: str | None = CONSOLE_LOGGER,
) -> logging.Logger:
    """Send log records (and uncaught errors) of a workflow script to its rule's log file.

    The records of logger ``console`` go to the console as well: the script's own stderr
    (Snakemake's console; a Slurm job's output file). An uncaught error reaches the console as
    its message (``Error: <message>``), its traceback only the log file.
    """
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if console is not None and log_path is not None:
        _echo_to_console(console, sys.stderr, level)
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


def _echo_to_console(name: str, stream: TextIO, level: int) -> None:
    echo = logging.StreamHandler(stream)
    echo.setLevel(level)
    echo.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger(name)
    logger.handlers = [h for h in logger.handlers if not getattr(h, "cueaudit_console", False)]
    echo.cueaudit_console = True  # type: ignore[attr-defined]
    logger.addHandler(echo)
    previous = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, trace: Any) -> None:
        print(f"Error: {error or kind.__name__}", file=stream, flush=True)
        previous(kind, error, trace)

    sys.excepthook = hook
