"""Feeding a spider's start requests into the crawl, with back-pressure when the frontier is full."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from eclaw.core.bus import EventBus
from eclaw.events import RequestGenerated
from eclaw.exceptions import ConfigError, EclawError
from eclaw.frontier.base import Frontier
from eclaw.http import Request
from eclaw.spider import Spider, check_start_url, iterate_start_requests
from eclaw.stats import Stats

__all__ = ["StartFeeder"]

logger = logging.getLogger(__name__)


class StartFeeder:
    """Takes ``start_requests()`` lazily: it runs at most ``high_water`` requests ahead of the crawl.
    It waits once the frontier holds more than that and it fed that many more than the frontier
    handed out since it began, until either is down to half: the links of the first pages, however
    many, do not hold back the start requests still to come (a long list of hosts is not starved).
    ``done`` once it ended; ``exhausted`` if every start request was taken (a resumed crawl then
    skips them); ``error`` what it failed with (raised by the crawl at the end)."""

    def __init__(
        self,
        spider: Spider,
        frontier: Frontier,
        bus: EventBus,
        *,
        high_water: int,
        stopping: Callable[[], bool],
        stop: Callable[[str], None],
        wake: Callable[[], None],
        stats: Stats,
    ) -> None:
        self._spider = spider
        self._frontier = frontier
        self._bus = bus
        self._high_water = high_water
        self._stopping = stopping
        self._stop = stop
        self._wake = wake
        self._stats = stats  # requests_scheduled: those the frontier handed out so far (a resumed crawl's too)
        self._fed = self._handed_before = 0
        self.done = False
        self.exhausted = False
        self.error: BaseException | None = None
        self.low_water = -1
        self.drained = asyncio.Event()

    def skip(self) -> None:
        """The start requests were all taken before (a resumed crawl, a seeded shared frontier)."""
        self.done = self.exhausted = True

    async def run(self) -> None:
        self._handed_before = self._stats.requests_scheduled
        try:
            async for request in iterate_start_requests(self._spider.start_requests()):
                if self._stopping():
                    break
                if not isinstance(request, Request):
                    raise ConfigError(f"start_requests() yielded {request!r}, not a Request")
                check_start_url(request.url)
                await self._bus.publish_batch(RequestGenerated, [request])
                self._fed += 1
                if self._frontier.pending() > self._high_water and self._lead() > self._high_water:
                    await self._wait_for_room()
            else:
                self.exhausted = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            message = f"start_requests() of spider {self._spider.name!r} failed: {type(exc).__name__}: {exc}"
            logger.debug(message)  # raised to the caller by the crawl: one message, not two
            self.error = exc if isinstance(exc, EclawError) else ConfigError(message)
            self._stop("start_requests error")
        finally:
            self.done = True
            self._wake()

    async def _wait_for_room(self) -> None:
        self.low_water = self._high_water // 2
        self.drained.clear()
        await self.drained.wait()

    def room(self) -> None:
        """The crawl's loop calls this when the frontier may have drained or handed out more (or the
        crawl stops)."""
        if self._stopping() or self._frontier.pending() <= self.low_water or self._lead() <= self.low_water:
            self.drained.set()

    def _lead(self) -> int:
        """How many more requests this fed than the frontier handed out since."""
        return self._fed - (self._stats.requests_scheduled - self._handed_before)
