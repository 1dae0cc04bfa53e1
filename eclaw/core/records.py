"""What happens to requests that fail: JSON-lines records and delayed retries."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from eclaw.exceptions import HttpError
from eclaw.http.message import Request
from eclaw.http.urls import redact_url

__all__ = ["DropLog", "FailureLog", "JsonLines", "RetryQueue", "attempts_of"]


class JsonLines:
    """A JSON-lines file of record, opened on the first record; ``""`` writes nothing.

    Every line names the spider and the run (``"spider"``, ``"run"``: the run id the
    log lines carry). A new run starts the file afresh (:meth:`open` removes what an
    earlier run left); a resumed run (:meth:`restore`) goes on after its checkpoint.
    """

    def __init__(self, path: str | Path, *, spider: str = "", run_id: str = "") -> None:
        self.path = Path(path) if path else None
        self.count = 0
        self._stamp = {"spider": spider, "run": run_id}
        self._resumed = False
        self._file: IO[str] | None = None

    def open(self) -> None:
        """A crawl starts: unless it resumes a saved one, what an earlier run wrote here goes."""
        if self.path is not None and not self._resumed and self.path.is_file():
            self.path.unlink()

    def write(self, record: dict[str, Any]) -> None:
        if self.path is None:
            return
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        self._file.write(json.dumps(self._stamp | record, default=str, ensure_ascii=False) + "\n")
        self._file.flush()
        self.count += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def checkpoint(self) -> dict[str, Any] | None:
        """The file's committed length, for a saved crawl."""
        if self.path is None:
            return None
        if self._file is not None:
            return {"path": str(self.path), "offset": self._file.tell()}
        return {"path": str(self.path), "offset": self.path.stat().st_size if self.path.exists() else 0}

    def restore(self, saved: dict[str, Any]) -> None:
        """Cut the file back to a saved crawl's committed length (the lines after it are written again)."""
        self._resumed = True
        if self.path is None or Path(saved["path"]) != self.path or self._file is not None:
            return
        if self.path.exists() and self.path.stat().st_size > saved["offset"]:
            os.truncate(self.path, saved["offset"])


def attempts_of(request: Request) -> int:
    """Download attempts made so far for ``request`` (1 + its retries)."""
    meta = request._meta  # most requests have no meta: don't create one
    return 1 + (meta.get("retry_times", 0) if meta else 0)


class FailureLog(JsonLines):
    """Final request failures: url, reason, attempts and last status, one per line."""

    def record(self, request: Request, reason: str, error: BaseException | None) -> None:
        status = error.status if isinstance(error, HttpError) else None
        self.write(
            {
                "time": round(time.time(), 3),
                "url": redact_url(request.url.partition("#")[0]),  # the fetched URL: no fragment
                "method": request.method,
                "reason": reason,
                "attempts": attempts_of(request),
                "last_status": status,
                "error": redact_url(f"{type(error).__name__}: {error}") if error is not None else None,
            }
        )


class DropLog(JsonLines):
    """In-scope requests dropped by a policy (url too long, max depth, robots, offsite
    redirect, a middleware's ``IgnoreRequest``): url, method, reason, depth, one per line.
    Duplicates, off-site links and unsupported schemes are only counted."""

    UNLISTED = frozenset({"duplicate", "offsite", "unsupported scheme"})

    def record(self, request: Request, reason: str) -> None:
        self.write(
            {
                "time": round(time.time(), 3),
                "url": redact_url(request.url),
                "method": request.method,
                "reason": reason,
                "depth": request.depth,
            }
        )


class RetryQueue:
    """Requests waiting out a retry delay, holding no download slot meanwhile."""

    def __init__(self, ready: Callable[[Request], None]) -> None:
        self._ready = ready
        self._timers: dict[asyncio.TimerHandle, Request] = {}

    def __len__(self) -> int:
        return len(self._timers)

    def add(self, request: Request, delay: float) -> None:
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            assert handle is not None
            del self._timers[handle]
            self._ready(request)

        handle = loop.call_later(max(0.0, delay), fire)
        self._timers[handle] = request

    def cancel_all(self) -> int:
        """Drop every waiting request (the crawl is ending); returns how many."""
        for handle in self._timers:
            handle.cancel()
        count = len(self._timers)
        self._timers.clear()
        return count
