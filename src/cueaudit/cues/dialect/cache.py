"""A persistent translation cache: a sentence is never translated twice by the same set-up.

Keys are (translator, model, prompt-template hash, input text). The store is one SQLite file,
safe for concurrent readers and writers; an entry is written as soon as it is translated, so
an interrupted run keeps what it paid for.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType

_SCHEMA = """
CREATE TABLE IF NOT EXISTS translations (
    key TEXT PRIMARY KEY,
    translator TEXT NOT NULL,
    model TEXT NOT NULL,
    template_hash TEXT NOT NULL,
    source TEXT NOT NULL,
    output TEXT NOT NULL,
    rules TEXT NOT NULL
)
"""


def cache_key(translator: str, model: str, template_hash: str, text: str) -> str:
    payload = json.dumps([translator, model, template_hash, text], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class TranslationCache:
    """``get``/``put`` translations; use as a context manager (or call ``close``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._con = sqlite3.connect(self.path, timeout=60)
        self._con.execute(_SCHEMA)
        self._con.commit()

    def get_many(
        self, translator: str, model: str, template_hash: str, texts: Iterable[str]
    ) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Cached ``{input: (output, rules)}`` for those of ``texts`` already translated."""
        found: dict[str, tuple[str, tuple[str, ...]]] = {}
        for text in dict.fromkeys(texts):
            row = self._con.execute(
                "SELECT output, rules FROM translations WHERE key = ?",
                (cache_key(translator, model, template_hash, text),),
            ).fetchone()
            if row is not None:
                found[text] = (row[0], tuple(json.loads(row[1])))
        return found

    def put_many(
        self,
        translator: str,
        model: str,
        template_hash: str,
        items: Sequence[tuple[str, str, Sequence[str]]],
    ) -> None:
        """Store ``(input, output, rules)`` triples."""
        self._con.executemany(
            "INSERT OR REPLACE INTO translations VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    cache_key(translator, model, template_hash, text),
                    translator,
                    model,
                    template_hash,
                    text,
                    output,
                    json.dumps(list(rules)),
                )
                for text, output, rules in items
            ],
        )
        self._con.commit()

    def __len__(self) -> int:
        return int(self._con.execute("SELECT count(*) FROM translations").fetchone()[0])

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> TranslationCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
