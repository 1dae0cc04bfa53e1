"""A content-addressed store of downloaded files: ``<root>/full/<aa>/<sha256><.ext>``.

A body is streamed to a temporary file under ``<root>/tmp`` (:class:`TempFile`, a
:class:`~eclaw.http.types.BodySink`) while its SHA-256 is computed, then fsynced and renamed to its
content address: a file killed mid-way is never under ``full/``, and what a killed run left in
``tmp/`` is removed when the store opens. The same content from two URLs is one file. An index
(``<root>/index.sqlite``) maps each URL to its file and when it was stored, for ``files_expires``;
its URLs pass the crawl's redaction (``redact``), as every record eclaw writes does.

With an :class:`~eclaw.media.remote.Outbox` (``files_store`` a destination URI), ``root`` is the
store's local folder: each placed file is listed in the outbox with its index row in one
transaction, then uploaded to ``{uri}/{relative path}`` and removed locally (:mod:`eclaw.media.remote`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eclaw.media.remote import DeliveryFailed, Outbox

__all__ = ["FileStore", "Stored", "TempFile"]

DAY = 86400.0


@dataclass(frozen=True, slots=True)
class Stored:
    """One file of an item, as the item gets it (``status``: downloaded, uptodate or failed)."""

    url: str
    path: str  # relative to the store's root; "" when failed
    checksum: str  # SHA-256, hex
    size: int
    media_type: str
    status: str
    extra: Mapping[str, Any] = field(default_factory=dict)  # what a pipeline adds: an image's width...

    def as_dict(self) -> dict[str, Any]:
        """The dict an item gets: the fields, then ``extra``'s."""
        own = {"url": self.url, "path": self.path, "checksum": self.checksum, "size": self.size}
        return {**own, "media_type": self.media_type, "status": self.status, **self.extra}


class TempFile:
    """A body on its way into the store: written to a temporary file, hashed as it goes."""

    def __init__(self, tmp: Path) -> None:
        self._tmp = tmp
        self._fd = -1
        self.path = Path()
        self.size = 0
        self._hash = hashlib.sha256()

    async def begin(self) -> None:
        self.discard()
        fd, name = tempfile.mkstemp(dir=self._tmp, suffix=".part")
        self._fd, self.path, self.size, self._hash = fd, Path(name), 0, hashlib.sha256()

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self._hash.update(data)
        self.size += len(data)

    @property
    def started(self) -> bool:
        return self._fd >= 0

    def checksum(self) -> str:
        return self._hash.hexdigest()

    def seal(self) -> None:
        """Make the bytes durable and close the file (once)."""
        if self._fd < 0:
            return
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1

    def adopt(self, path: Path) -> None:
        """Hold the durable file ``path`` (under ``tmp/``) in place of what was written (an image re-saved)."""
        self.discard()
        digest, size = hashlib.sha256(), 0
        with path.open("rb") as file:
            while block := file.read(1 << 20):
                digest.update(block)
                size += len(block)
        self.path, self.size, self._hash = path, size, digest

    def discard(self) -> None:
        """Close and remove the temporary file, if any."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self.path.name:
            self.path.unlink(missing_ok=True)
            self.path = Path()


class FileStore:
    """Files by content under ``root``; ``expires_days``: how long a URL's stored file is up to date;
    ``outbox``: the destination the files go on to (none: they stay under ``root``)."""

    def __init__(
        self,
        root: str | Path,
        expires_days: float = 90.0,
        redact: Callable[[str], str] = lambda url: url,
        outbox: Outbox | None = None,
    ) -> None:
        self.root = Path(root)
        self._redact = redact
        self._expires = expires_days * DAY
        self._outbox = outbox
        self._db: sqlite3.Connection | None = None

    async def open(self) -> None:
        """Create the directories and the index; remove what a killed run left in ``tmp/``; with an
        outbox, check its destination first (ConfigError) and deliver what a past run left."""
        if self._outbox is not None:
            await self._outbox.check()
        for part in ("full", "tmp"):
            (self.root / part).mkdir(parents=True, exist_ok=True)
        for orphan in (self.root / "tmp").iterdir():
            orphan.unlink(missing_ok=True)
        self._db = sqlite3.connect(self.root / "index.sqlite", isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS files (url TEXT PRIMARY KEY, path TEXT, checksum TEXT, size INTEGER,"
            " media_type TEXT, stored_at REAL, extra TEXT)"
        )
        if self._outbox is not None:
            try:
                await self._outbox.open(self._db, self.root)
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def temp(self) -> TempFile:
        """A new body sink writing under ``tmp/``."""
        return TempFile(self.root / "tmp")

    def known(self, url: str) -> Stored | None:
        """``url``'s file when it was stored less than ``expires_days`` ago and is still there
        (delivered, for a remote store: its index is trusted, the destination not asked)."""
        row = self._index().execute(
            "SELECT path, checksum, size, media_type, stored_at, extra FROM files WHERE url = ?", (self._redact(url),)
        ).fetchone()
        if row is None or time.time() - row[4] > self._expires:
            return None
        there = (self.root / row[0]).is_file() if self._outbox is None else not self._outbox.holds(row[0])
        return Stored(url, row[0], row[1], row[2], row[3], "uptodate", json.loads(row[5])) if there else None

    async def commit(
        self, url: str, body: TempFile, media_type: str, extension: str, extra: Mapping[str, Any] | None = None
    ) -> Stored:
        """Move ``body`` to its content address (the same content already there: kept once), index it,
        and deliver it with an outbox (``status`` ``failed`` and a ``reason`` when that fails)."""
        body.seal()
        checksum = body.checksum()
        relative = self._move(body.path, f"full/{checksum[:2]}/{checksum}{extension}")
        body.path = Path()
        extra = dict(extra or {})
        row = (self._redact(url), relative, checksum, body.size, media_type, time.time(), json.dumps(extra))
        with self._transaction() as db:  # the file listed for delivery with its row, or neither
            db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)", row)
            if self._outbox is not None:
                self._outbox.add(relative)
        stored = Stored(url, relative, checksum, body.size, media_type, "downloaded", extra)
        try:
            await self._deliver(relative)
        except DeliveryFailed as exc:
            return Stored(url, relative, checksum, body.size, media_type, "failed", {**extra, "reason": str(exc)})
        return stored

    async def place(self, temp: Path, relative: str) -> str:
        """Rename the durable file ``temp`` to ``relative`` under the root, atomically, and deliver it
        with an outbox; ``relative``.

        Raises:
            DeliveryFailed: the outbox could not deliver it (it stays listed for the next run).
        """
        self._move(temp, relative)
        if self._outbox is not None:
            with self._transaction():
                self._outbox.add(relative)
        await self._deliver(relative)
        return relative

    async def _deliver(self, relative: str) -> None:
        if self._outbox is not None:
            await self._outbox.send(relative)

    def _move(self, temp: Path, relative: str) -> str:
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(temp, target)  # atomic: a content address's bytes replace the same bytes
        _fsync_dir(target.parent)
        return relative

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        db = self._index()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def _index(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("file store is not open")
        return self._db


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
