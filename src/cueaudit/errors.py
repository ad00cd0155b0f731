"""Errors raised for bad user input: each message names the file, field or request at fault."""

from __future__ import annotations


class CueauditError(Exception):
    """Base class of cueaudit's own errors."""


class InputError(CueauditError, ValueError):
    """A resource file, table or config value that cannot be used as given.

    The message always names the offending file (or config key) and field.
    """

    def __init__(self, source: str, message: str, field: str | None = None) -> None:
        self.source = source
        self.message = message
        self.field = field
        where = f"{source}: field '{field}'" if field else source
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str, str | None]]:
        # a worker process's error must reach the parent: a multiprocessing pool that cannot
        # unpickle it loses its result thread and waits for ever
        return (type(self), (self.source, self.message, self.field))
