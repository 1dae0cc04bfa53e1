"""The payload digests of earlier archives, so that a recrawl writes an unchanged page as a
``revisit`` record referring to the response that holds its bytes.

One SQLite file beside the archives (``warc-digests.sqlite`` in the archive's folder) keeps, for
each spider and run key, each page's URL and payload digest with the record that first held it
and where (file, offset); and which pages each archive holds, where. It follows the archive's
exactly-once: what the index learns after a checkpoint is forgotten when the archive is cut back
to it (:meth:`DigestIndex.cut`), and an archive written anew forgets what its old self held.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from eclaw.archive.records import Original

__all__ = ["INDEX_NAME", "DigestIndex"]

INDEX_NAME = "warc-digests.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS digests (
    spider TEXT NOT NULL, run_key TEXT NOT NULL, url TEXT NOT NULL, digest TEXT NOT NULL,
    record_id TEXT NOT NULL, date TEXT NOT NULL, file TEXT NOT NULL, offset INTEGER NOT NULL,
    PRIMARY KEY (spider, run_key, url, digest)
);
CREATE INDEX IF NOT EXISTS digests_file ON digests (file, offset);
CREATE TABLE IF NOT EXISTS pages (file TEXT NOT NULL, url TEXT NOT NULL, offset INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS pages_file ON pages (file, url, offset);
"""


class DigestIndex:
    """The digests of one spider and run key's archived pages, in ``path``."""

    def __init__(self, path: Path, spider: str, run_key: str) -> None:
        self.path = path
        self._key = (spider, run_key)
        self._db = sqlite3.connect(path, timeout=30, isolation_level="DEFERRED")
        self._db.executescript(_SCHEMA)
        self._db.commit()

    def __repr__(self) -> str:
        return f"DigestIndex({str(self.path)!r})"

    def find(self, url: str, digest: str) -> Original | None:
        """The record that first held ``url`` with this payload, if an archive still holds it."""
        row = self._db.execute(
            "SELECT record_id, url, date FROM digests WHERE spider=? AND run_key=? AND url=? AND digest=?",
            (*self._key, url, digest),
        ).fetchone()
        return Original(record_id=row[0], uri=row[1], date=row[2]) if row else None

    def add(self, url: str, digest: str, original: Original, file: Path, offset: int) -> None:
        """``url``'s payload ``digest`` is held by ``original``, at ``offset`` of ``file``."""
        self._db.execute(
            "INSERT OR IGNORE INTO digests VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (*self._key, url, digest, original.record_id, original.date, str(file), offset),
        )

    def archived(self, file: Path, url: str, offset: int) -> None:
        """``file`` holds a record of the page ``url`` at ``offset``."""
        self._db.execute("INSERT INTO pages VALUES (?, ?, ?)", (str(file), url, offset))

    def holds(self, file: Path, url: str, before: int) -> bool:
        """Whether ``file`` holds a record of the page ``url`` before ``offset``."""
        found = self._db.execute(
            "SELECT 1 FROM pages WHERE file=? AND url=? AND offset<? LIMIT 1", (str(file), url, before)
        ).fetchone()
        return found is not None

    def cut(self, file: Path, offset: int) -> None:
        """Forget the records of ``file`` from ``offset`` on (cut off, or the file begun anew)."""
        for table in ("digests", "pages"):
            self._db.execute(f"DELETE FROM {table} WHERE file=? AND offset>=?", (str(file), offset))
        self._db.commit()

    def commit(self) -> None:
        self._db.commit()

    def close(self) -> None:
        self._db.commit()
        self._db.close()
