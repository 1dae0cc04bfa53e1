"""HttpCache: keep responses on disk and replay them, to develop a spider offline; or revalidate
them with conditional requests, so a re-run fetches only what changed (``incremental``)."""

from __future__ import annotations

import hashlib
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
from eclaw.security.headers import sensitive_headers
from eclaw.security.redact import redact_url
from eclaw.sessions.auth import HostAuth
from eclaw.sessions.jars import CookieJars, jar_key
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
    fingerprint (method, canonical URL, body, cookie jar) and the request's
    credentials, and serve it on the next run without touching the network.

    One session's or one credential's page is never served to another: the key
    holds the request's jar (``meta["cookiejar"]``, a session's own) and a digest
    (never the value) of its credentials: its sensitive headers (``Authorization``,
    ``X-Api-Key``..., the ``sensitive_headers`` setting; not ``Proxy-Authorization``,
    which is the proxy's), the ``http_auth`` credential of its origin, and the cookies
    it brings (``meta["cookies"]``, a ``Cookie`` header beyond its jar's). Put it
    after (inside) ``Sessions`` in a middleware list, as ``defaults()`` does, so it
    sees each request's session.

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
        self._auth = HostAuth()
        self._sensitive = sensitive_headers() - {"proxy-authorization"}
        self._jars: CookieJars | None = None

    def __repr__(self) -> str:
        return f"HttpCache({str(self.dir)!r}, offline={self.offline})"

    @property
    def path(self) -> Path:
        return self.dir / "http-cache.sqlite"

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        self.dir = resolve_path(self.template, crawl.spider.name, crawl.settings.run_key)
        self._auth = HostAuth(crawl.settings.http_auth, crawl.spider.http_auth)
        self._sensitive = sensitive_headers(crawl.settings.sensitive_headers) - {"proxy-authorization"}
        self._jars = crawl.cookies
        try:
            await self._writer.start(self.path, _SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"http cache {self.path}: {exc}") from None

    async def close(self) -> None:
        await self._writer.stop()

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        key = self._key(request)
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

    def _key(self, request: Request) -> bytes:
        """The request's fingerprint (its jar included), with a digest of its credentials if it has any
        (the key of a request without is its fingerprint alone, as in caches written before)."""
        key = fingerprint(request)
        credentials = self._credentials(request)
        if not credentials:
            return key
        return hashlib.sha256(key + b"\n" + "\n".join(credentials).encode()).digest()[:20]

    def _credentials(self, request: Request) -> list[str]:
        """What tells the request's identity apart, beyond its jar (see the class's docstring)."""
        found = []
        for name, value in (request._headers or {}).items():
            lower = name.lower()
            if lower in self._sensitive:
                found.append(f"{lower}: {self._own_cookies(request, value) if lower == 'cookie' else value}")
        meta = request._meta
        if meta and meta.get("cookies"):
            found.append("cookies: " + json.dumps(meta["cookies"], sort_keys=True, default=str))
        auth = self._auth.header(request.url) if self._auth else None
        if auth:
            found.append(f"http_auth: {auth}")
        return sorted(found)

    def _own_cookies(self, request: Request, header: str) -> str:
        """The pairs of a ``Cookie`` header its jar does not hold (``Sessions`` puts the jar's there for
        other fetchers): the jar is keyed by its name, and its cookies change from page to page."""
        jar = self._jars.cookies(jar_key(request._meta), request.url) if self._jars is not None else {}
        pairs = (pair.strip().partition("=") for pair in header.split(";"))
        return "; ".join(sorted(f"{k}={v}" for k, _, v in pairs if k and jar.get(k) != v))

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
        url = redact_url(response.url)  # a recording is zipped into bug reports: no URL password in it
        await self._writer.run(self._save, (key, url, response.status, headers, response.body, time.time()))
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
