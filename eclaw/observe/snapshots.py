"""Error snapshots: what a developer needs to see why a page failed, kept on disk.

When a callback raises, a page yields no item where the spider expected one
(``expect_items``), or a request fails for good on an HTTP status (404, 503 after its
retries), the crawl saves a snapshot: one folder under
``eclaw-data/<spider>/snapshots/`` (the ``snapshots`` setting) holding

- ``snapshot.json``: the request (method, URL, headers, meta, callback), the
  response's URL, status and headers, the reason and the error;
- ``body.html`` (``.json``, ``.xml``, ``.txt`` or ``.bin``): the body as downloaded
  (an HTTP failure's first :data:`HTTP_ERROR_BODY_MAX` bytes: ``snapshot.json`` says
  ``body_bytes``, the size the server sent, and ``body_truncated``);
- ``traceback.txt``: the traceback, when there is one;
- any ``extra_files`` the caller adds (a browser fetcher's screenshot).

The failure's log line (and for an HTTP failure its line in the failures file)
names the folder; ``eclaw shell FOLDER`` opens it as a response. The folder holds
at most ``snapshots_max`` snapshots and ``snapshots_max_bytes`` bytes: a run keeps
its first ones (the first failures are the telling ones) and evicts what older runs left.

Other components save their own through the crawl: ``await crawl.snapshots.save(request,
response, error, extra_files={"screenshot.png": png})`` (``crawl`` is the
:class:`~eclaw.contracts.CrawlContext`: a middleware's ``open(crawl)``, ``spider.crawl``
for a fetcher, ``event.crawl`` in a handler).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import time
import traceback
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from multidict import CIMultiDict, CIMultiDictProxy

from eclaw.http import Request, Response
from eclaw.security.redact import Redactor
from eclaw.storage.paths import resolve_path

if TYPE_CHECKING:
    from eclaw.settings import Settings

__all__ = ["HTTP_ERROR_BODY_MAX", "Snapshots", "load_snapshot", "save_for_failure"]

logger = logging.getLogger(__name__)

_EXTENSIONS = (("html", "html"), ("json", "json"), ("xml", "xml"), ("text/", "txt"))
_SLUG = re.compile(r"[^A-Za-z0-9]+")
# An error page is evidence, not the page to parse: its start says what went wrong (64 KiB).
HTTP_ERROR_BODY_MAX = 64 * 1024


class Snapshots:
    """Saves snapshots of failed pages in ``dir``, within a count and a size.

    Args:
        dir: the folder (created on the first snapshot).
        max_count: snapshots the folder keeps; this instance saves at most as many.
        max_bytes: bytes the folder keeps; a snapshot that would pass it is not saved.
    """

    def __init__(
        self, dir: str | Path, *, max_count: int = 50, max_bytes: int = 50_000_000, redactor: Redactor | None = None
    ) -> None:
        self.dir = Path(dir)
        self.redactor = redactor or Redactor()  # what every file but the body passes
        self.max_count = max_count
        self.max_bytes = max_bytes
        self.saved = 0  # by this instance (one crawl)
        self.skipped = 0
        self._bytes = 0
        self._mine: set[str] = set()
        self._token = os.urandom(3).hex()  # two crawls saving at once never collide
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"Snapshots({str(self.dir)!r}, max_count={self.max_count}, max_bytes={self.max_bytes})"

    @classmethod
    def from_settings(cls, settings: Settings, spider: str, redactor: Redactor | None = None) -> Snapshots | None:
        """The crawl's snapshots (``snapshots``, ``snapshots_max``, ``snapshots_max_bytes``); ``None`` if off."""
        if not settings.snapshots or not settings.snapshots_max:
            return None
        folder = resolve_path(settings.snapshots, spider, settings.run_key)
        return cls(folder, max_count=settings.snapshots_max, max_bytes=settings.snapshots_max_bytes, redactor=redactor)

    async def save(
        self,
        request: Request,
        response: Response | None,
        error: BaseException | None,
        *,
        reason: str = "",
        extra_files: Mapping[str, bytes] | None = None,
        body_max: int | None = None,
    ) -> Path | None:
        """Save a snapshot; returns its folder, or ``None`` when the caps leave no room (or the disk fails).

        Args:
            request: the request that failed.
            response: its response, if one came (headers and body are kept).
            error: the exception (its traceback is kept), or ``None`` (a page without items).
            reason: the failure's reason, as in the stats (``callback error: KeyError``, ``no items``).
            extra_files: more files for the folder, by name (``{"screenshot.png": data}``).
            body_max: keep at most this many bytes of the body (``None``: all of it).
        """
        if self.saved >= self.max_count:  # full: a crawl of 10,000 404s builds no files past the first ones
            self.skipped += 1
            return None
        files = _files(request, response, error, reason, extra_files or {}, self.redactor, body_max)
        size = sum(len(data) for data in files.values())
        async with self._lock:  # the count and the folder's eviction stay consistent
            if self.saved >= self.max_count or self._bytes + size > self.max_bytes:
                self.skipped += 1
                return None
            name = _name(request, self.saved, self._token)
            try:
                await asyncio.to_thread(self._write, name, files)
            except OSError as exc:
                logger.error("could not save a snapshot in %s: %s", self.dir, exc)
                return None
            self.saved += 1
            self._bytes += size
            return self.dir / name

    def _write(self, name: str, files: Mapping[str, bytes]) -> None:
        folder = self.dir / name
        folder.mkdir(parents=True, exist_ok=True)
        for file, data in files.items():
            (folder / Path(file).name).write_bytes(data)
        self._mine.add(name)
        self._evict()

    def _evict(self) -> None:
        """Remove the oldest snapshots of other runs until the folder is within its caps."""
        folders = sorted(p for p in self.dir.iterdir() if p.is_dir())
        sizes = {p: sum(f.stat().st_size for f in p.iterdir() if f.is_file()) for p in folders}
        count, total = len(folders), sum(sizes.values())
        for folder in folders:
            if count <= self.max_count and total <= self.max_bytes:
                break
            if folder.name in self._mine:
                continue
            shutil.rmtree(folder, ignore_errors=True)
            count, total = count - 1, total - sizes[folder]


