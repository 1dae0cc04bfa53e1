"""Choosing a fetcher per request: the crawl's fetcher hands each request to one of several.

A request names its fetcher in ``meta["fetcher"]`` (``Request(..., render=True)`` is
``"browser"``); otherwise its host's fetcher decides (the ``fetchers`` setting, or
:meth:`Fetchers.use` while the crawl runs), then the spider's ``fetcher`` attribute,
else ``"plain"`` (aiohttp). Each fetcher is a :class:`~eclaw.fetchers.base.Fetcher`
of its own, opened the first time a request needs it and closed with the crawl. Fetchers are
``eclaw.fetchers`` entry points: a plug-in package adds one by name (docs/plugins.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from eclaw.exceptions import ConfigError
from eclaw.fetchers.base import Fetcher, Paced, UsesCookies, VetsHops
from eclaw.http import Request, Response
from eclaw.http.urls import url_host
from eclaw.outputs.registry import FETCHERS as PLUGINS

if TYPE_CHECKING:
    from eclaw.contracts import HopCheck
    from eclaw.frontier.politeness import Pacing
    from eclaw.sessions.jars import CookieJars
    from eclaw.settings import Settings
    from eclaw.spider import Spider

__all__ = ["FETCHERS", "Fetchers", "fetcher_of", "host_fetchers"]


class _Registered(Mapping[str, Callable[[], Fetcher]]):
    """The fetchers registered as ``eclaw.fetchers`` entry points (eclaw's own: plain, impersonate,
    browser), each loaded the first time a crawl asks for it (the browser's modules are not imported
    at every start-up)."""

    def __getitem__(self, name: str) -> Callable[[], Fetcher]:
        if name not in PLUGINS:
            raise KeyError(name)
        factory: Callable[[], Fetcher] = PLUGINS.get(name)
        return factory

    def __iter__(self) -> Iterator[str]:
        return iter(PLUGINS.names())

    def __len__(self) -> int:
        return len(PLUGINS.names())


FETCHERS: Mapping[str, Callable[[], Fetcher]] = _Registered()


class Fetchers:
    """The default fetcher: routes each request to the fetcher it asks for (see the module)."""

    def __init__(self, factories: Mapping[str, Callable[[], Fetcher]] | None = None) -> None:
        self._factories = FETCHERS if factories is None else dict(factories)
        self._open: dict[str, Fetcher] = {}
        self._opening: dict[str, asyncio.Future[Fetcher]] = {}
        self._default = "plain"
        self._hosts: dict[str, str] = {}  # host -> fetcher, for requests that name none
        self._jars: CookieJars | None = None
        self._pacing: Pacing | None = None
        self._check: HopCheck | None = None

    def use_cookies(self, jars: CookieJars) -> None:
        """The crawl's cookie jars, for each fetcher that keeps cookies itself."""
        self._jars = jars

    def pace(self, pacing: Pacing) -> None:
        """The frontier's pacing, for each fetcher that reports when it sends."""
        self._pacing = pacing

    def check_hops(self, check: HopCheck) -> None:
        """The crawl's check of each redirect hop, for each fetcher that follows redirects itself."""
        self._check = check

    async def open(self, spider: Spider, settings: Settings) -> None:
        self._spider, self._settings = spider, settings
        self._default = spider.fetcher or "plain"
        if self._default not in self._factories:
            raise ConfigError(f"spider {spider.name!r}: no fetcher {self._default!r} (known: {self.known()})")
        for host, name in host_fetchers(settings.fetchers).items():
            if name not in self._factories:
                raise ConfigError(f"setting 'fetchers': no fetcher {name!r} for {host} (known: {self.known()})")
            self._hosts[host] = name
        try:  # a missing extra or a bad option fails the crawl's start, not its pages
            for name in dict.fromkeys([self._default, *self._hosts.values()]):
                await self._fetcher(name)
        except BaseException:
            await self.close()  # the crawl closes only what opened: not us
            raise

    def use(self, host: str, fetcher: str) -> None:
        """Fetch ``host`` (and its subdomains) with ``fetcher`` from now on, for requests that name none.

        Callable while the crawl runs (a host moved to a stronger fetcher after a ban): the
        fetcher opens on the host's next request.

        Raises:
            ConfigError: ``fetcher`` is not one of :meth:`known`.
        """
        if fetcher not in self._factories:
            raise ConfigError(f"no fetcher {fetcher!r} (known: {self.known()})")
        self._hosts[host.strip().lower()] = fetcher

    def known(self) -> str:
        return ", ".join(sorted(self._factories))

    async def fetch(self, request: Request) -> Response:
        name = _asked(request)
        if not name:
            name = fetcher_of(self._hosts, url_host(request.url), self._default) if self._hosts else self._default
        fetcher = self._open.get(name)
        if fetcher is None:
            fetcher = await self._fetcher(name)
        return await fetcher.fetch(request)

    async def _fetcher(self, name: str) -> Fetcher:
        """The fetcher ``name``, opened once even when many requests ask for it at the same time."""
        opening = self._opening.get(name)
        if opening is None:
            factory = self._factories.get(name)
            if factory is None:
                raise ConfigError(f"no fetcher {name!r} (known: {self.known()})")
            opening = self._opening[name] = asyncio.ensure_future(self._start(name, factory()))
        return await asyncio.shield(opening)

    async def _start(self, name: str, fetcher: Fetcher) -> Fetcher:
        if self._jars is not None and isinstance(fetcher, UsesCookies):  # declared by the fetcher
            fetcher.use_cookies(self._jars)
        if self._pacing is not None and isinstance(fetcher, Paced):
            fetcher.pace(self._pacing)
        if self._check is not None and isinstance(fetcher, VetsHops):
            fetcher.check_hops(self._check)
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


def fetcher_of(hosts: Mapping[str, str], host: str, default: str) -> str:
    """The fetcher ``hosts`` gives ``host``, or the nearest domain above it, else ``default``."""
    while host:
        name = hosts.get(host)
        if name is not None:
            return name
        host = host.partition(".")[2]
    return default


def _asked(request: Request) -> str:
    """The fetcher a request asks for ("" for none)."""
    meta = request._meta  # not request.meta: that would give every request a dict
    if not meta:
        return ""
    return str(meta.get("fetcher") or ("browser" if meta.get("render") else ""))


def host_fetchers(text: str) -> dict[str, str]:
    """The ``fetchers`` setting parsed: ``"a.example=impersonate, b.example=browser"`` -> host: fetcher.

    Raises:
        ConfigError: a pair that is not ``host=fetcher``, a URL for a host, or a host given twice.
    """
    pairs: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        host, equals, name = (piece.strip() for piece in part.partition("="))
        host = host.lower().strip("[]")  # an IPv6 address may come in brackets, as in a URL
        if not equals or not host or not name:
            raise ConfigError(f"setting 'fetchers': {part.strip()!r} is not host=fetcher")
        if "/" in host or host.count(":") == 1:
            raise ConfigError(f"setting 'fetchers': {host!r} must be a host name, not a URL or host:port")
        if pairs.get(host, name) != name:
            raise ConfigError(f"setting 'fetchers': {host} is given two fetchers ({pairs[host]}, {name})")
        pairs[host] = name
    return pairs
