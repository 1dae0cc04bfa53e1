"""Crawl budgets: end a crawl when this run has done enough (pages, items, seconds, errors), when
items stop coming, or before memory runs out; with ``--state`` that stop is a pause.

``max_pages`` is a promise (:class:`PageBudget`): the crawl's loop asks it before each download
it starts, so no download past the budget is ever started. The others are kept by a watcher like
the trace (:class:`Budgets`): it counts the crawl's events and calls ``crawl.stop(reason)``, and
what is under way then finishes."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time

from eclaw.contracts import CrawlContext, Handler
from eclaw.events import Event, ItemStored, RequestFailed
from eclaw.settings import Settings

__all__ = ["Budgets", "PageBudget", "rss_mb"]

logger = logging.getLogger(__name__)

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_mb() -> float:
    """This process's resident memory now, in MB (Linux ``/proc``; 0 where it cannot be read)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * _PAGE / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


class PageBudget:
    """``max_pages``: the downloads this run starts, at most ``limit`` (0: no limit).

    Every download counts, whatever comes of it: a retry is a download of its own (the server
    sees it), a redirect followed within a download is not. A slot is taken before the frontier
    is asked for a request, so two loops starting downloads at once never exceed the budget.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.started = 0

    def take(self) -> bool:
        """Reserve one download; False once ``limit`` are started (or reserved)."""
        if self.limit and self.started >= self.limit:
            return False
        self.started += 1
        return True

    def give_back(self) -> None:
        """The frontier had nothing for the slot taken: it was not used."""
        self.started -= 1

    @property
    def spent(self) -> bool:
        return bool(self.limit) and self.started >= self.limit


class Budgets:
    """Stops the crawl at the first budget it reaches; the finish reason names it."""

    def __init__(self, settings: Settings, *, every: float = 0.5) -> None:
        self._settings = settings
        self._every = every
        self._items = self._errors = 0
        self._last_item = time.monotonic()
        self._started = time.monotonic()
        self._crawl: CrawlContext | None = None
        self._stopped = False
        self._task: asyncio.Task[None] | None = None

    @staticmethod
    def wanted(settings: Settings) -> bool:
        return any(
            (
                settings.max_items,
                settings.max_seconds,
                settings.max_errors,
                settings.max_idle_items_seconds,
                settings.max_memory_mb,
            )
        )

    def subscriptions(self) -> list[tuple[type[Event], Handler]]:
        return [(ItemStored, self._stored), (RequestFailed, self._failed)]

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        self._started = self._last_item = time.monotonic()
        self._task = asyncio.create_task(self._watch())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _stored(self, event: ItemStored) -> None:
        self._items += 1
        self._last_item = time.monotonic()
        if self._items == self._settings.max_items:
            self._stop("max items", f"{self._items} items stored")

    def _failed(self, event: RequestFailed) -> None:
        if event.final:
            self._errors += 1
            if self._errors == self._settings.max_errors:
                self._stop("max errors", f"{self._errors} requests failed")

    async def _watch(self) -> None:
        """The budgets of time and memory, checked a few times a second."""
        settings = self._settings
        while True:
            now = time.monotonic()
            if settings.max_seconds and now - self._started >= settings.max_seconds:
                self._stop("max seconds", f"{now - self._started:.0f}s")
            elif settings.max_idle_items_seconds and now - self._last_item >= settings.max_idle_items_seconds:
                self._stop("no new items", f"no item for {now - self._last_item:.0f}s")
            elif settings.max_memory_mb and rss_mb() > settings.max_memory_mb:
                gc.collect()  # what a collection frees first: stop only if that is not enough
                if (used := rss_mb()) > settings.max_memory_mb:
                    self._stop("memory ceiling", f"{used:.0f} MB over {settings.max_memory_mb} MB")
            await asyncio.sleep(self._every)

    def _stop(self, reason: str, detail: str) -> None:
        assert self._crawl is not None
        if self._stopped:
            return
        self._stopped = True
        logger.warning("budget reached: %s (%s): stopping the crawl", reason, detail)
        self._crawl.stop(reason)
