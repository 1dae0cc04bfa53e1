"""The part of the frontier that does not fit in memory: requests waiting in a SQLite file, by host."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from eclaw.exceptions import NotSerialisable
from eclaw.frontier.serial import from_text, to_text

if TYPE_CHECKING:
    from eclaw.http import Request
    from eclaw.spider import Spider

__all__ = ["SpillQueue"]

Row = tuple[int, str, "Request"]  # (sequence number, host, request)


class SpillQueue:
    """Requests on disk, taken back host by host: higher priority first, then by sequence number.

    The caller numbers the requests (their place in the whole frontier's first-in first-out
    order) and keeps, per host, how many wait here and which comes first; the file only needs an
    index by host. It lives in a private temporary directory, removed on ``close``; nothing is
    synced to disk (it is a memory overflow, not a record). Each request is a line of
    :func:`~eclaw.frontier.serial.to_text`; those that cannot be written stay with the caller. Rows
    are written ``BATCH`` at a time (and before a read of a host among them); rows read back are
    deleted ``BATCH`` at a time too, skipped by reads until then.
    """

    BATCH = 512

    def __init__(self, spider: Spider) -> None:
        self._spider = spider
        self._dir: Path | None = None
        self._db: sqlite3.Connection | None = None
        self._count = 0  # rows in the file, and ...
        self._rows: list[tuple[int, str, int, str]] = []  # ... rows not written yet: one transaction per batch
        self._unwritten: set[str] = set()  # hosts with rows not written yet
        self._taken: dict[str, set[int]] = {}  # rows read back, not deleted yet (by host): deleted a batch at a time
        self._taken_count = 0
        self.spilled = 0  # requests ever written
        self.taken = 0  # reads (one per host refilled)

    def __len__(self) -> int:
        return self._count + len(self._rows)

    def _open(self) -> sqlite3.Connection:
        self._dir = Path(tempfile.mkdtemp(prefix="eclaw-frontier-"))
        db = sqlite3.connect(self._dir / "frontier.sqlite", isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=OFF")
            db.execute("PRAGMA synchronous=OFF")
            db.execute(
                "CREATE TABLE queue (seq INTEGER PRIMARY KEY, host TEXT NOT NULL, priority INTEGER NOT NULL,"
                " record TEXT NOT NULL)"
            )
            db.execute("CREATE INDEX queue_by_host ON queue (host, priority DESC, seq)")
        except BaseException:  # a full disk: the caller gets the error, not an open file ``close`` cannot see
            db.close()
            raise
        return db

    def put(self, rows: Sequence[Row]) -> list[Row]:
        """Queue ``rows`` for the file; returns those that cannot be stored (they stay in memory)."""
        pending, unwritten, kept = self._rows, self._unwritten, []
        for row in rows:
            seq, host, request = row
            try:
                pending.append((seq, host, request.priority, to_text(request, self._spider)))
            except NotSerialisable:
                kept.append(row)
            else:
                unwritten.add(host)
        self.spilled += len(rows) - len(kept)
        if len(pending) >= self.BATCH:
            self._write()
        return kept

    def _write(self) -> None:
        db = self._db = self._db or self._open()
        db.execute("BEGIN")
        db.executemany("INSERT INTO queue (seq, host, priority, record) VALUES (?, ?, ?, ?)", self._rows)
        if self._taken:
            db.executemany("DELETE FROM queue WHERE seq = ?", [(seq,) for seqs in self._taken.values() for seq in seqs])
        db.execute("COMMIT")
        self._count += len(self._rows)
        self._rows = []
        self._unwritten.clear()
        self._taken, self._taken_count = {}, 0

    def take(self, host: str, limit: int) -> tuple[list[tuple[int, Request]], tuple[int, int] | None]:
        """Remove and return up to ``limit`` of ``host``'s requests in order, with their sequence numbers,
        and the order key ``(-priority, seq)`` of the first one left (``None``: none left)."""
        if host in self._unwritten or self._taken_count >= self.BATCH:
            self._write()
        if self._db is None:
            return [], None
        query = "SELECT seq, priority, record FROM queue WHERE host = ? ORDER BY priority DESC, seq LIMIT ?"
        taken = self._taken.get(host)
        if taken:
            rows = [row for row in self._db.execute(query, (host, limit + 1 + len(taken))) if row[0] not in taken]
        else:
            rows = self._db.execute(query, (host, limit + 1)).fetchall()
            taken = self._taken[host] = set()
        following = (-rows[limit][1], rows[limit][0]) if len(rows) > limit else None
        rows = rows[:limit]
        taken.update(row[0] for row in rows)
        self._taken_count += len(rows)
        self._count -= len(rows)
        self.taken += 1
        return [(seq, from_text(record, self._spider)) for seq, _, record in rows], following

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        self._count = 0
        self._rows = []
        self._unwritten.clear()
        self._taken, self._taken_count = {}, 0
