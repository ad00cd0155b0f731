"""Errors raised for bad user input: each message names the file, field or request at fault."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

#: The longest message an InputError carries; a longer one (a list of every row of a large
#: file) is cut, saying how long it was.
MAX_MESSAGE_CHARS: Final = 2000


def few(values: Sequence[Any], shown: int = 8) -> str:
    """``values`` for a message: all of them when few, else the first ``shown`` and the count
    ("[1, 2, 3, …] (1250 in all)")."""
    if len(values) <= shown:
        return str(list(values))
    head = ", ".join(map(repr, values[:shown]))
    return f"[{head}, …] ({len(values)} in all)"


class CueauditError(Exception):
    """Base class of cueaudit's own errors."""


class InputError(CueauditError, ValueError):
    """A resource file, table or config value that cannot be used as given.

    The message always names the offending file (or config key) and field.
    """

    def __init__(self, source: str, message: str, field: str | None = None) -> None:
        if len(message) > MAX_MESSAGE_CHARS:
            message = (
                message[:MAX_MESSAGE_CHARS] + f"… (cut: the message is {len(message)} characters)"
            )
        self.source = source
        self.message = message
        self.field = field
        where = f"{source}: field '{field}'" if field else source
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str, str | None]]:
        # a worker process's error must reach the parent: a multiprocessing pool that cannot
        # unpickle it loses its result thread and waits for ever
        return (type(self), (self.source, self.message, self.field))
