"""One download at a time through a spider's middlewares and settings, without a crawl: what
``eclaw fetch``, ``eclaw parse`` and ``eclaw shell`` run on.

The middlewares are the ones a crawl of the spider would get (the defaults of its
settings, then the spider's own), chained with :func:`eclaw.core.fetch.chain`, and
the fetcher is the crawl's default (:class:`~eclaw.fetchers.router.Fetchers`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from eclaw.contracts import Closes, Middleware, Opens
from eclaw.core.components import per_crawl
from eclaw.core.fetch import chain
from eclaw.events import Event
from eclaw.exceptions import ConfigError, HttpError, RetryRequest
from eclaw.fetchers.base import Fetcher, UsesCookies
from eclaw.fetchers.router import Fetchers
from eclaw.http import Request, Response
from eclaw.middlewares import defaults
from eclaw.observe.snapshots import Snapshots
from eclaw.security.redact import Redactor
from eclaw.sessions.jars import CookieJars
from eclaw.settings import Settings
from eclaw.spider import Spider, make_spider
from eclaw.stats import Stats

__all__ = ["Session", "saved_page"]

logger = logging.getLogger(__name__)


class DefaultSpider(Spider):
    """The spider of a session given none: default settings and middlewares."""

    name = "eclaw"


class Session:
    """A spider's middlewares and fetcher, opened once, for one download at a time.

    Also the :class:`~eclaw.contracts.CrawlContext` those middlewares see: stats are
    counted, delays are ignored (one download at a time needs no politeness slot),
    ``stop`` is noted. Use it as an async context manager::

        async with Session(MySpider()) as session:
            response = await session.fetch(Request(url))

    Args:
        spider: the spider (``None``: a default one).
        settings: base settings; the spider's ``custom_settings`` apply on top, then ``overrides``.
        overrides: settings that win (the CLI's ``-s``).
        fetcher: the fetcher (default: the crawl's, :class:`~eclaw.fetchers.router.Fetchers`).
        middlewares: the chain (default: what a crawl of the spider gets).
        check_status: a status >= 400 the spider does not handle raises
            :class:`~eclaw.exceptions.HttpError`, as in a crawl (its callback would not run);
            otherwise every response is returned, whatever its status.
    """

    def __init__(
        self,
        spider: Spider | None = None,
        settings: Settings | None = None,
        *,
        overrides: Mapping[str, Any] | None = None,
        fetcher: Fetcher | None = None,
        middlewares: list[Middleware] | None = None,
        check_status: bool = False,
    ) -> None:
        self.spider = spider if spider is not None else DefaultSpider()
        base = settings if settings is not None else Settings()
        try:
            self.settings = base.replace(self.spider.custom_settings).replace(dict(overrides or {}))
        except ConfigError as exc:
            raise ConfigError(f"spider {self.spider.name!r}: {exc}") from None
        self.stats = Stats(spider=self.spider.name)
        self.run_id = uuid.uuid4().hex[:12]
        self.snapshots: Snapshots | None = None  # a one-off download saves none
        self.redactor = Redactor()  # what a plug-in writes passes it
        self.cookies = CookieJars() if self.settings.cookies else None  # kept from one fetch() to the next
        self.stopped = ""  # why a middleware asked to stop, if one did
        self.sent: Request | None = None  # the last request as the fetcher got it (after the middlewares)
        if middlewares is None:
            middlewares = [*defaults(self.settings), *per_crawl(self.spider.middlewares, "middleware")]
        self.middlewares = middlewares
        self._fetcher = fetcher if fetcher is not None else Fetchers()
        self.check_status = check_status
        self._handled = frozenset(self.spider.handle_httpstatus_list)
        self._fetch = chain(middlewares, self._download)
        self._closers: list[Closes] = []
        self._fetcher_open = False

    @classmethod
    def of(
        cls,
        spider: type[Spider] | None,
        args: Mapping[str, Any],
        overrides: Mapping[str, Any],
        *,
        check_status: bool = False,
    ) -> Session:
        """A session for ``spider`` (a class, built with ``args``) on the environment's settings (``ECLAW_*``)."""
        instance = make_spider(spider if spider is not None else DefaultSpider, args)
        return cls(instance, Settings.from_env(), overrides=overrides, check_status=check_status)

    def use_cookies(self, saved: Mapping[str, Any]) -> None:
        """Start from saved cookie jars (what :meth:`CookieJars.checkpoint` returns): a login kept
        by a paused crawl's ``--state``, or a cookie file (:mod:`eclaw.devloop.cookies`)."""
        if self.cookies is None:
            raise ConfigError("saved cookies given, but the cookies setting is off")
        self.cookies.restore(dict(saved))

    # -- what the middlewares see (CrawlContext) ------------------------------------

    @property
    def queued(self) -> int:
        return 0

    @property
    def in_flight(self) -> int:
        return 0

    def set_delay(self, host: str | None, seconds: float, *, floor: bool = False) -> None:
        """One download at a time: nothing to space out."""

    def stop(self, reason: str) -> None:
        self.stopped = reason

    def emit(self, event: Any) -> None:
        logger.debug("no crawl to publish %r to", event)

    async def publish(self, event: Event) -> None:
        logger.debug("no crawl to publish %r to", event)

    def dead_letter(self, output: object, items: list[Any], error: BaseException) -> None:
        logger.warning("%d items %r could not write were not kept: %s", len(items), output, error)

    # -- lifecycle ------------------------------------------------------------------

    async def __aenter__(self) -> Session:
        self.spider.crawl = self  # self.settings in the spider's callbacks
        try:
            if self.cookies is not None and isinstance(self._fetcher, UsesCookies):
                self._fetcher.use_cookies(self.cookies)
            await self._fetcher.open(self.spider, self.settings)
            self._fetcher_open = True
            for middleware in self.middlewares:
                if isinstance(middleware, Opens):
                    await middleware.open(self)
                if isinstance(middleware, Closes):
                    self._closers.append(middleware)
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        while self._closers:
            await self._closers.pop().close()
        if self._fetcher_open:
            self._fetcher_open = False
            await self._fetcher.close()
        self.spider.crawl = None

    # -- downloads ------------------------------------------------------------------

    async def fetch(self, request: Request) -> Response:
        """Download ``request`` through the middlewares, waiting out the retries they ask for."""
        while True:
            try:
                return await self._fetch(request)
            except RetryRequest as exc:
                logger.info("retrying %s in %.1fs (%s)", request.url, exc.delay, exc.reason)
                await asyncio.sleep(exc.delay)
                request = exc.request

    async def _download(self, request: Request) -> Response:
        self.sent = request
        response = await self._fetcher.fetch(request)
        if self.check_status and response.status >= 400 and response.status not in self._handled:
            meta = request.meta
            if not meta.get("handle_httpstatus_all") and response.status not in meta.get("handle_httpstatus_list", ()):
                raise HttpError(response)
        return response


def saved_page(path: str | Path, url: str = "", *, status: int = 200, content_type: str = "") -> Response:
    """A response made of a saved file, as if ``url`` had answered it (for a test, or ``eclaw shell FILE``).

    Without ``url`` it is the file's own ``file://`` URL; the content type comes from the
    extension (``.html``, ``.json``, ``.xml``, else ``text/plain``) unless given.
    """
    file = Path(path)
    try:
        body = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {file}: {exc.strerror}") from None
    kinds = {".json": "application/json", ".xml": "text/xml", ".html": "text/html", ".htm": "text/html"}
    kind = content_type or kinds.get(file.suffix.lower(), "text/plain")
    address = url or file.resolve().as_uri()
    return Response(address, status=status, headers={"Content-Type": kind}, body=body, request=Request(address))
