"""The embedded SQLite store: items (upserted on their key) and the runs table.

One file per spider by default (``eclaw-data/{spider}.sqlite``). Items of
every type share one table, with the item as a JSON document::

    items(type, key, run_key, run_id, data JSON, hash, first_seen, updated_at)
    runs(id, spider, run_key, started_at, finished_at, finish_reason, stats JSON,
         settings_digest, profile JSON, warnings JSON)

Query with SQLite's JSON functions: ``SELECT json_extract(data, '$.price')
FROM items WHERE type = 'Product'``. A type with a key (``Item.key``, or the
spider's ``item_key`` for dict items) has one row per key: a re-run updates
changed rows and counts inserted / updated / unchanged. Rows of a type without
a key belong to the run key: a finished run replaces the rows of the previous
run with the same run key, so re-running never appends a second copy.
Writes go through one writer thread in batched transactions (WAL mode), so the
event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eclaw.events import ItemDelta, ItemGone, ItemNew, ItemUnchanged, ItemUpdated
from eclaw.exceptions import ConfigError
from eclaw.items import item_key, item_to_dict, item_type
from eclaw.storage import sqlite
from eclaw.storage.paths import resolve_path
from eclaw.storage.sqlite import SqliteWriter

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext
    from eclaw.spider import Spider

__all__ = ["RunLog", "SqliteStore", "last_finished_start", "list_runs"]

Row = tuple[str, str | None, str, str, Any]  # type, key, JSON text, its hash, the item

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY,
    type TEXT NOT NULL,
    key TEXT,
    run_key TEXT NOT NULL,
    run_id INTEGER NOT NULL,
    data TEXT NOT NULL,
    hash TEXT NOT NULL,
    first_seen REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS items_by_key ON items(type, key) WHERE key IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_by_run ON items(run_key, run_id);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    spider TEXT NOT NULL,
    run_key TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    finish_reason TEXT,
    stats TEXT,
    settings_digest TEXT,
    profile TEXT,
    warnings TEXT
);
"""


def connect(path: Path, busy_timeout: float = 5.0) -> sqlite3.Connection:
    try:
        return sqlite.connect(path, _SCHEMA, busy_timeout)
    except (OSError, sqlite3.Error) as exc:
        raise ConfigError(f"cannot open the store {path}: {exc}") from None


