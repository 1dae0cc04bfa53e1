"""The part of the frontier that does not fit in memory: requests waiting in a SQLite file."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from eclaw.exceptions import NotSerialisable
from eclaw.frontier.serial import dumps, loads
from eclaw.http.urls import url_host

if TYPE_CHECKING:
    from eclaw.http import Request
    from eclaw.spider import Spider

__all__ = ["SpillQueue"]


class SpillQueue:
    """A first-in first-out queue of requests on disk (higher priority first), by host too.

    The file lives in a private temporary directory, removed on ``close``;
    nothing is synced to disk (it is a memory overflow, not a record).
    Requests that cannot be written as JSON stay with the caller. Rows are written
    ``BATCH`` at a time (and before any read), not one transaction per page of links.
    """

    BATCH = 512

    def __init__(self, spider: Spider) -> None:
        self._spider = spider
        self._dir: Path | None = None
        self._db: sqlite3.Connection | None = None
        self._count = 0  # rows in the file, and ...
        self._rows: list[tuple[str, int, str]] = []  # ... rows not written yet: one transaction per batch
        self.spilled = 0  # requests ever written
        self.hosts: Counter[str] = Counter()  # requests waiting on disk, per host

    def __len__(self) -> int:
        return self._count + len(self._rows)

    def _open(self) -> sqlite3.Connection:
        self._dir = Path(tempfile.mkdtemp(prefix="eclaw-frontier-"))
        db = sqlite3.connect(self._dir / "frontier.sqlite", isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=OFF")
            db.execute("PRAGMA synchronous=OFF")
            db.execute(
                "CREATE TABLE queue (id INTEGER PRIMARY KEY, host TEXT NOT NULL, priority INTEGER NOT NULL,"
                " record TEXT NOT NULL)"
            )
            db.execute("CREATE INDEX queue_order ON queue (priority DESC, id)")
            db.execute("CREATE INDEX queue_by_host ON queue (host, priority DESC, id)")
        except BaseException:  # a full disk: the caller gets the error, not an open file ``close`` cannot see
            db.close()
            raise
        return db

    def put(self, requests: Sequence[Request]) -> list[Request]:
        """Queue ``requests`` for the file; returns those that cannot be stored (they stay in memory)."""
        rows, kept = self._rows, []
        for request in requests:
            try:
                host = url_host(request.url)
                rows.append((host, request.priority, dumps(request, self._spider)))
            except NotSerialisable:
                kept.append(request)
                continue
            self.hosts[host] += 1
            self.spilled += 1
        if len(rows) >= self.BATCH:
            self._write()
        return kept

    def _write(self) -> None:
        db = self._db = self._db or self._open()
        db.execute("BEGIN")
        db.executemany("INSERT INTO queue (host, priority, record) VALUES (?, ?, ?)", self._rows)
        db.execute("COMMIT")
        self._count += len(self._rows)
        self._rows = []

    def take(self, limit: int, host: str | None = None) -> list[Request]:
        """Remove and return up to ``limit`` requests in order (only ``host``'s, if given)."""
        if self._rows:
            self._write()
        if not self._count or self._db is None:
            return []
        db = self._db
        if host is None:
            query, args = "SELECT id, host, record FROM queue ORDER BY priority DESC, id LIMIT ?", (limit,)
        else:
            query = "SELECT id, host, record FROM queue WHERE host = ? ORDER BY priority DESC, id LIMIT ?"
            args = (host, limit)  # type: ignore[assignment]
        rows = db.execute(query, args).fetchall()
        db.execute("BEGIN")
        db.executemany("DELETE FROM queue WHERE id = ?", [(row[0],) for row in rows])
        db.execute("COMMIT")
        self._count -= len(rows)
        for _, row_host, _ in rows:
            self.hosts[row_host] -= 1
            if not self.hosts[row_host]:
                del self.hosts[row_host]
        return [loads(record, self._spider) for _, _, record in rows]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        self._count = 0
        self._rows = []
        self.hosts.clear()