def load_snapshot(folder: str | Path) -> Response:
    """The response a snapshot kept (URL, status, headers, body), with its request's method and URL."""
    folder = Path(folder)
    meta = json.loads((folder / "snapshot.json").read_text(encoding="utf-8"))
    bodies = sorted(folder.glob("body.*"))
    body = bodies[0].read_bytes() if bodies else b""
    kept = meta.get("response") or {}
    headers = CIMultiDictProxy(CIMultiDict((k, v) for k, v in kept.get("headers", [])))
    request = Request(meta["request"]["url"], method=meta["request"]["method"])
    url, status = kept.get("url", request.url), kept.get("status", 200)
    return Response(url, status=status, headers=headers, body=body, request=request)


def _files(
    request: Request,
    response: Response | None,
    error: BaseException | None,
    reason: str,
    extra: Mapping[str, bytes],
    redactor: Redactor,
    body_max: int | None = None,
) -> dict[str, bytes]:
    """The snapshot's files. All but the body (the page as the site sent it) and the extra files (a
    screenshot) pass ``redactor``: headers, meta (cookies, the proxy's password), the error, the traceback."""
    record: dict[str, Any] = {
        "time": round(time.time(), 3),
        "reason": reason,
        "error": f"{type(error).__name__}: {error}" if error is not None else None,
        "request": {
            "method": request.method,
            "url": request.url,
            "headers": dict(redactor.headers_of(request.headers)),
            "meta": request.meta,
            "callback": getattr(request.callback, "__name__", None) if request.callback else "parse",
            "depth": request.depth,
        },
        "response": None,
    }
    files: dict[str, bytes] = {}
    if response is not None:
        record["response"] = {
            "url": response.url,
            "status": response.status,
            "headers": redactor.headers_of(response.headers.items()),
            "body_bytes": len(response.body),
            "body_truncated": body_max is not None and len(response.body) > body_max,
        }
        files[f"body.{_extension(response)}"] = response.body[:body_max]
    record = redactor.record(json.loads(json.dumps(record, default=repr)))  # meta's objects as their repr
    files["snapshot.json"] = json.dumps(record, indent=2, ensure_ascii=False).encode()
    if error is not None and error.__traceback__ is not None:
        files["traceback.txt"] = redactor.text("".join(traceback.format_exception(error))).encode()
    return files | dict(extra)


def _extension(response: Response) -> str:
    kind = response.headers.get("Content-Type", "").lower()
    for marker, extension in _EXTENSIONS:
        if marker in kind:
            return extension
    return "html" if response.body.lstrip()[:1] == b"<" else "bin"


def _name(request: Request, index: int, token: str) -> str:
    """Sortable by time: ``20250101-120000-ab12cd-003-p-17``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = request.url.partition("://")[2].partition("/")[2].partition("?")[0]
    slug = _SLUG.sub("-", path).strip("-")[:40] or "root"
    return f"{stamp}-{token}-{index:03d}-{slug}"


async def save_for_failure(
    snapshots: Snapshots | None,
    counters: Counter[str],
    request: Request,
    response: Response | None,
    error: BaseException | None,
    *,
    reason: str,
    body_max: int | None = None,
) -> tuple[Path | None, str]:
    """Save a failure's snapshot (when ``snapshots`` is on), counted in ``counters`` as
    ``snapshots saved``; returns its folder and what the failure's log line says of it."""
    if snapshots is None:
        return None, ""
    folder = await snapshots.save(request, response, error, reason=reason, body_max=body_max)
    if folder is None:
        return None, f" (no snapshot: {snapshots.dir} holds snapshots_max / snapshots_max_bytes)"
    counters["snapshots saved"] += 1
    return folder, f"; snapshot {folder}"
