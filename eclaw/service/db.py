"""The service's records: jobs, schedules and fired slots, behind one :class:`Store` protocol.

:class:`Database` keeps them in SQLite (stdlib ``sqlite3``, WAL), the default, in the project's
``.eclaw-serve/service.db``; :class:`eclaw.service.db_postgres.PostgresStore` in PostgreSQL
(``eclaw serve --store postgresql://…``). :func:`open_store` picks one from ``--store``.

A slot row ``(schedule_id, slot)`` is unique in both: it is inserted before the slot's job starts,
so a slot fires at most once, also across a restart of the service.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from eclaw.exceptions import ConfigError
from eclaw.security.redact import redact_url

__all__ = ["Database", "Store", "open_store"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    spider TEXT NOT NULL,
    args TEXT NOT NULL DEFAULT '{}',
    monitors TEXT,
    schedule_id INTEGER,
    state TEXT NOT NULL,
    pid INTEGER,
    returncode INTEGER,
    reason TEXT,
    created REAL NOT NULL,
    started REAL,
    finished REAL
);
CREATE TABLE IF NOT EXISTS schedules (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    spider TEXT NOT NULL,
    args TEXT NOT NULL DEFAULT '{}',
    cron TEXT NOT NULL,
    timezone TEXT NOT NULL DEFAULT 'UTC',
    missed TEXT NOT NULL DEFAULT 'skip',
    enabled INTEGER NOT NULL DEFAULT 1,
    last_slot REAL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS slots (
    schedule_id INTEGER NOT NULL,
    slot REAL NOT NULL,
    job_id INTEGER,
    PRIMARY KEY (schedule_id, slot)
);
"""
_JOB_FIELDS = ("id", "spider", "args", "monitors", "schedule_id", "state", "pid", "returncode", "reason",
               "created", "started", "finished")  # fmt: skip
_SCHEDULE_FIELDS = ("id", "spider", "args", "cron", "timezone", "missed", "enabled", "last_slot", "created")


class Store(Protocol):
    """What the service keeps: its jobs, schedules and fired slots (records are dicts, ``args`` decoded).

    Calls are synchronous and short (one indexed statement each), made from the service's loop.
    """

    def close(self) -> None:
        """Close the connection."""

    def add_job(self, spider: str, args: dict[str, str], monitors: str | None, schedule_id: int | None = None) -> int:
        """A new ``queued`` job; returns its id."""

    def update_job(self, job_id: int, **fields: Any) -> None:
        """Set ``fields`` of job ``job_id`` (ValueError for an unknown field)."""

    def job(self, job_id: int) -> dict[str, Any] | None:
        """Job ``job_id``, or None."""

    def jobs(self, *, states: tuple[str, ...] = (), limit: int = 100) -> list[dict[str, Any]]:
        """The newest jobs first (only those in ``states`` if given)."""

    def queued(self) -> list[dict[str, Any]]:
        """The queued jobs, oldest first."""

    def delete_job(self, job_id: int) -> None:
        """Forget job ``job_id``."""

    def add_schedule(self, spider: str, args: dict[str, str], cron: str, timezone: str, missed: str) -> int:
        """A new schedule; returns its id. Slots before now are not due."""

    def schedule(self, schedule_id: int) -> dict[str, Any] | None:
        """Schedule ``schedule_id``, or None."""

    def schedules(self) -> list[dict[str, Any]]:
        """Every schedule, oldest first."""

    def update_schedule(self, schedule_id: int, **fields: Any) -> None:
        """Set ``fields`` of schedule ``schedule_id`` (ValueError for an unknown field)."""

    def delete_schedule(self, schedule_id: int) -> bool:
        """Remove a schedule; whether it existed."""

    def claim_slot(self, schedule_id: int, slot: float) -> bool:
        """Record that ``slot`` of the schedule fires; False if it already did."""

    def set_slot_job(self, schedule_id: int, slot: float, job_id: int) -> None:
        """Link a fired slot to its job."""

    def slots(self, schedule_id: int) -> list[tuple[float, int | None]]:
        """The fired slots of a schedule, oldest first: ``(slot, job_id)``."""


