"""A content-addressed store of downloaded files: ``<root>/full/<aa>/<sha256><.ext>``.

A body is streamed to a temporary file under ``<root>/tmp`` (:class:`TempFile`, a
:class:`~eclaw.http.types.BodySink`) while its SHA-256 is computed, then fsynced and renamed to its
content address: a file killed mid-way is never under ``full/``, and what a killed run left in
``tmp/`` is removed when the store opens. The same content from two URLs is one file. An index
(``<root>/index.sqlite``) maps each URL to its file and when it was stored, for ``files_expires``;
its URLs pass the crawl's redaction (``redact``), as every record eclaw writes does.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    """Files by content under ``root``; ``expires_days``: how long a URL's stored file is up to date."""

    def __init__(
        self, root: str | Path, expires_days: float = 90.0, redact: Callable[[str], str] = lambda url: url
    ) -> None:
        self.root = Path(root)
        self._redact = redact
        self._expires = expires_days * DAY
        self._db: sqlite3.Connection | None = None

    def open(self) -> None:
        """Create the directories and the index; remove what a killed run left in ``tmp/``."""
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

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def temp(self) -> TempFile:
        """A new body sink writing under ``tmp/``."""
        return TempFile(self.root / "tmp")

    def known(self, url: str) -> Stored | None:
        """``url``'s file when it was stored less than ``expires_days`` ago and is still there."""
        row = self._index().execute(
            "SELECT path, checksum, size, media_type, stored_at, extra FROM files WHERE url = ?", (self._redact(url),)
        ).fetchone()
        if row is None or time.time() - row[4] > self._expires or not (self.root / row[0]).is_file():
            return None
        return Stored(url, row[0], row[1], row[2], row[3], "uptodate", json.loads(row[5]))

    def commit(
        self, url: str, body: TempFile, media_type: str, extension: str, extra: Mapping[str, Any] | None = None
    ) -> Stored:
        """Move ``body`` to its content address (the same content already there: kept once) and index it."""
        body.seal()
        checksum = body.checksum()
        relative = self.place(body.path, f"full/{checksum[:2]}/{checksum}{extension}")
        body.path = Path()
        extra = dict(extra or {})
        self._index().execute(
            "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)",
            (self._redact(url), relative, checksum, body.size, media_type, time.time(), json.dumps(extra)),
        )
        return Stored(url, relative, checksum, body.size, media_type, "downloaded", extra)

    def place(self, temp: Path, relative: str) -> str:
        """Rename the durable file ``temp`` to ``relative`` under the root, atomically; ``relative``."""
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(temp, target)  # atomic: a content address's bytes replace the same bytes
        _fsync_dir(target.parent)
        return relative

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
