"""A request's books, from its start to its end. The intake owns ``RequestGenerated``: it counts new
requests, gives them ids (the one place ids are given; with ``--state``, by the saved state's
:class:`Journal`) and hands them to the frontier. :class:`Accounting` owns the terminal events:
every request ends here exactly once (parsed, failed or dropped), every item as stored or dropped;
the stats, the files of record and the saved state are told. A shared frontier is told a request
is done once the items it yielded are stored. A final failure on an HTTP status leaves its
evidence here (a snapshot of the server's answer), so that its log line and its line in the
failures file both name it."""

from __future__ import annotations

import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from eclaw.contracts import Shared, TakesBack
from eclaw.core.activity import Activity
from eclaw.core.bus import EventBus
from eclaw.core.pipeline import PipelineRunner
from eclaw.core.records import DropLog, FailureLog
from eclaw.events import ItemDropped, ItemStored, RequestDropped, RequestFailed, ResponseParsed
from eclaw.exceptions import EclawError, HttpError
from eclaw.frontier.base import FORWARDED, Frontier
from eclaw.http import Request
from eclaw.http.urls import redact_url
from eclaw.observe.snapshots import HTTP_ERROR_BODY_MAX, Snapshots, save_for_failure
from eclaw.stats import Stats

__all__ = ["Accounting", "Completions", "DroppedIds", "Ids", "Intake", "Journal"]

logger = logging.getLogger(__name__)
_NOT_DROPPED = (None, FORWARDED)  # queued here, or by the process whose part of the crawl it is


class Journal(Protocol):
    """What the crawl tells its saved state (:class:`eclaw.core.state.CrawlState` implements it)."""

    def assign(self, requests: Iterable[Request]) -> None:
        """Give new requests their ids (logs, trace; the saved state's rows)."""

    def admitted(self, requests: Sequence[Request], reasons: Sequence[str | None], *, again: bool) -> None:
        """The frontier answered ``requests`` (``None``: queued); ``again``: retries or resumed ones."""

    def accepted(self, request: Request) -> None:
        """``request`` changed (a retry asked for): save it again."""

    def done(self, request: Request) -> None:
        """``request`` reached its end."""

    def marked(self, request: Request, fingerprint: bytes) -> None:
        """A redirect of ``request`` led to a page it made seen (in the dupe filter), before its own end."""

    def marked_by(self, request: Request) -> bytes | None:
        """The page a resumed ``request`` had made seen itself before the crawl stopped, if any: seen, but
        its own to parse."""


class Ids:
    """No saved state: requests get ids (for log lines and the trace), nothing else is kept."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def assign(self, requests: Iterable[Request]) -> None:
        ids = self._ids
        for request in requests:
            if not request._id:
                request._id = next(ids)

    def admitted(self, requests: Sequence[Request], reasons: Sequence[str | None], *, again: bool) -> None:
        return None

    def accepted(self, request: Request) -> None:
        return None

    def done(self, request: Request) -> None:
        return None

    def marked(self, request: Request, fingerprint: bytes) -> None:
        return None

    def marked_by(self, request: Request) -> bytes | None:
        return None


class DroppedIds:
    """Ids for the requests of a ``RequestDropped`` batch (all have one, but those refused as they were yielded)."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    def assign(self, drops: Sequence[tuple[Request, str]]) -> None:
        if not all(request._id for request, _ in drops):
            self._journal.assign([request for request, _ in drops])


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


class Completions:
    """Tells a shared frontier each finished request, once the items it yielded are stored
    (its lease then ends: a worker dying before that leaves the request to another)."""

    def __init__(self, frontier: Shared, items: PipelineRunner, activity: Activity) -> None:
        self._frontier = frontier
        self._items = items
        self._activity = activity
        self._waiting: deque[tuple[int, Request]] = deque()

    def finished(self, request: Request) -> None:
        mark = self._items.submitted
        if self._items.finished >= mark:
            self._activity.spawn(self._done(request))
        else:
            self._waiting.append((mark, request))

    def items_finished(self) -> None:
        """The pipeline runner stored (or dropped) another item."""
        while self._waiting and self._waiting[0][0] <= self._items.finished:
            self._activity.spawn(self._done(self._waiting.popleft()[1]))
        self._activity.check()

    async def _done(self, request: Request) -> None:
        async with self._activity.callback():
            try:
                await self._frontier.done(request)
            except Exception as exc:  # its lease expires: another worker redoes it, its items are stored once
                logger.error("could not mark %s done: %s", redact_url(request.url), exc)


class Accounting:
    """Counts and records how each request and item ended."""

    def __init__(
        self,
        *,
        stats: Stats,
        journal: Journal,
        failures: FailureLog,
        drops: DropLog,
        completions: Completions | None,
        errback: Callable[[RequestFailed], Awaitable[None]],
        snapshots: Snapshots | None = None,
    ) -> None:
        self._stats = stats
        self._snapshots = snapshots
        self._journal = journal
        self._failures = failures
        self._drops = drops
        self._completions = completions
        self._errback = errback

    def finished(self, request: Request) -> None:
        """``request`` reached its end: the saved state forgets it, a shared frontier is told."""
        self._journal.done(request)
        if self._completions is not None:
            self._completions.finished(request)

    def parsed(self, event: ResponseParsed) -> None:
        self._stats.requests_parsed += 1
        self.finished(event.request)

    async def failed(self, event: RequestFailed) -> None:
        """A failed attempt (``final=False``: it will be retried), or the request's final failure:
        counted with its reason, recorded in the failures file, handed to its errback."""
        if not event.final:
            self._stats.retries += 1
            return
        self._stats.add_failed(event.reason)
        snapshot = await self._http_failed(event.request, event.error, event.reason)
        self._failures.record(event.request, event.reason, event.error, snapshot)
        if event.request.errback is not None:
            await self._errback(event)
        self.finished(event.request)

    async def _http_failed(self, request: Request, error: BaseException | None, reason: str) -> Path | None:
        """A final failure on an HTTP status: the server's answer (headers, the body's start) saved as
        a snapshot, and the failure's log line naming it; the snapshot's folder, if one was saved."""
        if not isinstance(error, HttpError):
            return None
        response = error.response  # its request is the one sent: the headers the server saw
        folder, saved = await save_for_failure(
            self._snapshots, self._stats.counters, response.request, response, error,
            reason=reason, body_max=HTTP_ERROR_BODY_MAX,
        )  # fmt: skip
        logger.warning("failed %s: %s%s", redact_url(request.url), redact_url(str(error)), saved)
        return folder

    async def dropped(self, drops: list[tuple[Request, str]], context: Any) -> None:
        """A batch of drops (a page's duplicate links, say): counted by reason; those of in-scope
        pages by a policy (url too long, max depth, robots...) are listed in the drops file."""
        stats = self._stats
        reasons = [reason for _, reason in drops]
        stats.add_dropped_batch(reasons)
        unlisted = DropLog.UNLISTED
        for request, reason in drops:
            if reason not in unlisted:
                self._drops.record(request, reason)

    def stored(self, event: ItemStored) -> None:
        self._stats.items_stored += 1

    def item_dropped(self, event: ItemDropped) -> None:
        self._stats.add_item_dropped(event.reason)
