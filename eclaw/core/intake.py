"""The owner of ``RequestGenerated``: new requests, a page's links at a time, into the frontier."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from eclaw.core.activity import Activity
from eclaw.core.bus import EventBus
from eclaw.core.journal import Journal
from eclaw.events import RequestDropped, RequestFailed
from eclaw.exceptions import EclawError
from eclaw.frontier.base import FORWARDED, Frontier, TakesBack
from eclaw.http import Request
from eclaw.stats import Stats

__all__ = ["Intake"]

logger = logging.getLogger(__name__)
_NOT_DROPPED = (None, FORWARDED)  # queued here, or by the process whose part of the crawl it is


class Intake:
    """Counts new requests, gives them ids, hands them to the frontier, publishes what it refused
    (``RequestDropped``), then, when it queued any, starts what downloads it can."""

    def __init__(
        self,
        frontier: Frontier,
        bus: EventBus,
        stats: Stats,
        journal: Journal,
        activity: Activity,
        pump: Callable[[], Awaitable[None]],
    ) -> None:
        self._frontier = frontier
        self._bus = bus
        self._stats = stats
        self._journal = journal
        self._activity = activity
        self._pump = pump

    async def generated(self, requests: list[Request], parent: Any) -> None:
        """The owner's batch: requests yielded by a callback (or start requests, or a handler)."""
        self._stats.requests_generated += len(requests)
        await self.admit(requests, again=False, parent=parent)

    async def requeue(self, requests: list[Request]) -> None:
        """Requests seen before: a retry whose delay is over."""
        await self.admit(requests, again=True)

    async def resumed(self, requests: list[Request]) -> None:
        """A resumed crawl's saved requests: checked and counted before the pause, in the dupe filter read
        back, so they go back as they were (a request's ``dont_filter`` stays its own: a redirect of one
        to a page seen before is still a duplicate)."""
        frontier = self._frontier
        if not isinstance(frontier, TakesBack):
            for request in requests:
                request.dont_filter = True  # past the checks it passed before
            await self.admit(requests, again=True)
            return
        frontier.take_back(requests)
        self._activity.admitted += len(requests)
        await self._pump()

    async def admit(self, requests: list[Request], *, again: bool, parent: Any = None) -> None:
        """Into the frontier (each with its id); the drops published with ``parent``, the response the
        requests come from."""
        try:
            reasons = await self._frontier.enqueue(requests)
        except Exception as exc:  # a broken frontier: each request fails with the reason, the crawl goes on
            shown = None if isinstance(exc, EclawError) else exc
            logger.error("frontier failed on %d requests: %s", len(requests), exc, exc_info=shown)
            for request in requests:
                await self._bus.publish(RequestFailed(request=request, reason="frontier error", error=exc))
            return
        self._journal.admitted(requests, reasons, again=again)
        queued = reasons.count(None)
        self._activity.admitted += queued
        if queued < len(reasons):
            dropped = [(r, why) for r, why in zip(requests, reasons, strict=True) if why not in _NOT_DROPPED]
            if dropped:
                await self._bus.publish_batch(RequestDropped, dropped, parent)
        if queued:  # nothing new queued (a page's links all seen): the frontier is as the last pump left it
            await self._pump()
