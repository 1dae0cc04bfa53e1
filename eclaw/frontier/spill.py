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
Chunk = tuple[int, str, int, int, str]  # (first sequence number, host, priority, count, lines)


class SpillQueue:
    """Requests on disk, taken back host by host: higher priority first, then by sequence number.

    The caller numbers the requests (their place in the whole frontier's first-in first-out
    order) and keeps, per host, how many wait here and which comes first; the file only needs an
    index by host. It lives in a private temporary directory, removed on ``close``; nothing is
    synced to disk (it is a memory overflow, not a record). Each request is a line of
    :func:`~eclaw.frontier.serial.to_text` after its sequence number; those that cannot be written
    stay with the caller.

    A row is a chunk: the requests of one host and priority that one :meth:`put` spilled (a page's
    links to its own host, say), in order, keyed by the first one's number. No other request of
    that host and priority can fall between two of them (a later put numbers later), so chunks
    never interleave and a host's requests come back in order. A chunk read in part keeps its row;
    how many of its requests are gone is held here, so a host refilled one request at a time costs
    one read a request, not a write too — and, while the rest of the chunks read in part fits in
    ``KEPT`` characters, not even a read: the rest of such a chunk is kept as text (not as requests) and
    the host's next refill starts there. Chunks are written ``BATCH`` requests at a time (and
    before a read of a host among them); chunks read to their end are deleted ``BATCH`` at a time
    too, skipped by reads until then.
    """

    BATCH = 512
    KEPT = 16 << 20  # characters of chunks' rest kept between two refills of their hosts (~130,000 requests)

    def __init__(self, spider: Spider) -> None:
        self._spider = spider
        self._dir: Path | None = None
        self._db: sqlite3.Connection | None = None
        self._count = 0  # requests in the file, and ...
        self._chunks: list[Chunk] = []  # ... chunks not written yet: one transaction per batch
        self._unwritten = 0  # requests in those chunks
        self._hosts: set[str] = set()  # hosts with chunks not written yet
        self._read: dict[int, int] = {}  # chunk -> its requests taken back (in part, or all: not deleted yet)
        self._kept: dict[int, str] = {}  # chunk read in part -> its lines not read yet
        self._kept_chars = 0
        self._done: list[int] = []  # chunks read to their end, deleted at the next write
        self._from: dict[str, tuple[int, int]] = {}  # host -> (priority, seq) of its first chunk not read to its end
        self.spilled = 0  # requests ever written
        self.taken = 0  # reads of the file (one per host refilled) ...
        self.kept = 0  # ... and refills from a chunk's kept text

    def __len__(self) -> int:
        return self._count + self._unwritten

    def _open(self) -> sqlite3.Connection:
        self._dir = Path(tempfile.mkdtemp(prefix="eclaw-frontier-"))
        db = sqlite3.connect(self._dir / "frontier.sqlite", isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=OFF")
            db.execute("PRAGMA synchronous=OFF")
            db.execute(
                "CREATE TABLE queue (seq INTEGER PRIMARY KEY, host TEXT NOT NULL, priority INTEGER NOT NULL,"
                " count INTEGER NOT NULL, records TEXT NOT NULL)"
            )
            db.execute("CREATE INDEX queue_by_host ON queue (host, priority DESC, seq)")
        except BaseException:  # a full disk: the caller gets the error, not an open file ``close`` cannot see
            db.close()
            raise
        return db

    def put(self, rows: Sequence[Row]) -> list[Row]:
        """Queue ``rows`` for the file; returns those that cannot be stored (they stay in memory)."""
        spider, kept = self._spider, []
        chunks: dict[tuple[str, int], tuple[int, list[str]]] = {}
        for row in rows:
            seq, host, request = row
            try:
                line = f"{seq}\t{to_text(request, spider)}"
            except NotSerialisable:
                kept.append(row)
                continue
            chunk = chunks.get((host, request.priority))
            if chunk is None:
                chunks[host, request.priority] = (seq, [line])
            else:
                chunk[1].append(line)
        starts = self._from
        for (host, priority), (first, lines) in chunks.items():
            self._chunks.append((first, host, priority, len(lines), "\n".join(lines)))
            self._hosts.add(host)
            if host in starts and priority > starts[host][0]:  # it comes before where the host's reads start
                del starts[host]
        stored = len(rows) - len(kept)
        self.spilled += stored
        self._unwritten += stored
        if self._unwritten >= self.BATCH:
            self._write()
        return kept

    def _write(self) -> None:
        db = self._db = self._db or self._open()
        db.execute("BEGIN")
        db.executemany("INSERT INTO queue (seq, host, priority, count, records) VALUES (?, ?, ?, ?, ?)", self._chunks)
        if self._done:
            db.executemany("DELETE FROM queue WHERE seq = ?", [(seq,) for seq in self._done])
            for seq in self._done:
                del self._read[seq]
        db.execute("COMMIT")
        self._count += self._unwritten
        self._chunks, self._unwritten, self._done = [], 0, []
        self._hosts.clear()

    def take(self, host: str, limit: int) -> tuple[list[tuple[int, Request]], tuple[int, int] | None]:
        """Remove and return up to ``limit`` of ``host``'s requests in order, with their sequence numbers,
        and the order key ``(-priority, seq)`` of the first one left (``None``: none left)."""
        if host in self._hosts or len(self._done) >= self.BATCH:
            self._write()
        if self._db is None:
            return [], None
        start = self._from.get(host)
        kept = self._kept.get(start[1]) if start is not None else None
        if start is not None and kept is not None:  # the rest of a chunk read in part: no read of the file
            lines, following = self._from_kept(host, start, kept, limit)
        else:
            lines, following = self._from_file(host, start, limit)
        if following is None:
            self._from.pop(host, None)
        self._count -= len(lines)
        spider, split = self._spider, (line.partition("\t") for line in lines)
        return [(int(seq), from_text(text, spider)) for seq, _, text in split], following

    def _from_kept(
        self, host: str, start: tuple[int, int], rest: str, limit: int
    ) -> tuple[list[str], tuple[int, int] | None]:
        """The next ``limit`` lines of the chunk the host's reads start at, from its kept rest; from the
        file when the chunk ends before a line is left after them (what follows is in another row)."""
        priority, seq = start
        lines: list[str] = []
        at = 0
        while len(lines) < limit:
            end = rest.find("\n", at)
            if end < 0:  # its last line: the next row says what follows
                return self._from_file(host, start, limit)
            lines.append(rest[at:end])
            at = end + 1
        self._read[seq] += limit
        self._keep(seq, rest[at:])
        self.kept += 1
        return lines, (-priority, int(rest[at : rest.find("\t", at)]))

    def _from_file(
        self, host: str, start: tuple[int, int] | None, limit: int
    ) -> tuple[list[str], tuple[int, int] | None]:
        """``host``'s next ``limit`` lines read from the file, from its first chunk not read to its end."""
        assert self._db is not None
        lines: list[str] = []
        following = None
        rows = self._db.execute(_ALL, (host,)) if start is None else self._db.execute(_FROM, (host, start[0], *start))
        for seq, priority, count, records in rows:
            read = self._read.get(seq, 0)
            if read == count:  # read to its end: not deleted yet
                continue
            if len(lines) == limit:
                following = (-priority, seq if not read else _seq(records.split("\n", read + 1)[read]))
                self._from[host] = (priority, seq)
                break
            chunk = records.split("\n")[read:]
            wanted = limit - len(lines)
            lines += chunk[:wanted]
            if len(chunk) > wanted:  # the rest stays: the next read starts there
                self._read[seq] = read + wanted
                following = (-priority, _seq(chunk[wanted]))
                self._from[host] = (priority, seq)
                self._keep(seq, "\n".join(chunk[wanted:]))
                break
            self._read[seq] = count
            self._done.append(seq)
            self._forget(seq)
        self.taken += 1
        return lines, following

    def _keep(self, seq: int, rest: str) -> None:
        """Keep the rest of a chunk read in part, while what is kept fits in ``KEPT`` characters."""
        before = self._kept.pop(seq, None)
        size = self._kept_chars - (len(before) if before is not None else 0)
        if size + len(rest) <= self.KEPT:
            self._kept[seq] = rest
            size += len(rest)
        self._kept_chars = size

    def _forget(self, seq: int) -> None:
        kept = self._kept.pop(seq, None)
        if kept is not None:
            self._kept_chars -= len(kept)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        self._count = self._unwritten = 0
        self._chunks, self._done = [], []
        self._hosts.clear()
        self._read.clear()
        self._from.clear()
        self._kept.clear()
        self._kept_chars = 0


_ALL = "SELECT seq, priority, count, records FROM queue WHERE host = ? ORDER BY priority DESC, seq"
# the same, from a chunk on (higher priority first): the chunks read before it are not even looked at
_FROM = (
    "SELECT seq, priority, count, records FROM queue"
    " WHERE host = ? AND (priority < ? OR (priority = ? AND seq >= ?)) ORDER BY priority DESC, seq"
)


def _seq(line: str) -> int:
    """The sequence number a chunk's line starts with."""
    return int(line.partition("\t")[0])
