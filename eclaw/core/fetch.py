"""The owner of the download slots and of ``RequestScheduled``: a request through the middlewares
and the fetcher, and what came of it published (``ResponseDownloaded``, ``RequestFailed``,
``RequestDropped``).

:meth:`FetchRunner.pump` is the one place downloads start: while there is room (the crawl's
concurrency, its callbacks not too far behind, ``max_pages``) it asks the frontier for a request
whose host has a free slot and starts its download, a task of its own. The slot is freed as soon
as the response is in, before its callback runs (in the same task). A retry waits out its delay
holding no slot (:class:`RetryQueue`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from eclaw.contracts import Fetch, MarksSeen, Middleware
from eclaw.core.accounting import Journal
from eclaw.core.activity import Activity
from eclaw.core.budgets import PageBudget
from eclaw.core.bus import EventBus
from eclaw.core.records import attempts_of
from eclaw.events import RequestDropped, RequestFailed, RequestGenerated, RequestScheduled, ResponseDownloaded
from eclaw.exceptions import DownloadError, EclawError, HttpError, IgnoreRequest, RetryRequest
from eclaw.fetchers.base import Fetcher
from eclaw.frontier.base import Fed, Frontier, fingerprint
from eclaw.http import Request, Response
from eclaw.http.request import plain_request
from eclaw.http.urls import redact_url
from eclaw.observe.logs import request_id
from eclaw.stats import Stats

__all__ = ["FetchRunner", "RetryQueue", "chain"]

logger = logging.getLogger(__name__)


def chain(middlewares: Sequence[Middleware], fetch: Fetch) -> Fetch:
    """Wrap ``fetch`` in ``middlewares`` once; the first is the outermost."""
    handler = fetch
    for middleware in reversed(middlewares):
        if not callable(middleware):
            raise TypeError(f"middleware {middleware!r} is not callable")
        handler = _bind(middleware, handler)
    return handler


def _bind(middleware: Middleware, call_next: Fetch) -> Fetch:
    def call(request: Request) -> Awaitable[Response]:
        return middleware(request, call_next)  # the middleware's own coroutine: no wrapper frame to resume

    return call


class RetryQueue:
    """Requests waiting out a retry delay, holding no download slot meanwhile."""

    def __init__(self, ready: Callable[[Request], None]) -> None:
        self._ready = ready
        self._timers: dict[asyncio.TimerHandle, Request] = {}

    def __len__(self) -> int:
        return len(self._timers)

    def add(self, request: Request, delay: float) -> None:
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            assert handle is not None
            del self._timers[handle]
            self._ready(request)

        handle = loop.call_later(max(0.0, delay), fire)
        self._timers[handle] = request

    def cancel_all(self) -> int:
        """Drop every waiting request (the crawl is ending); returns how many."""
        for handle in self._timers:
            handle.cancel()
        count = len(self._timers)
        self._timers.clear()
        return count


class FetchRunner:
    """Starts the downloads the slots allow, downloads each and publishes the outcome."""

    def __init__(
        self,
        *,
        fetcher: Fetcher,
        middlewares: Sequence[Middleware],
        frontier: Frontier,
        bus: EventBus,
        stats: Stats,
        journal: Journal,
        activity: Activity,
        retrying: RetryQueue,
        handled: frozenset[int],
        pages: PageBudget,
        stop: Callable[[str], None],
        starved: Callable[[], None],
        finished: Callable[[Request], None],
    ) -> None:
        self._fetcher = fetcher
        self._frontier = frontier
        self._bus = bus
        self._stats = stats
        self._journal = journal
        self._activity = activity
        self._retrying = retrying
        self._handled = handled
        self._pages = pages
        self._stop = stop
        self._starved = starved
        self._halted = False
        self._finished = finished
        self._fetch = chain(middlewares, self._checked)
        self._tasks: set[asyncio.Task[None]] = set()

    async def pump(self) -> None:
        """Start downloads while the frontier has requests with free slots."""
        if self._halted:
            return
        frontier, start, room, pages = self._frontier, self._start, self._activity.room, self._pages
        while room() and pages.take():
            try:
                request = await frontier.next_request()
            except Exception as exc:  # a broken frontier: stop cleanly, keep what is pending counted
                pages.give_back()
                shown = None if isinstance(exc, EclawError) else exc  # our own errors say it all in one line
                logger.error("frontier failed: %s: %s", type(exc).__name__, exc, exc_info=shown)
                self._stop("frontier error")
                return
            if request is None:
                pages.give_back()
                self._starved()  # the start requests may feed more
                return
            start(request)
            if pages.spent:  # never more than max_pages: what is not started stays pending
                self._stop("max pages")
                return

    def halt(self) -> None:
        """No download starts from now on (the crawl is stopping); those under way go on."""
        self._halted = True

    def _start(self, request: Request) -> None:
        """A download slot is free for ``request``: download it in a task of its own."""
        self._activity.downloads += 1
        task = self._activity.spawn(self._download(request))
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._activity.download_ended()

    def abort(self) -> None:
        """Cancel every download under way (a stop's ``shutdown_timeout`` is over)."""
        for task in self._tasks:
            task.cancel()

    async def _download(self, request: Request) -> None:
        request_id.set(request._id)  # this task's log lines name the request
        await self._bus.publish(RequestScheduled(request=request))

    async def scheduled(self, event: RequestScheduled) -> None:
        """The owner: fetch, free the slot, publish the response (its callback runs here, after)."""
        request = event.request
        self._stats.requests_scheduled += 1
        response: Response | None = None
        error: Exception | None = None
        try:
            response = await self._fetch(request)
        except asyncio.CancelledError:
            self._stats.requests_pending += 1  # aborted by shutdown: not crawled
            raise
        except Exception as exc:
            error = exc
        finally:
            await self._frontier.release(request)
        await self.pump()  # the next download starts from here: no trip through the crawl's loop
        if error is not None:
            answered = _answer_of(error)
            if answered is not None:  # a 404, a 503 retried: a response all the same
                self._counted(answered)
            await self._failed(request, error)
        elif response is not None:
            self._counted(response)
            if not await self._redirected(request, response):
                await self._bus.publish(ResponseDownloaded(request=response.request, response=response))

    def _counted(self, response: Response) -> None:
        stats = self._stats
        stats.responses_downloaded += 1
        stats.status_counts[response.status] += 1
        stats.bytes_downloaded += len(response.body)

    async def _redirected(self, request: Request, response: Response) -> bool:
        """A redirect in this download led to another process's page (handed over) or to a page seen before
        (a duplicate): True if ``request`` ends here."""
        hops = response.request._meta and response.request._meta.get("redirect_urls")  # _meta: no dict made
        if not hops or response.url == request.url:  # not redirected now (one handed over keeps its hops)
            return False
        if self._elsewhere(request, response):
            await self._hand_over(request, response)
            return True
        if await self._crawled_elsewhere(request, response, hops):
            await self._bus.publish(RequestDropped(request=request, reason="duplicate"))
            self._finished(request)
            return True
        return False

    def _elsewhere(self, request: Request, response: Response) -> bool:
        """A GET's redirect led to a page of another process's part of the crawl (``--processes``); a form's
        POST that lands there is its answer, parsed here."""
        frontier = self._frontier
        return request.method == "GET" and isinstance(frontier, Fed) and frontier.elsewhere(response.url)

    async def _hand_over(self, request: Request, response: Response) -> None:
        """The page is that process's to fetch (once, if it is new there, unless ``dont_filter``) and parse:
        it gets the request, redirected; this one ends here, as Scrapy's redirects do (a new request through
        the frontier)."""
        moved = response.request.replace(url=response.url)
        moved._id = 0  # a new request: it gets its own id as it is published
        await self._bus.publish(RequestGenerated(request=moved, parent=response))
        await self._bus.publish(RequestDropped(request=request, reason="redirected to another process"))
        self._finished(request)

    async def _crawled_elsewhere(self, request: Request, response: Response, hops: list[str]) -> bool:
        """A redirect led to ``response.url``: record its hops and end as seen (in the request's cookie
        jar), so a link there later is a duplicate; True if the end was seen (or queued) already by a
        GET: the page is another request's."""
        targets = [plain_request(url, None) for url in [*hops[1:], response.url]]
        if request._meta and "cookiejar" in request._meta:
            for target in targets:
                target.meta = {"cookiejar": request._meta["cookiejar"]}
        frontier = self._frontier
        if not isinstance(frontier, MarksSeen):  # it cannot say: parse the page (at worst, twice)
            return False
        try:
            fresh = await frontier.add_seen(targets)
        except Exception as exc:  # the frontier cannot say: parse the page (at worst, twice)
            logger.warning("could not record where %s was redirected: %s", redact_url(response.request.url), exc)
            return False
        end = fingerprint(targets[-1])
        if fresh[-1]:
            self._journal.marked(request, end)  # its own to parse, even if a pause comes before it is parsed
            return False
        # a form's POST that lands on a page seen before is its answer (a login sends you back): parse it
        own = self._journal.marked_by(request) == end  # it made the page seen itself, before a pause or a crash
        return not own and not response.request.dont_filter and request.method == "GET"

    async def _checked(self, request: Request) -> Response:
        response = await self._fetcher.fetch(request)
        if response.status >= 400 and response.status not in self._handled:
            meta = request.meta
            if not meta.get("handle_httpstatus_all") and response.status not in meta.get("handle_httpstatus_list", ()):
                raise HttpError(response)
        return response

    async def retry(self, request: Request, retry: RetryRequest) -> None:
        """``request`` failed, not for good: ``retry.request`` takes its place after ``retry.delay``."""
        again = retry.request
        again._id = again._id or request._id
        self._journal.accepted(again)
        failure = RequestFailed(
            request=request, reason=retry.reason, error=retry.error, attempt=attempts_of(request), final=False
        )
        await self._bus.publish(failure)
        self._retrying.add(again, retry.delay)

    async def _failed(self, request: Request, exc: Exception) -> None:
        """What a download that raised comes to: a drop, a retry later, or a failure."""
        bus, attempt = self._bus, attempts_of(request)
        if isinstance(exc, IgnoreRequest):
            await bus.publish(RequestDropped(request=request, reason=exc.reason))
            self._finished(request)
        elif isinstance(exc, RetryRequest):
            await self.retry(request, exc)
        elif isinstance(exc, DownloadError):
            if not isinstance(exc, HttpError):  # an HTTP failure's line names its snapshot: accounting writes it
                logger.warning("failed %s: %s", redact_url(request.url), redact_url(str(exc)))
            await bus.publish(RequestFailed(request=request, reason=exc.reason, error=exc, attempt=attempt))
        else:  # a bug in a middleware or a fetcher: this request fails, the crawl goes on
            shown = redact_url(request.url)
            logger.error("error downloading %s: %s: %s", shown, type(exc).__name__, redact_url(str(exc)), exc_info=exc)
            reason = f"error: {type(exc).__name__}"
            await bus.publish(RequestFailed(request=request, reason=reason, error=exc, attempt=attempt))


def _answer_of(error: Exception) -> Response | None:
    """The response a failed attempt got, when it failed on its status (at once, or to be retried)."""
    cause = error.error if isinstance(error, RetryRequest) else error
    return cause.response if isinstance(cause, HttpError) else None
