"""Saved crawl state (``--state DIR``): resume after a pause or a crash, losing and duplicating nothing.

One SQLite file in WAL mode per state directory::

    meta(key, value)       format, spider, status, stats, start_done, outputs, next_id, dupefilter, marks
    requests(id, record)   every request accepted and not yet finished: queued, in flight, waiting to retry

and the dupe filter in a file of its own (``dupefilter-N.bin``, named in ``meta``).

A checkpoint is one transaction holding the requests accepted (or changed) since
the previous one, as lines of text (:func:`eclaw.frontier.serial.to_text`: no
pickle, callbacks by name), the ids of those finished since, the dupe filter, the stats and the
committed length of every output. The crawl takes it at a barrier (no callback
running, no item in the pipelines), so the outputs hold exactly the items of
the finished requests: a resumed crawl cuts its outputs back to those lengths
and fetches again whatever was queued or in flight.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import sqlite3
import struct
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from eclaw.contracts import Resumable
from eclaw.exceptions import ConfigError, NotSerialisable
from eclaw.frontier.serial import from_text, to_text
from eclaw.storage.sqlite import SqliteWriter

if TYPE_CHECKING:
    from eclaw.http import Request
    from eclaw.spider import Spider

__all__ = ["CrawlState", "Saved", "restore_outputs", "save_outputs"]

logger = logging.getLogger(__name__)

FORMAT = "1"
# secure_delete: a finished request's row (its headers, cookies) is overwritten, not left in a free page.
_SCHEMA = """
PRAGMA secure_delete = ON;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requests (id INTEGER PRIMARY KEY, record TEXT NOT NULL);
"""


@dataclass
class Saved:
    """What a crawl starts from: ``status`` is ``"new"``, ``"running"`` (it was
    killed), ``"paused"`` or ``"finished"``."""

    status: str
    stats: dict[str, Any] = field(default_factory=dict)
    start_done: bool = False
    outputs: dict[str, Any] = field(default_factory=dict)
    dupefilter: Path | None = None
    pending: int = 0


@dataclass
class _Snapshot:
    rows: list[tuple[int, str]]
    done: list[int]
    meta: dict[str, str]
    files: list[str]
    obsolete: Path | None


class CrawlState:
    """The saved state of one spider's crawl in ``directory``.

    The crawl tells it which requests it accepted (:meth:`accepted`), which
    changed (a retry: :meth:`accepted` again) and which finished
    (:meth:`done`); :meth:`due` says when to checkpoint, which the crawl does
    with :meth:`snapshot` (at its barrier) and :meth:`save` (in a writer thread).
    """

    def __init__(
        self,
        directory: str | Path,
        spider: Spider,
        *,
        interval: float = 5.0,
        max_new: int = 20_000,
    ) -> None:
        self.directory = Path(directory)
        self.path = self.directory / "state.sqlite"
        self._spider = spider
        self._interval = interval
        self._max_new = max_new
        self._writer = SqliteWriter("eclaw-state")
        self._lock: int | None = None
        self._next_id = 1
        self._dirty: dict[int, Request] = {}
        self._done: set[int] = set()
        self._due = False
        self._timer: asyncio.TimerHandle | None = None
        self._wake: Callable[[], None] = lambda: None
        self._saving: asyncio.Task[None] | None = None
        self._checkpoints = 0
        self._dupefilter: Path | None = None  # the file the last checkpoint names
        self._marks: dict[int, str] = {}  # request id -> the page its redirect made seen, until the request ends
        self.unsaved = 0  # requests that could not be written (a lambda callback, an object in meta)

    def __repr__(self) -> str:
        return f"CrawlState({str(self.directory)!r})"

    # -- opening --------------------------------------------------------------------

    async def open(self, wake: Callable[[], None]) -> Saved:
        """Lock the directory and read what was saved; a clear :class:`ConfigError` if it cannot be used."""
        self._wake = wake
        if self.directory.exists() and not self.directory.is_dir():
            raise ConfigError(f"state dir {self.directory} is a file, not a directory")
        try:
            # Pending requests keep what they need to be sent again (credentials too): owner only.
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._lock = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise ConfigError(f"cannot use state dir {self.directory}: {exc.strerror}") from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock)
            self._lock = None
            raise ConfigError(f"state dir {self.directory} is in use by another running crawl") from None
        try:
            saved = await self._read()
        except BaseException:
            await self.close()
            raise
        self._arm()
        return saved

    async def _read(self) -> Saved:
        try:
            _owner_only(self.path)  # sqlite gives its -wal and -shm files the database's mode
            await self._writer.start(self.path, _SCHEMA)
            meta, pending = await self._writer.run(self._read_rows)
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(str(exc)) from None
        if not meta:
            await self._writer.run(self._write_meta, {"format": FORMAT, "spider": self._spider.name, "status": "new"})
            return Saved("new")
        if meta.get("format") != FORMAT or "spider" not in meta or "status" not in meta:
            raise self._corrupt(f"unknown format {meta.get('format')!r}")
        if meta["spider"] != self._spider.name:
            raise ConfigError(
                f"state dir {self.directory} holds a crawl of spider {meta['spider']!r}, not {self._spider.name!r}:"
                " give each spider its own --state directory"
            )
        try:
            self._next_id = int(meta.get("next_id", "1"))
            self._checkpoints = int(meta.get("checkpoint", "0"))
            self._marks = {int(key): value for key, value in json.loads(meta.get("marks", "{}")).items()}
            if "dupefilter" in meta:
                self._dupefilter = self.directory / meta["dupefilter"]
                if not self._dupefilter.is_file():
                    raise ValueError(f"{meta['dupefilter']} is missing")
            for stale in self.directory.glob("dupefilter-*.bin"):  # written by a checkpoint never committed
                if stale != self._dupefilter:
                    stale.unlink()
            return Saved(
                meta["status"],
                stats=json.loads(meta.get("stats", "{}")),
                start_done=meta.get("start_done") == "1",
                outputs=json.loads(meta.get("outputs", "{}")),
                dupefilter=self._dupefilter,
                pending=pending,
            )
        except ValueError as exc:
            raise self._corrupt(str(exc)) from None

    def _corrupt(self, detail: str) -> ConfigError:
        return ConfigError(f"state dir {self.directory} is corrupt ({detail}); remove it to start the crawl over")

    def _read_rows(self) -> tuple[dict[str, str], int]:
        db = self._writer.db
        assert db is not None
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        return meta, db.execute("SELECT count(*) FROM requests").fetchone()[0]

    def load_dupefilter(self, load: Callable[[BinaryIO], None]) -> None:
        """Fill the dupe filter from the saved one (``load`` is the filter's own)."""
        if self._dupefilter is None:
            return
        try:
            with self._dupefilter.open("rb") as file:
                load(file)
        except (OSError, ValueError, struct.error) as exc:
            raise self._corrupt(f"{self._dupefilter.name}: {exc}") from None

    def _write_meta(self, meta: dict[str, str]) -> None:
        db = self._writer.db
        assert db is not None
        with db:
            db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", meta.items())

    async def pending_requests(self, batch: int = 5000) -> AsyncIterator[list[Request]]:
        """The requests saved as not finished, oldest first, in batches."""
        last = 0
        while True:
            rows = await self._writer.run(self._page, last, batch)
            if not rows:
                return
            requests = []
            for row_id, record in rows:
                try:
                    request = from_text(record, self._spider)
                except (ValueError, KeyError, TypeError) as exc:
                    raise self._corrupt(f"request {row_id}: {exc}") from None
                request._id = row_id
                requests.append(request)
            last = rows[-1][0]
            yield requests

    def _page(self, after: int, limit: int) -> list[tuple[int, str]]:
        db = self._writer.db
        assert db is not None
        return db.execute("SELECT id, record FROM requests WHERE id > ? ORDER BY id LIMIT ?", (after, limit)).fetchall()

    # -- what the crawl reports -----------------------------------------------------

    def assign(self, requests: Iterable[Request]) -> None:
        """Give new requests their ids (before the frontier may write them to its spill file)."""
        for request in requests:
            if not request._id:
                request._id = self._next_id
                self._next_id += 1

    def admitted(self, requests: Sequence[Request], reasons: Sequence[str | None], *, again: bool) -> None:
        """The frontier's answers: new requests queued are saved; a retry or resumed request refused is done."""
        for request, reason in zip(requests, reasons, strict=True):
            if reason is None:
                if not again:  # a retry was saved as changed when it was asked for
                    self.accepted(request)
            elif again:
                self.done(request)

    def accepted(self, request: Request) -> None:
        """``request`` is queued (or changed: a retry): save it at the next checkpoint."""
        self._dirty[request._id] = request
        if len(self._dirty) == self._max_new:
            self._due = True
            self._wake()

    def done(self, request: Request) -> None:
        """``request`` reached its end (parsed, failed, dropped): forget it at the next checkpoint."""
        if request._id:
            self._dirty.pop(request._id, None)
            self._done.add(request._id)
            if self._marks:
                self._marks.pop(request._id, None)

    def marked(self, request: Request, fingerprint: bytes) -> None:
        """Saved with the request while it is not done: a checkpoint taken between the redirect and the
        parse holds the page as seen, and the request, resumed, must still parse it (not drop it as seen)."""
        self._marks[request._id] = fingerprint.hex()

    def marked_by(self, request: Request) -> bytes | None:
        mark = self._marks.get(request._id)
        return bytes.fromhex(mark) if mark is not None else None

    def due(self) -> bool:
        return self._due

    def soon(self) -> None:
        """Take a checkpoint as soon as the crawl can."""
        self._due = True
        self._wake()

    def _arm(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._interval, self._tick)

    def _tick(self) -> None:
        self._due = True
        self._wake()
        self._arm()

    # -- checkpoints ----------------------------------------------------------------

    def snapshot(
        self,
        *,
        status: str,
        stats: dict[str, Any],
        start_done: bool,
        outputs: dict[str, Any],
        dupefilter: Callable[[BinaryIO], None] | None,
    ) -> _Snapshot:
        """Everything to save, taken at once (no await): a consistent cut of the crawl.

        ``dupefilter`` (the filter's ``dump``) writes the filter to a new file
        here, at once: a copy in memory would cost as much as the filter."""
        rows = []
        for row_id, request in self._dirty.items():
            try:
                rows.append((row_id, to_text(request, self._spider)))
            except NotSerialisable as exc:
                if not self.unsaved:
                    logger.warning("%s; such requests are not resumed after a crash", exc)
                self.unsaved += 1
        done = list(self._done)
        self._dirty = {}
        self._done = set()
        self._due = False
        self._checkpoints += 1
        meta = {
            "checkpoint": str(self._checkpoints),
            "status": status,
            "stats": json.dumps(stats, default=str),
            "start_done": "1" if start_done else "0",
            "outputs": json.dumps(outputs),
            "next_id": str(self._next_id),
            "marks": json.dumps(self._marks),
            "saved_at": str(time.time()),
        }
        files = [info["path"] for info in outputs.values() if isinstance(info, dict) and "path" in info]
        obsolete = None
        if dupefilter is not None:
            name = f"dupefilter-{self._checkpoints}.bin"
            _owner_only(self.directory / name)
            with (self.directory / name).open("wb") as file:
                dupefilter(file)
            meta["dupefilter"] = name
            files.append(str(self.directory / name))
            obsolete, self._dupefilter = self._dupefilter, self.directory / name
        return _Snapshot(rows, done, meta, files, obsolete)

    async def save(self, snapshot: _Snapshot, then: Callable[[], None] | None = None) -> None:
        """Write ``snapshot`` in the background (one transaction), then call ``then``; waits for the
        previous write first."""
        await self.saved()
        self._saving = asyncio.ensure_future(self._save(snapshot, then))

    async def _save(self, snapshot: _Snapshot, then: Callable[[], None] | None) -> None:
        await self._writer.run(self._write, snapshot)
        if then is not None:
            then()

    async def saved(self) -> None:
        """Wait for the checkpoint being written, if any."""
        if self._saving is not None:
            saving, self._saving = self._saving, None
            await saving

    def _write(self, snapshot: _Snapshot) -> None:
        for path in snapshot.files:  # the outputs' bytes reach the disk before the offsets that count them
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        db = self._writer.db
        assert db is not None
        with db:
            db.executemany("INSERT OR REPLACE INTO requests (id, record) VALUES (?, ?)", snapshot.rows)
            db.executemany("DELETE FROM requests WHERE id = ?", [(row_id,) for row_id in snapshot.done])
            db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", snapshot.meta.items())
        if snapshot.obsolete is not None:
            snapshot.obsolete.unlink(missing_ok=True)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        try:
            await self.saved()
        finally:
            await self._writer.stop()
            if self._lock is not None:
                os.close(self._lock)
                self._lock = None


def _owner_only(path: Path) -> None:
    """Create ``path`` readable by its owner only (or make it so)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    os.chmod(path, 0o600)


def save_outputs(outputs: Mapping[str, Resumable]) -> dict[str, Any]:
    """Where every resumable output (exporters, store, the files of record) stands, by name."""
    return {key: output.checkpoint() for key, output in outputs.items()}


def restore_outputs(outputs: Mapping[str, Resumable], saved: dict[str, Any]) -> None:
    """Hand each output its saved position, before it opens (it cuts itself back to it)."""
    for key, output in outputs.items():
        info = saved.get(key)
        if info is not None:
            output.restore(info)
