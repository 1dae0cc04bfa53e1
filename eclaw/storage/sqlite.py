"""SQLite files used from asyncio: one connection, driven from one worker thread."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["SqliteWriter", "connect"]

T = TypeVar("T")


def connect(path: Path, schema: str, busy_timeout: float = 5.0) -> sqlite3.Connection:
    """Open (creating its directory) a WAL-mode database with ``schema`` applied."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, check_same_thread=False, timeout=busy_timeout)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(schema)
    except BaseException:  # not a database, a read-only file, a schema that does not apply
        db.close()
        raise
    return db


class SqliteWriter:
    """A connection whose every call runs on one dedicated thread, so the event loop never waits on the disk."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._executor: ThreadPoolExecutor | None = None
        self.db: sqlite3.Connection | None = None

    async def start(self, path: Path, schema: str, busy_timeout: float = 5.0) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=self._name)
        opening = self._executor.submit(connect, path, schema, busy_timeout)
        try:
            self.db = await asyncio.wrap_future(opening)
        except BaseException:  # failed or cancelled: no thread and no connection are left behind
            await self.stop()  # waits for a connect under way: what it opened is closed here
            if not opening.cancelled() and opening.exception() is None:
                opening.result().close()
            raise

    async def run(self, func: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, func, *args)

    async def stop(self) -> None:
        if self.db is not None:
            await self.run(self.db.close)
            self.db = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