class SqliteStore:
    """Item pipeline writing to the SQLite store (``-o items.sqlite``, or the default with no ``-o``).

    Args:
        path: the file; ``{spider}``, ``{run_key}``, ``{date}`` are filled in.
        run_key: rows of key-less item types are replaced per run key.
        item_key: key fields for dict items (default: the spider's ``item_key``).
        batch: items per transaction (also committed every second and at close).
        busy_timeout: seconds to wait for a lock held by another process before failing.
    """

    def __init__(
        self,
        path: str | Path = "eclaw-data/{spider}.sqlite",
        *,
        run_key: str = "default",
        item_key: Sequence[str] = (),
        batch: int = 500,
        busy_timeout: float = 5.0,
    ) -> None:
        self.template = str(path)
        self.busy_timeout = busy_timeout
        self.path = resolve_path(path, "spider", run_key)
        self.run_key = run_key
        self.item_key = tuple(item_key)
        self.batch = batch
        self.counts = {"inserted": 0, "updated": 0, "unchanged": 0}
        self._writer = SqliteWriter("eclaw-store")
        self._pending: list[Row] = []
        self._previous = 0  # the run before this one, for the items gone since
        self._last_commit = 0.0
        self._run_id = 0
        self._last_row = 0  # highest item row id committed
        self._resume: dict[str, Any] | None = None
        self._crawl: CrawlContext | None = None

    def __repr__(self) -> str:
        return f"SqliteStore({self.template!r})"

    def check(self, spider: str) -> None:
        path = resolve_path(self.template, spider, self.run_key)
        if path.is_dir():
            raise ConfigError(f"store path is a directory: {path}")

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        spider = crawl.spider
        self.path = resolve_path(self.template, spider.name, self.run_key)
        self.check(spider.name)
        self.item_key = self.item_key or tuple(spider.item_key)
        try:
            await self._writer.start(self.path, _SCHEMA, self.busy_timeout)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the store {self.path}: {exc}") from None
        self._run_id = int(time.time() * 1e6)  # orders this run's key-less rows after older ones
        self._last_commit = time.monotonic()
        if self._resume is not None:  # a saved crawl goes on: its run, without the rows after its checkpoint
            self._run_id, self._last_row = int(self._resume["run_id"]), int(self._resume["last_row"])
            await self._writer.run(self._cut_back)
        self._previous = await self._writer.run(self._previous_run)

    def checkpoint(self) -> dict[str, Any]:
        """This run and its last committed row, for a saved crawl (call :meth:`flush` first)."""
        return {"run_id": self._run_id, "last_row": self._last_row}

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue a saved crawl's run when opened."""
        self._resume = saved

    async def flush(self) -> None:
        """Commit the items waiting for the next batch."""
        await self._commit()

    def _previous_run(self) -> int:
        """The run that last stored keyed items before this one (its items not seen again are gone)."""
        db = self._writer.db
        assert db is not None
        row = db.execute("SELECT max(run_id) FROM items WHERE key IS NOT NULL AND run_id < ?", (self._run_id,))
        return int(row.fetchone()[0] or 0)

    def _cut_back(self) -> None:
        db = self._writer.db
        assert db is not None
        with db:  # key-less rows stored after the checkpoint are stored again; keyed rows are upserts anyway
            db.execute("DELETE FROM items WHERE key IS NULL AND run_id = ? AND id > ?", (self._run_id, self._last_row))

    async def process_item(self, item: Any, spider: Spider) -> Any:
        data = item_to_dict(item)
        key = item_key(item, data, self.item_key)  # raises on an empty key field: dead-lettered
        text = json.dumps(data, ensure_ascii=False, default=str, sort_keys=True)
        digest = hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()
        self._pending.append((item_type(item), key, text, digest, item))
        if len(self._pending) >= self.batch or time.monotonic() - self._last_commit > 1.0:
            await self._commit()
        return item

    async def _commit(self) -> None:
        rows, self._pending = self._pending, []
        self._last_commit = time.monotonic()
        if not rows:
            return
        try:
            counts, outcomes = await self._writer.run(self._write, rows)
        except (sqlite3.Error, OSError) as exc:
            logger.error(
                "store %s: a batch of %d items failed (%s); they go to the dead-letter file", self.path, len(rows), exc
            )
            if self._crawl is not None:
                self._crawl.dead_letter(self, [row[4] for row in rows], exc)
            return
        for name, n in counts.items():
            self.counts[name] += n
            if self._crawl is not None and n:
                self._crawl.stats.counters[f"store {name}"] += n
        if self._crawl is not None:
            for index, delta in outcomes:  # the recrawl's report, for whoever subscribed
                await self._crawl.publish(delta(item=rows[index][4], key=str(rows[index][1])))

    def _write(self, rows: list[Row]) -> tuple[dict[str, int], list[tuple[int, type[ItemDelta]]]]:
        """One transaction: all or nothing. Returns the counts, and each keyed row's outcome."""
        db = self._writer.db
        assert db is not None
        counts = {"inserted": 0, "updated": 0, "unchanged": 0}
        outcomes: list[tuple[int, type[ItemDelta]]] = []
        now = time.time()
        with db:
            for index, (kind, key, text, digest, _) in enumerate(rows):
                if key is None:
                    db.execute(
                        "INSERT INTO items (type, key, run_key, run_id, data, hash, first_seen, updated_at)"
                        " VALUES (?, NULL, ?, ?, ?, ?, ?, ?)",
                        (kind, self.run_key, self._run_id, text, digest, now, now),
                    )
                    counts["inserted"] += 1
                    continue
                old = db.execute("SELECT hash FROM items WHERE type = ? AND key = ?", (kind, key)).fetchone()
                if old is None:
                    db.execute(
                        "INSERT INTO items (type, key, run_key, run_id, data, hash, first_seen, updated_at)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (kind, key, self.run_key, self._run_id, text, digest, now, now),
                    )
                    counts["inserted"] += 1
                    outcomes.append((index, ItemNew))
                elif old[0] != digest:
                    db.execute(
                        "UPDATE items SET data = ?, hash = ?, run_key = ?, run_id = ?, updated_at = ?"
                        " WHERE type = ? AND key = ?",
                        (text, digest, self.run_key, self._run_id, now, kind, key),
                    )
                    counts["updated"] += 1
                    outcomes.append((index, ItemUpdated))
                else:
                    db.execute("UPDATE items SET run_id = ? WHERE type = ? AND key = ?", (self._run_id, kind, key))
                    counts["unchanged"] += 1
                    outcomes.append((index, ItemUnchanged))
            self._last_row = db.execute("SELECT max(id) FROM items").fetchone()[0] or 0
        return counts, outcomes

    async def close(self) -> None:
        try:
            await self._commit()
            finished = self._crawl is None or self._crawl.stats.finish_reason == "finished"
            if finished:  # a complete run replaces the key-less rows of earlier runs with its run key
                await self._writer.run(self._replace_previous)
                await self._report_gone()
        finally:
            await self._writer.stop()
        logger.info(
            "store %s: %d inserted, %d updated, %d unchanged, %d gone",
            self.path,
            *(self.counts.get(name, 0) for name in ("inserted", "updated", "unchanged", "gone")),
        )

    async def _report_gone(self) -> None:
        """The keyed items the previous run stored and this finished run did not see again."""
        if not self._previous:
            return
        gone = await self._writer.run(self._gone)
        self.counts["gone"] = len(gone)
        if self._crawl is not None and gone:
            self._crawl.stats.counters["store gone"] += len(gone)
            for kind, key, data in gone:
                await self._crawl.publish(ItemGone(kind=kind, key=key, item=json.loads(data)))

    def _gone(self) -> list[tuple[str, str, str]]:
        db = self._writer.db
        assert db is not None
        query = "SELECT type, key, data FROM items WHERE key IS NOT NULL AND run_id = ? ORDER BY id"
        return db.execute(query, (self._previous,)).fetchall()

    def _replace_previous(self) -> None:
        db = self._writer.db
        assert db is not None
        with db:
            db.execute(
                "DELETE FROM items WHERE key IS NULL AND run_key = ? AND run_id < ?", (self.run_key, self._run_id)
            )


