"""The event queue of one crawl and its dispatch to handlers.

Internal: users subscribe through :meth:`eclaw.Engine.subscribe`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from eclaw.events import Event
from eclaw.stats import Stats

logger = logging.getLogger("eclaw.engine")

Handler = Callable[[Any], Awaitable[None]]
Accounting = Callable[[Any], None]


class EventBus:
    """Queues events and runs, for each, the subscribed handlers then the owner.

    ``owners`` are the components' handlers; ``accounting`` holds the
    bookkeeping of events whose owner does nothing else. An event type with no
    subscriber is *not watched*: :meth:`signal` then skips building a queue
    entry and runs its bookkeeping directly, so unobserved events cost nothing
    while the counts stay the same.
    """

    def __init__(
        self,
        subscribers: Callable[[type[Event]], tuple[Handler, ...]],
        owners: dict[type[Event], Handler],
        accounting: dict[type[Event], Accounting],
        stats: Stats,
        wake: Callable[[], None],
        crawl: Any = None,
    ) -> None:
        self._crawl = crawl
        self._subscribers = subscribers
        self._owners = owners
        self._accounting = accounting
        self._stats = stats
        self._wake = wake
        self._queue: deque[Event] = deque()
        self._plans: dict[type[Event], tuple[Handler, ...]] = {}
        self.emitted = 0
        # Subscriptions are frozen once a crawl exists, so this never changes.
        self.watched = {kind: bool(subscribers(kind)) for kind in (*owners, *accounting)}

    def __len__(self) -> int:
        return len(self._queue)

    def emit(self, event: Event) -> None:
        """Queue ``event`` for dispatch (it is given its ``crawl``)."""
        if event.crawl is None:
            object.__setattr__(event, "crawl", self._crawl)  # frozen for handlers; set once, here
        self._queue.append(event)
        self.emitted += 1
        self._wake()

    def signal(self, event: Event) -> None:
        """Dispatch ``event`` if anyone listens; otherwise just do its bookkeeping."""
        kind = type(event)
        if self.watched[kind]:
            self.emit(event)
        else:
            self._accounting[kind](event)

    async def drain(self) -> None:
        """Dispatch every queued event (and those its handlers emit)."""
        queue = self._queue
        while queue:
            event = queue.popleft()
            kind = type(event)
            plan = self._plans.get(kind)
            if plan is None:
                plan = self._plans[kind] = self._plan(kind)
            for handler in plan:
                try:
                    await handler(event)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self.failed(handler, event, exc)

    async def notify(self, event: Event) -> None:
        """Run the subscribers of ``event`` at once, outside the queue (for the last event)."""
        if event.crawl is None:
            object.__setattr__(event, "crawl", self._crawl)
        for handler in self._subscribers(type(event)):
            try:
                await handler(event)
            except Exception as exc:
                self.failed(handler, event, exc)

    def failed(self, handler: Any, event: Event, exc: Exception) -> None:
        """A handler raised: log it with its traceback, count it, carry on."""
        self._stats.handler_errors += 1
        name = getattr(handler, "__qualname__", repr(handler))
        logger.error(
            "handler %s failed on %s: %s: %s", name, type(event).__name__, type(exc).__name__, exc, exc_info=exc
        )

    def _plan(self, kind: type[Event]) -> tuple[Handler, ...]:
        owner = self._owners.get(kind)
        if owner is None and kind in self._accounting:
            owner = _as_handler(self._accounting[kind])
        return self._subscribers(kind) + ((owner,) if owner else ())


def _as_handler(accounting: Accounting) -> Handler:
    async def handler(event: Any) -> None:
        accounting(event)

    return handler
