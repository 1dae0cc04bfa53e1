"""Choosing a fetcher per request: the crawl's downloader hands each request to one of several.

A request names its fetcher in ``meta["fetcher"]`` (``Request(..., render=True)`` is
``"browser"``); otherwise the spider's ``fetcher`` attribute decides, else ``"plain"``
(aiohttp). Each fetcher is a :class:`~eclaw.downloaders.base.Downloader` of its own,
opened the first time a request needs it and closed with the crawl.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from eclaw.downloaders.base import Downloader
from eclaw.downloaders.browser import BrowserFetcher
from eclaw.downloaders.plain import HttpDownloader
from eclaw.exceptions import ConfigError
from eclaw.http import Request, Response

if TYPE_CHECKING:
    from eclaw.settings import Settings
    from eclaw.spider import Spider

__all__ = ["FETCHERS", "Fetchers"]

FETCHERS: dict[str, Callable[[], Downloader]] = {"plain": HttpDownloader, "browser": BrowserFetcher}


class Fetchers:
    """The default downloader: routes each request to the fetcher it asks for (see the module)."""

    def __init__(self, factories: Mapping[str, Callable[[], Downloader]] | None = None) -> None:
        self._factories = dict(FETCHERS if factories is None else factories)
        self._open: dict[str, Downloader] = {}
        self._opening: dict[str, asyncio.Future[Downloader]] = {}
        self._default = "plain"

    async def open(self, spider: Spider, settings: Settings) -> None:
        self._spider, self._settings = spider, settings
        self._default = spider.fetcher or "plain"
        if self._default not in self._factories:
            raise ConfigError(f"spider {spider.name!r}: no fetcher {self._default!r} (known: {self.known()})")
        await self._fetcher(self._default)

    def known(self) -> str:
        return ", ".join(sorted(self._factories))

    async def fetch(self, request: Request) -> Response:
        name = _asked(request) or self._default
        fetcher = self._open.get(name)
        if fetcher is None:
            fetcher = await self._fetcher(name)
        return await fetcher.fetch(request)

    async def _fetcher(self, name: str) -> Downloader:
        """The fetcher ``name``, opened once even when many requests ask for it at the same time."""
        opening = self._opening.get(name)
        if opening is None:
            factory = self._factories.get(name)
            if factory is None:
                raise ConfigError(f"no fetcher {name!r} (known: {self.known()})")
            opening = self._opening[name] = asyncio.ensure_future(self._start(name, factory()))
        return await asyncio.shield(opening)

    async def _start(self, name: str, fetcher: Downloader) -> Downloader:
        await fetcher.open(self._spider, self._settings)
        self._open[name] = fetcher
        return fetcher

    async def close(self) -> None:
        for opening in self._opening.values():
            if not opening.done():
                opening.cancel()
        fetchers, self._open = list(self._open.values()), {}
        for fetcher in reversed(fetchers):
            await fetcher.close()


def _asked(request: Request) -> str:
    """The fetcher a request asks for ("" for none)."""
    meta = request._meta  # not request.meta: that would give every request a dict
    if not meta:
        return ""
    return str(meta.get("fetcher") or ("browser" if meta.get("render") else ""))
