"""The components of one crawl, opened in order and closed in reverse: the frontier, the fetcher,
then every middleware, pipeline and output that declares its part of the lifecycle
(:class:`~eclaw.contracts.Opens`, :class:`~eclaw.contracts.Closes`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from eclaw.contracts import Closes, CrawlContext, Opens
from eclaw.exceptions import EclawError
from eclaw.fetchers.base import Fetcher, Paced, UsesCookies, VetsHops
from eclaw.frontier.base import Frontier
from eclaw.frontier.hopcheck import hop_check
from eclaw.frontier.politeness import Pacing

__all__ = ["Lifecycle", "uninterruptible"]

logger = logging.getLogger(__name__)


class Lifecycle:
    """Opens a crawl's components; ``close`` closes only what was opened, in reverse order, and one
    failing close does not keep the others from closing."""

    def __init__(self, frontier: Frontier, fetcher: Fetcher, plugins: Iterable[object]) -> None:
        self.frontier = frontier
        self.fetcher = fetcher
        self.plugins = list(plugins)
        self._closers: list[tuple[Any, Callable[[], Awaitable[None]]]] = []

    async def open(self, crawl: CrawlContext, wake: Callable[[], None]) -> None:
        spider, settings = crawl.spider, crawl.settings
        await self.frontier.open(spider, settings, wake)
        self._closers.append((self.frontier, self.frontier.close))
        if crawl.cookies is not None and isinstance(self.fetcher, UsesCookies):  # declared by the fetcher
            self.fetcher.use_cookies(crawl.cookies)
        if isinstance(self.frontier, Pacing) and isinstance(self.fetcher, Paced):  # declared by both
            self.fetcher.pace(self.frontier)
        check = hop_check([self.frontier, *self.plugins])  # each redirect hop vetted as a new request
        if check is not None and isinstance(self.fetcher, VetsHops):
            self.fetcher.check_hops(check)
        await self.fetcher.open(spider, settings)
        self._closers.append((self.fetcher, self.fetcher.close))
        for plugin in self.plugins:
            if isinstance(plugin, Opens):  # declared by the plug-in
                await plugin.open(crawl)
            if isinstance(plugin, Closes):
                self._closers.append((plugin, plugin.close))

    async def close(self) -> None:
        while self._closers:
            part, close = self._closers.pop()
            try:
                await close()
            except Exception as exc:
                shown = None if isinstance(exc, EclawError) else exc  # our own errors are one clear line
                logger.error("error closing %r: %s", part, exc, exc_info=shown)


async def uninterruptible(coro: Any) -> None:
    """Run cleanup to its end even if the caller is cancelled again meanwhile;
    re-raise the cancellation afterwards."""
    task = asyncio.ensure_future(coro)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    task.result()
    if cancelled:
        raise asyncio.CancelledError
