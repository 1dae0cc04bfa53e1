"""HttpCache: keep responses on disk and replay them, to develop a spider offline; or revalidate
them with conditional requests, so a re-run fetches only what changed (``incremental``)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from multidict import CIMultiDict, CIMultiDictProxy

from eclaw.contracts import Fetch
from eclaw.exceptions import CacheMiss, ConfigError
from eclaw.frontier.base import fingerprint
from eclaw.http import Request, Response
from eclaw.storage.paths import resolve_path
from eclaw.storage.sqlite import SqliteWriter

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext

__all__ = ["HttpCache"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    fingerprint BLOB PRIMARY KEY,
    url TEXT NOT NULL,
    status INTEGER NOT NULL,
    headers TEXT NOT NULL,
    body BLOB NOT NULL,
    stored_at REAL NOT NULL
);
"""


class HttpCache:
    """Store every response in ``dir/http-cache.sqlite``, keyed by request
    fingerprint (method, canonical URL, body), and serve it on the next run
    without touching the network.

    Served responses have ``response.from_cache == True`` and are counted in
    stats (``cache hit`` / ``cache miss`` / ``cache stored``). With
    ``offline=True`` a request that is not cached fails with ``CacheMiss``
    instead of being fetched.

    With ``revalidate=True`` a stored response with an ``ETag`` or a
    ``Last-Modified`` is not served as it is: the request goes out with
    ``If-None-Match`` / ``If-Modified-Since``, and a ``304 Not Modified`` is
    answered with the stored response (``response.meta["not_modified"]`` is
    true; ``cache revalidated`` in the stats): the server sends only what changed,
    and the callback sees the page as usual (its items, its links).

    Args:
        dir: directory of the cache file (created if missing; ``{spider}`` is filled in).
        expire: seconds a stored response stays fresh; 0 keeps it forever.
        ignore_statuses: statuses never stored (server errors by default; statuses
            the spider does not handle are never stored either).
        offline: never fetch; a miss is a failure.
        revalidate: ask the server whether each stored response changed (see above).
    """

    def __init__(
        self,
        dir: str | Path = ".eclaw-cache",
        *,
        expire: float = 0,
        ignore_statuses: Iterable[int] = (429, 500, 502, 503, 504, 522, 524),
        offline: bool = False,
        revalidate: bool = False,
    ) -> None:
        if offline and revalidate:
            raise ValueError("HttpCache: offline and revalidate exclude each other")
        self.template = str(dir)
        self.dir = Path(dir)
        self.revalidate = revalidate
        self.expire = expire
        self.ignore_statuses = frozenset(ignore_statuses)
        self.offline = offline
        self._writer = SqliteWriter("eclaw-http-cache")
        self._crawl: CrawlContext | None = None

    def __repr__(self) -> str:
        return f"HttpCache({str(self.dir)!r}, offline={self.offline})"

    @property
    def path(self) -> Path:
        return self.dir / "http-cache.sqlite"

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        self.dir = resolve_path(self.template, crawl.spider.name, crawl.settings.run_key)
        try:
            await self._writer.start(self.path, _SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"http cache {self.path}: {exc}") from None

    async def close(self) -> None:
        await self._writer.stop()

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        key = fingerprint(request)
        row = await self._writer.run(self._load, key)
        if row is not None:
            url, status, headers, body = row
            stored = Response(url, status=status, headers=_headers(headers), body=body, request=request)
            stored.from_cache = True
            if not self.revalidate:
                self._count("cache hit")
                return stored
            validators = _validators(stored)
            if validators:
                return await self._revalidated(request, key, stored, validators, call_next)
        self._count("cache miss")
        if self.offline:
            raise CacheMiss(f"{request.url} is not in the offline cache {self.path}")
        response = await call_next(request)  # error statuses raise HttpError here: not stored
        await self._store(key, response)
        return response

    async def _revalidated(
        self, request: Request, key: bytes, stored: Response, validators: dict[str, str], call_next: Fetch
    ) -> Response:
        """Ask the server whether ``stored`` changed: a 304 is answered with it, anything else stored anew."""
        response = await call_next(request.replace(headers={**request.headers, **validators}))
        if response.status == 304:
            self._count("cache revalidated")
            request.meta["not_modified"] = True
            return stored
        await self._store(key, response)
        return response

    def _load(self, key: bytes) -> tuple[str, int, str, bytes] | None:
        db = self._writer.db
        assert db is not None
        row = db.execute(
            "SELECT url, status, headers, body, stored_at FROM responses WHERE fingerprint = ?", (key,)
        ).fetchone()
        if row is None or (self.expire and time.time() - row[4] > self.expire):
            return None
        return row[0], row[1], row[2], row[3]

    async def _store(self, key: bytes, response: Response) -> None:
        if response.status in self.ignore_statuses or response.from_cache:
            return
        headers = json.dumps(list(response.headers.items()))
        await self._writer.run(self._save, (key, response.url, response.status, headers, response.body, time.time()))
        self._count("cache stored")

    def _save(self, row: tuple[Any, ...]) -> None:
        db = self._writer.db
        assert db is not None
        with db:
            db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?)", row)

    def _count(self, what: str) -> None:
        if self._crawl is not None:
            self._crawl.stats.counters[what] += 1


def _validators(response: Response) -> dict[str, str]:
    """The conditional headers that ask whether ``response`` changed."""
    validators = {}
    if etag := response.headers.get("ETag"):
        validators["If-None-Match"] = etag
    if modified := response.headers.get("Last-Modified"):
        validators["If-Modified-Since"] = modified
    return validators


def _headers(stored: str) -> CIMultiDictProxy[str]:
    return CIMultiDictProxy(CIMultiDict((name, value) for name, value in json.loads(stored)))
