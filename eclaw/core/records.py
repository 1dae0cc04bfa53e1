"""The files of record of a crawl: final failures, drops by a policy, dead-lettered items.

Each is a JSON-lines file (``failures``, ``drops``, ``dead_letter`` settings;
``{spider}`` and ``{run_key}`` filled in), written only when there is something
to record; every line names the spider and the run.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import IO, Any

from eclaw.exceptions import HttpError
from eclaw.http import Request
from eclaw.items import item_to_dict
from eclaw.security.redact import Redactor
from eclaw.settings import Settings
from eclaw.storage.paths import resolve_path

__all__ = ["DeadLetter", "DropLog", "FailureLog", "JsonLines", "Records", "attempts_of"]

logger = logging.getLogger(__name__)


class JsonLines:
    """A JSON-lines file of record, opened on the first record; ``""`` writes nothing.

    Every line names the spider and the run (``"spider"``, ``"run"``: the run id the
    log lines carry). A new run starts the file afresh (:meth:`open` removes what an
    earlier run left); a resumed run (:meth:`restore`) goes on after its checkpoint.
    """

    def __init__(
        self, path: str | Path, *, spider: str = "", run_id: str = "", redactor: Redactor | None = None
    ) -> None:
        self.path = Path(path) if path else None
        self.redactor = redactor or Redactor()  # every line passes it
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
        line = self.redactor.record(self._stamp | record)
        self._file.write(json.dumps(line, default=str, ensure_ascii=False) + "\n")
        self._file.flush()
        self.count += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    async def flush(self) -> None:
        """Each record is flushed as it is written."""

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
    """Final request failures: url, reason, attempts, last status and the error snapshot's
    folder (``snapshot``, ``None`` without one), one per line."""

    def record(
        self, request: Request, reason: str, error: BaseException | None, snapshot: str | Path | None = None
    ) -> None:
        status = error.status if isinstance(error, HttpError) else None
        self.write(
            {
                "time": round(time.time(), 3),
                "url": request.url.partition("#")[0],  # the fetched URL: no fragment
                "method": request.method,
                "reason": reason,
                "attempts": attempts_of(request),
                "last_status": status,
                "error": f"{type(error).__name__}: {error}" if error is not None else None,
                "snapshot": str(snapshot) if snapshot is not None else None,
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
                "url": request.url,
                "method": request.method,
                "reason": reason,
                "depth": request.depth,
            }
        )


class DeadLetter(JsonLines):
    """Items that did not reach an output. Each line says where the item stopped: ``stage``
    is ``validation``, ``pipeline`` or ``output``, and ``name`` the pipeline or output (an
    item one output failed on is still in the others)."""

    def record(self, item: Any, *, error: BaseException, stage: str, name: str = "", url: str | None) -> None:
        try:
            data: Any = item_to_dict(item)
        except (TypeError, ValueError):
            data = repr(item)
        self.write(
            {
                "time": time.time(),
                "url": url,
                "stage": stage,
                "name": name,
                "error": f"{type(error).__name__}: {error}",
                "item": data,
            }
        )
        logger.error("item dead-lettered to %s (%s %s: %s)", self.path, stage, name, self.redactor.text(str(error)))


class Records:
    """The three files of record of one crawl, from its settings."""

    def __init__(self, settings: Settings, spider: str, run_id: str, redactor: Redactor | None = None) -> None:
        def path(template: str) -> str:
            return str(resolve_path(template, spider, settings.run_key)) if template else ""

        stamp: dict[str, Any] = {"spider": spider, "run_id": run_id, "redactor": redactor}
        self.failures = FailureLog(path(settings.failures), **stamp)
        self.drops = DropLog(path(settings.drops), **stamp)
        self.dead_letter = DeadLetter(path(settings.dead_letter), **stamp)

    def files(self) -> dict[str, JsonLines]:
        """By the names a saved crawl's checkpoint knows them."""
        return {"failures": self.failures, "dead letter": self.dead_letter, "drops": self.drops}

    def open(self) -> None:
        for log in self.files().values():
            log.open()

    def close(self) -> None:
        for log in self.files().values():
            log.close()
