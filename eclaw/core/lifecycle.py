"""The pluggable parts of one crawl, opened in order and closed in reverse."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from eclaw.exceptions import ConfigError, EclawError

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext, Middleware
    from eclaw.core.pipeline import ItemPipeline
    from eclaw.downloaders.plain import Downloader
    from eclaw.frontier.scheduler import Scheduler

__all__ = ["Components", "iterate", "uninterruptible"]

logger = logging.getLogger("eclaw.engine")


class Components:
    """Scheduler, downloader, middlewares (those with ``open``/``close``) and
    pipelines of a crawl. ``close`` closes only what was opened, in reverse
    order, and one failing close does not keep the others from closing."""

    def __init__(
        self,
        scheduler: Scheduler,
        downloader: Downloader,
        middlewares: list[Middleware],
        pipelines: list[ItemPipeline],
    ) -> None:
        self.scheduler = scheduler
        self.downloader = downloader
        self.middlewares = middlewares
        self.pipelines = pipelines
        self._closers: list[tuple[Any, Callable[[], Awaitable[None]]]] = []

    async def open(self, crawl: CrawlContext, wake: Callable[[], None]) -> None:
        spider, settings = crawl.spider, crawl.settings
        await self.scheduler.open(spider, settings, wake)
        self._closers.append((self.scheduler, self.scheduler.close))
        await self.downloader.open(spider, settings)
        self._closers.append((self.downloader, self.downloader.close))
        for middleware in self.middlewares:
            if hasattr(middleware, "open"):
                await middleware.open(crawl)
            if hasattr(middleware, "close"):
                self._closers.append((middleware, middleware.close))
        for pipeline in self.pipelines:
            if hasattr(pipeline, "attach"):  # sinks that count into the stats
                pipeline.attach(crawl)
            await pipeline.open(spider)
            self._closers.append((pipeline, functools.partial(pipeline.close, spider)))

    async def close(self) -> None:
        while self._closers:
            component, close = self._closers.pop()
            try:
                await close()
            except Exception as exc:
                shown = None if isinstance(exc, EclawError) else exc  # our own errors are one clear line
                logger.error("error closing %r: %s", component, exc, exc_info=shown)


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


async def iterate(produced: Any) -> AsyncIterator[Any]:
    """The values of what ``start_requests()`` returned: an (async) iterable, or an awaitable of one."""
    if inspect.isawaitable(produced):
        produced = await produced
    if hasattr(produced, "__aiter__"):
        async for value in produced:
            yield value
    elif isinstance(produced, Iterable):
        for value in produced:
            yield value
    elif produced is not None:
        raise ConfigError(f"start_requests() returned {type(produced).__name__}, not requests")