class RunLog:
    """The ``runs`` table: one row per crawl, with its stats and data-quality profile.

    Each of :meth:`start` and :meth:`finish` opens the file and closes it again,
    so a crawl that never finishes leaves no connection behind.
    """

    def __init__(self, path: str | Path) -> None:
        self.template = str(path)
        self.path = Path(path)
        self.run_id: int | None = None

    async def start(self, spider: str, run_key: str, settings_digest: str) -> dict[str, Any] | None:
        """Record the start of a run; returns the previous finished run's profile of this spider."""
        self.path = resolve_path(self.template, spider, run_key)
        return await asyncio.to_thread(self._start, spider, run_key, settings_digest)

    def _start(self, spider: str, run_key: str, digest: str) -> dict[str, Any] | None:
        with closing(connect(self.path)) as db:
            row = db.execute(
                "SELECT profile FROM runs WHERE spider = ? AND finish_reason = 'finished' AND profile IS NOT NULL"
                " ORDER BY id DESC LIMIT 1",
                (spider,),
            ).fetchone()
            with db:
                cursor = db.execute(
                    "INSERT INTO runs (spider, run_key, started_at, settings_digest) VALUES (?, ?, ?, ?)",
                    (spider, run_key, time.time(), digest),
                )
        self.run_id = cursor.lastrowid
        return json.loads(row[0]) if row else None

    async def finish(self, stats: dict[str, Any], profile: dict[str, Any], warnings: list[str]) -> None:
        await asyncio.to_thread(self._finish, stats, profile, warnings)

    def _finish(self, stats: dict[str, Any], profile: dict[str, Any], warnings: list[str]) -> None:
        if self.run_id is None:
            return
        with closing(connect(self.path)) as db, db:  # one transaction, then the file is closed
            db.execute(
                "UPDATE runs SET finished_at = ?, finish_reason = ?, stats = ?, profile = ?, warnings = ? WHERE id = ?",
                (
                    time.time(),
                    stats.get("finish_reason"),
                    json.dumps(stats, default=str),
                    json.dumps(profile),
                    json.dumps(warnings),
                    self.run_id,
                ),
            )


def last_finished_start(path: Path, spider: str) -> float | None:
    """When the last finished run of ``spider`` in the store at ``path`` started (``None``: none)."""
    if not path.is_file():
        return None
    finished = [r["started_at"] for r in list_runs(path) if r["spider"] == spider and r["finish_reason"] == "finished"]
    return max(finished, default=None)


def list_runs(path: str | Path) -> list[dict[str, Any]]:
    """The runs recorded in one store file, newest first."""
    db = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT id, spider, run_key, started_at, finished_at, finish_reason, stats, settings_digest, warnings"
            " FROM runs ORDER BY id DESC"
        ).fetchall()
    except sqlite3.Error as exc:
        raise ConfigError(f"{path} is not an eclaw store: {exc}") from None
    finally:
        db.close()
    names = (
        "id",
        "spider",
        "run_key",
        "started_at",
        "finished_at",
        "finish_reason",
        "stats",
        "settings_digest",
        "warnings",
    )
    runs = []
    for row in rows:
        run = dict(zip(names, row, strict=True))
        run["stats"] = json.loads(run["stats"] or "{}")
        run["warnings"] = json.loads(run["warnings"] or "[]")
        runs.append(run)
    return runs
