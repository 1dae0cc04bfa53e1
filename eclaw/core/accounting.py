"""The owner of the terminal events: every request ends here exactly once (parsed, failed or
dropped), every item as stored or dropped; the stats, the files of record and the saved state
are told. A shared frontier is told a request is done once the items it yielded are stored.
A final failure on an HTTP status leaves its evidence here (a snapshot of the server's answer),
so that its log line and its line in the failures file both name it."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from eclaw.contracts import Shared
from eclaw.core.activity import Activity
from eclaw.core.journal import Journal
from eclaw.core.pipeline import PipelineRunner
from eclaw.core.records import DropLog, FailureLog
from eclaw.events import ItemDropped, ItemStored, RequestFailed, ResponseParsed
from eclaw.exceptions import HttpError
from eclaw.http import Request
from eclaw.http.urls import redact_url
from eclaw.observe.snapshots import HTTP_ERROR_BODY_MAX, Snapshots, save_for_failure
from eclaw.stats import Stats

__all__ = ["Accounting", "Completions"]

logger = logging.getLogger(__name__)


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
