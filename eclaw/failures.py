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
from eclaw.http import Request
from eclaw.urls import redact_url

__all__ = ["FailureLog", "JsonLines", "RetryQueue", "attempts_of"]


class JsonLines:
    """An append-only JSONL file, opened on the first record; ``""`` writes nothing."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path) if path else None
        self.count = 0
        self._file: IO[str] | None = None

    def write(self, record: dict[str, Any]) -> None:
        if self.path is None:
            return
        if self._file is None:
            self._file = self.path.open("a", encoding="utf-8")
        self._file.write(json.dumps(record, default=str, ensure_ascii=False) + "\n")
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
