"""The parts of one crawl, opened in order and closed in reverse: the frontier, the downloader,
then every middleware, pipeline and output that declares its part of the lifecycle
(:class:`~eclaw.contracts.Opens`, :class:`~eclaw.contracts.Closes`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from eclaw.contracts import Closes, CrawlContext, Opens
from eclaw.downloaders.base import Downloader, Paced, UsesCookies, VetsHops
from eclaw.exceptions import EclawError
from eclaw.frontier.base import Scheduler
from eclaw.frontier.hopcheck import hop_check
from eclaw.frontier.politeness import Pacing

__all__ = ["Parts", "uninterruptible"]

logger = logging.getLogger(__name__)


class Parts:
    """Opens a crawl's parts; ``close`` closes only what was opened, in reverse order, and one
    failing close does not keep the others from closing."""

    def __init__(self, scheduler: Scheduler, downloader: Downloader, plugins: Iterable[object]) -> None:
        self.scheduler = scheduler
        self.downloader = downloader
        self.plugins = list(plugins)
        self._closers: list[tuple[Any, Callable[[], Awaitable[None]]]] = []

    async def open(self, crawl: CrawlContext, wake: Callable[[], None]) -> None:
        spider, settings = crawl.spider, crawl.settings
        await self.scheduler.open(spider, settings, wake)
        self._closers.append((self.scheduler, self.scheduler.close))
        if crawl.cookies is not None and isinstance(self.downloader, UsesCookies):  # declared by the downloader
            self.downloader.use_cookies(crawl.cookies)
        if isinstance(self.scheduler, Pacing) and isinstance(self.downloader, Paced):  # declared by both
            self.downloader.pace(self.scheduler)
        check = hop_check([self.scheduler, *self.plugins])  # each redirect hop vetted as a new request
        if check is not None and isinstance(self.downloader, VetsHops):
            self.downloader.check_hops(check)
        await self.downloader.open(spider, settings)
        self._closers.append((self.downloader, self.downloader.close))
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
