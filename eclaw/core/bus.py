"""The event bus of one crawl: for each event type, its subscribers, then its owner.

Internal: users subscribe through :meth:`eclaw.Engine.subscribe`. The crawl's
components register as the owners of their events when the crawl is built
(:meth:`EventBus.own`); the subscribers (the engine's, and the crawl's own
observers: trace, metrics) are fixed by then. :meth:`EventBus.publish` runs
an event's subscribers in priority order and then its owner, in the task that
publishes it, so there is one path per event whether anyone subscribed or not:
with no subscriber the owner is called at once.

Two kinds come a page at a time, the links a callback yields and the drops the
frontier answers them with: :meth:`EventBus.publish_batch` hands the owner the
whole batch, and builds the events one by one only for subscribers. A watcher that
takes such a kind a batch at a time (:meth:`EventBus.subscribe_batches`: the trace)
gets the batch as the owner does, and no event is built for it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from eclaw.contracts import BatchHandler, Handler
from eclaw.events import Event
from eclaw.stats import Stats

__all__ = ["Batched", "EventBus", "Handler"]

logger = logging.getLogger(__name__)
_CRAWL = Event.__dict__["crawl"]  # the slot's descriptor: sets a frozen event's crawl without object.__setattr__

E = TypeVar("E", bound=Event)
P = TypeVar("P")
Subscribers = Callable[[type[Event]], tuple[Handler, ...]]


@dataclass(frozen=True, slots=True)
class Batched(Generic[E, P]):
    """The owner of a kind published a batch at a time: ``owner(payloads, context)`` takes the whole
    batch; ``make(payload, context)`` builds one event for subscribers; ``unpack`` is its inverse;
    ``first(payloads)``, if given, runs before anyone sees the batch (the crawl gives requests their ids)."""

    owner: Callable[[list[P], Any], Awaitable[None]]
    make: Callable[[P, Any], E]
    unpack: Callable[[E], tuple[P, Any]]
    first: Callable[[Sequence[P]], None] | None = None


class EventBus:
    """Runs each event's subscribers (logged and counted when they fail), then its owner."""

    def __init__(self, subscribers: Subscribers, stats: Stats, crawl: Any) -> None:
        self._subscribers = subscribers
        self._stats = stats
        self._crawl = crawl
        self._owners: dict[type[Event], Handler] = {}
        self._batched: dict[type[Event], Batched[Any, Any]] = {}
        self._plans: dict[type[Event], tuple[tuple[Handler, bool], ...]] = {}
        self._takers: dict[type[Event], list[BatchHandler]] = {}  # subscribers a batch at a time
        self._direct: dict[type[Event], tuple[Handler, bool]] = {}  # kinds with an owner and no subscriber

    def own(self, kind: type[E], owner: Callable[[E], Awaitable[None] | None]) -> None:
        """Make ``owner`` the component that acts on ``kind`` (once, before the crawl runs)."""
        if kind in self._owners or kind in self._batched:
            raise RuntimeError(f"{kind.__name__} already has an owner")
        self._owners[kind] = owner

    def own_batched(self, kind: type[E], batched: Batched[E, Any]) -> None:
        """Like :meth:`own`, for a kind published a batch at a time."""
        if kind in self._owners or kind in self._batched:
            raise RuntimeError(f"{kind.__name__} already has an owner")
        self._batched[kind] = batched

    def subscribe_batches(self, kind: type[Event], handler: BatchHandler) -> None:
        """Call ``handler(payloads, context)`` once per batch of ``kind`` (owned with :meth:`own_batched`),
        before the events' subscribers."""
        if kind not in self._batched:
            raise RuntimeError(f"{kind.__name__} is not published in batches")
        self._takers.setdefault(kind, []).append(handler)

    def publish(self, event: Event) -> Awaitable[None]:
        """Run ``event``'s subscribers, then its owner, here and now (await what it returns). An event
        whose only handler is its owner is the owner's call itself: no frame of the bus stays between
        the publisher and the owner (a download's whole fetch runs in its owner, and each time its task
        resumes, it passes through every frame above)."""
        direct = self._direct.get(type(event))
        if direct is not None:
            if event.crawl is None:
                _CRAWL.__set__(event, self._crawl)
            owner, is_async = direct
            if is_async:
                return owner(event)  # type: ignore[return-value]
            owner(event)
            return _DONE
        return self._publish(event)

    async def _publish(self, event: Event) -> None:
        kind = type(event)
        batched = self._batched.get(kind)
        if batched is not None:
            payload, context = batched.unpack(event)
            await self.publish_batch(kind, [payload], context)
            return
        await self._run(self._plan(kind), event)

    async def publish_batch(self, kind: type[Event], payloads: Sequence[Any], context: Any = None) -> None:
        """Publish a batch of ``kind``: each as an event to the subscribers, all at once to the owner."""
        if not payloads:
            return
        batched = self._batched[kind]
        if batched.first is not None:
            batched.first(payloads)
        if self._takers:
            for taker in self._takers.get(kind, ()):
                try:
                    taker(payloads, context)
                except Exception as exc:
                    self.failed(taker, kind, exc)
        plan = self._plan(kind)
        if plan:
            make = batched.make
            if any(is_async for _, is_async in plan):
                for payload in payloads:
                    await self._run(plan, make(payload, context))
            else:  # plain functions (the trace, the metrics): no coroutine per link
                self._run_sync(plan, (make(payload, context) for payload in payloads))
        await batched.owner(list(payloads), context)

    async def notify(self, event: Event) -> None:
        """Publish a notification (an event with no owner), outside any request's task."""
        await self._run(self._plan(type(event)), event)

    async def _run(self, plan: tuple[tuple[Handler, bool], ...], event: Event) -> None:
        if event.crawl is None:
            object.__setattr__(event, "crawl", self._crawl)  # frozen for handlers; set once, here
        for handler, is_async in plan:
            try:
                if is_async:
                    await handler(event)  # type: ignore[misc]
                else:
                    handler(event)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if handler is self._owners.get(type(event)):
                    raise  # an owner's failure is the owner's to handle: it is not a subscriber's bug
                self.failed(handler, type(event), exc)

    def _run_sync(self, plan: tuple[tuple[Handler, bool], ...], events: Iterable[Event]) -> None:
        """:meth:`_run` for a batch's events when every handler is a plain function (none is an owner)."""
        set_crawl, crawl = _CRAWL.__set__, self._crawl
        for event in events:
            set_crawl(event, crawl)  # a batch's events are new: none has its crawl yet
            for handler, _ in plan:
                try:
                    handler(event)
                except Exception as exc:
                    self.failed(handler, type(event), exc)

    def failed(self, handler: Any, kind: type[Event], exc: Exception) -> None:
        """A subscriber raised on an event of ``kind``: log it with its traceback, count it, carry on."""
        self._stats.handler_errors += 1
        name = getattr(handler, "__qualname__", repr(handler))
        logger.error("handler %s failed on %s: %s: %s", name, kind.__name__, type(exc).__name__, exc, exc_info=exc)

    def _plan(self, kind: type[Event]) -> tuple[tuple[Handler, bool], ...]:
        plan = self._plans.get(kind)
        if plan is None:
            handlers = list(self._subscribers(kind))
            owner = self._owners.get(kind)
            if owner is not None:
                handlers.append(owner)
            plan = self._plans[kind] = tuple((h, _is_async(h)) for h in handlers)
            if len(plan) == 1 and owner is not None and kind not in self._batched:
                self._direct[kind] = plan[0]
        return plan


class _Done:
    """What :meth:`EventBus.publish` returns when a plain function owned the event: done already."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        yield from ()


_DONE = _Done()


def _is_async(handler: Handler) -> bool:
    call = getattr(handler, "__call__", None)  # noqa: B004 - an object with an async __call__ counts
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)