class Database:
    """The SQLite store: jobs, schedules and slots of one project (``DIR/.eclaw-serve/service.db``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    # jobs
    def add_job(self, spider: str, args: dict[str, str], monitors: str | None, schedule_id: int | None = None) -> int:
        """A new ``queued`` job; returns its id."""
        cur = self._conn.execute(
            "INSERT INTO jobs (spider, args, monitors, schedule_id, state, created) VALUES (?, ?, ?, ?, 'queued', ?)",
            (spider, json.dumps(args), monitors, schedule_id, time.time()),
        )
        return int(cur.lastrowid or 0)

    def update_job(self, job_id: int, **fields: Any) -> None:
        """Set ``fields`` of job ``job_id``."""
        unknown = set(fields) - set(_JOB_FIELDS)
        if unknown:
            raise ValueError(f"unknown job fields: {sorted(unknown)}")
        names = ", ".join(f"{name} = ?" for name in fields)
        self._conn.execute(f"UPDATE jobs SET {names} WHERE id = ?", (*fields.values(), job_id))

    def job(self, job_id: int) -> dict[str, Any] | None:
        """Job ``job_id`` as a dict (``args`` decoded), or None."""
        row = self._conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return _decode(row) if row else None

    def jobs(self, *, states: tuple[str, ...] = (), limit: int = 100) -> list[dict[str, Any]]:
        """The newest jobs first (only those in ``states`` if given)."""
        if states:
            marks = ",".join("?" * len(states))
            query = f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY id DESC LIMIT ?"
            rows = self._conn.execute(query, (*states, limit)).fetchall()
        else:
            rows = self._conn.execute("SELECT * FROM jobs ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [_decode(row) for row in rows]

    def queued(self) -> list[dict[str, Any]]:
        """The queued jobs, oldest first (the FIFO queue)."""
        rows = self._conn.execute("SELECT * FROM jobs WHERE state = 'queued' ORDER BY id").fetchall()
        return [_decode(row) for row in rows]

    def delete_job(self, job_id: int) -> None:
        """Forget job ``job_id`` (retention)."""
        self._conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,))

    # schedules
    def add_schedule(self, spider: str, args: dict[str, str], cron: str, timezone: str, missed: str) -> int:
        """A new schedule; returns its id. Slots before now are not due."""
        now = time.time()
        cur = self._conn.execute(
            "INSERT INTO schedules (spider, args, cron, timezone, missed, last_slot, created) VALUES (?,?,?,?,?,?,?)",
            (spider, json.dumps(args), cron, timezone, missed, now, now),
        )
        return int(cur.lastrowid or 0)

    def schedule(self, schedule_id: int) -> dict[str, Any] | None:
        """Schedule ``schedule_id`` as a dict, or None."""
        row = self._conn.execute("SELECT * FROM schedules WHERE id = ?", (schedule_id,)).fetchone()
        return _decode(row) if row else None

    def schedules(self) -> list[dict[str, Any]]:
        """Every schedule, oldest first."""
        return [_decode(row) for row in self._conn.execute("SELECT * FROM schedules ORDER BY id").fetchall()]

    def update_schedule(self, schedule_id: int, **fields: Any) -> None:
        """Set ``fields`` of schedule ``schedule_id``."""
        unknown = set(fields) - set(_SCHEDULE_FIELDS)
        if unknown:
            raise ValueError(f"unknown schedule fields: {sorted(unknown)}")
        names = ", ".join(f"{name} = ?" for name in fields)
        self._conn.execute(f"UPDATE schedules SET {names} WHERE id = ?", (*fields.values(), schedule_id))

    def delete_schedule(self, schedule_id: int) -> bool:
        """Remove a schedule; whether it existed."""
        return self._conn.execute("DELETE FROM schedules WHERE id = ?", (schedule_id,)).rowcount > 0

    def claim_slot(self, schedule_id: int, slot: float) -> bool:
        """Record that ``slot`` of the schedule fires; False if it already did (never fire twice)."""
        try:
            self._conn.execute("INSERT INTO slots (schedule_id, slot) VALUES (?, ?)", (schedule_id, slot))
        except sqlite3.IntegrityError:
            return False
        return True

    def set_slot_job(self, schedule_id: int, slot: float, job_id: int) -> None:
        """Link a fired slot to its job."""
        query = "UPDATE slots SET job_id = ? WHERE schedule_id = ? AND slot = ?"
        self._conn.execute(query, (job_id, schedule_id, slot))

    def slots(self, schedule_id: int) -> list[tuple[float, int | None]]:
        """The fired slots of a schedule, oldest first: ``(slot, job_id)``."""
        rows = self._conn.execute("SELECT slot, job_id FROM slots WHERE schedule_id = ? ORDER BY slot", (schedule_id,))
        return [(row[0], row[1]) for row in rows.fetchall()]


def _decode(row: sqlite3.Row) -> dict[str, Any]:
    record = dict(row)
    record["args"] = json.loads(record.get("args") or "{}")
    return record


def open_store(store: str | None, root: Path) -> Store:
    """The store ``eclaw serve --store`` names: None for SQLite in ``root/.eclaw-serve/service.db``,
    ``postgresql://…`` (or ``postgres://…``) for PostgreSQL, a file path for SQLite there.
    ConfigError in one line (password masked) when it cannot be opened."""
    if not store:
        return Database(root / ".eclaw-serve" / "service.db")
    scheme = urlsplit(store).scheme.lower() if "://" in store else ""
    if scheme in ("postgresql", "postgres"):
        from eclaw.service.db_postgres import PostgresStore

        return PostgresStore(store, project=str(root.resolve()))
    if scheme:
        raise ConfigError(f"--store {redact_url(store)}: unknown scheme {scheme!r} (postgresql://… or a SQLite file)")
    try:
        return Database(store)
    except (OSError, sqlite3.Error) as exc:
        raise ConfigError(f"--store {store}: cannot open the SQLite database: {exc}") from None
