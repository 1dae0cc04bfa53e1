"""The owner of ``ResponseDownloaded``: the spider's callback, and (for a final failure) its errback.

A callback runs in the task that downloaded its response. What it yields is
routed as it comes: items are published as ``ItemParsed`` (the pipeline runner
owns them), requests as ``RequestGenerated`` (the intake owns them). A plain
(not async) callback's requests go to the frontier in batches of 1,000 as it
yields them (a page of 400,000 links is never held whole) and its items through
the pipelines from this same task; an async one's outputs go one by one.

``max_links_per_page`` caps the requests taken from one callback (sitemap
documents excepted: ``sitemap_max_urls`` caps those): the rest are counted
(``links past max_links_per_page``) and the first of them is listed as dropped
(``too many links``), one line per page rather than one per link. A callback may
yield ``RequestDropped(request=..., reason=...)`` to refuse a request with a
reason of its own (the sitemap limits do): it is counted and listed like any
policy drop.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from eclaw.contracts import RetriesEmptyPages
from eclaw.core.activity import Activity
from eclaw.core.bus import EventBus
from eclaw.core.expect import ItemExpectations
from eclaw.core.pipeline import PipelineRunner
from eclaw.discovery.rules import yielded
from eclaw.discovery.sitemaps import Refused
from eclaw.events import (
    ItemParsed,
    RequestDropped,
    RequestFailed,
    RequestGenerated,
    ResponseDownloaded,
    ResponseParsed,
)
from eclaw.exceptions import CloseSpider, HttpError, NotTextResponse, RetryRequest, SitemapError
from eclaw.http import Request, Response
from eclaw.http.types import COMPLETES
from eclaw.http.urls import redact_url
from eclaw.items import is_item
from eclaw.observe.logs import request_id
from eclaw.observe.snapshots import Snapshots, save_for_failure
from eclaw.sessions.referrer import META_KEY as POLICY_KEY
from eclaw.sessions.referrer import page_policy
from eclaw.spider import Spider
from eclaw.stats import Stats

__all__ = ["CallbackParser", "CallbackRunner", "Parser"]

logger = logging.getLogger(__name__)


class CallbackRunner:
    """Runs callbacks and errbacks and routes what they yield."""

    def __init__(
        self,
        *,
        spider: Spider,
        parser: Parser,
        bus: EventBus,
        items: PipelineRunner,
        stats: Stats,
        activity: Activity,
        stop: Callable[[str], None],
        referer: bool = True,
        snapshots: Snapshots | None = None,
        empty: Sequence[RetriesEmptyPages] = (),
        retry: Callable[[Request, RetryRequest], Awaitable[None]] | None = None,
    ) -> None:
        self._spider = spider
        self._parser = parser
        self._bus = bus
        self._items = items
        self._stats = stats
        self._activity = activity
        self._stop = stop
        self._referer = referer  # the page a request comes from is its Referer (the fetcher sends it)
        self._snapshots = snapshots
        self._expect = ItemExpectations(spider)
        self._empty = empty  # middlewares that fetch an empty page again another way (the ladder)
        self._retry = retry
        self._sitemaps = spider._parse_sitemap  # sitemap documents have their own cap, sitemap_max_urls
        self._max_links = spider.settings.max_links_per_page if spider.crawl is not None else 0

    async def downloaded(self, event: ResponseDownloaded) -> None:
        """The owner: run the callback; the request ends as ``ResponseParsed`` or ``RequestFailed``."""
        response = event.response
        request = response.request
        request_id.set(request._id)
        counts = [0, 0]
        async with self._activity.callback(gated=not _completes(request)):
            try:
                await self._collect(self._parser.parse(response, self._spider), request, response, counts)
            except CloseSpider as exc:
                self._stop(f"closespider: {exc.reason}")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await self._callback_failed(request, response, exc)
                return
        if not counts[0] and self._expect.wanted(request):  # asked only of pages without items
            if not await self._fetched_again(request, response):
                await self._no_items(request, response)
            return
        parsed = ResponseParsed(request=request, response=response, items=counts[0], requests=counts[1])
        await self._bus.publish(parsed)

    async def _callback_failed(self, request: Request, response: Response, exc: Exception) -> None:
        ours = isinstance(exc, NotTextResponse | SitemapError)  # our own clear errors: one line, no traceback
        if isinstance(exc, SitemapError):
            reason = exc.reason
        else:
            reason = f"callback error: {exc.reason if isinstance(exc, NotTextResponse) else type(exc).__name__}"
        saved = await self._snapshot(request, response, exc, reason)
        shown = redact_url(response.url)
        if ours:
            logger.error("callback failed for %s: %s%s", shown, exc, saved)
        else:
            logger.error("callback failed for %s: %s: %s%s", shown, type(exc).__name__, exc, saved, exc_info=exc)
        await self._bus.publish(RequestFailed(request=request, reason=reason, error=exc))

    async def _fetched_again(self, request: Request, response: Response) -> bool:
        """Whether a middleware takes an empty page to fetch it again (a stronger fetcher for its host)."""
        for middleware in self._empty:
            again = await middleware.retry_empty(request, response)
            if again is not None and self._retry is not None:
                logger.info("no items from %s: fetching it again (%r)", response.url, middleware)
                await self._retry(request, RetryRequest(again, delay=0.0, reason="no items"))
                return True
        return False

    async def _no_items(self, request: Request, response: Response) -> None:
        saved = await self._snapshot(request, response, None, "no items")
        logger.error("no items from %s, where the spider expects some (expect_items)%s", response.url, saved)
        await self._bus.publish(RequestFailed(request=request, reason="no items"))

    async def _snapshot(self, request: Request, response: Response, exc: Exception | None, reason: str) -> str:
        """Save an error snapshot; what the failure's log line says of it."""
        return (await save_for_failure(self._snapshots, self._stats.counters, request, response, exc, reason=reason))[1]

    async def recover(self, event: RequestFailed) -> None:
        """A request with an errback failed for good: run it (its outputs are routed like a callback's)."""
        response = event.error.response if isinstance(event.error, HttpError) else None
        try:
            async with self._activity.callback(gated=not _completes(event.request)):
                await self._collect(self._parser.recover(event, self._spider), event.request, response, [0, 0])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._stats.handler_errors += 1
            shown = redact_url(event.request.url)
            logger.error("errback failed for %s: %s: %s", shown, type(exc).__name__, exc, exc_info=exc)

    async def _collect(
        self,
        outputs: AsyncIterator[object] | Iterable[object],
        request: Request,
        response: Response | None,
        counts: list[int],
    ) -> None:
        limit = 0 if request.callback == self._sitemaps else self._max_links  # sitemaps: sitemap_max_urls
        out = _Outgoing(request, response if response is not None and self._referer else None, limit)
        if isinstance(outputs, AsyncIterator):
            async for value in outputs:  # may await between values: each goes on at once
                await self._route(value, out, response, counts)
                if out.batch:
                    await self._send(out, response)
        else:
            # A plain iterable cannot yield control while it runs: its requests go on in batches
            # (a page's links are never all held at once), its items through the pipelines from
            # this task, in order.
            items = self._items
            items.held += 1
            try:
                add = out.add
                for value in outputs:
                    if type(value) is Request:  # the commonest value, routed without a call to await
                        add(value)
                        if len(out.batch) >= _BATCH:
                            await self._send(out, response)
                    else:
                        await self._route(value, out, response, counts)
                await self._send(out, response)
                if items:
                    await items.drain()
            finally:
                items.release()
        counts[1] += out.taken
        if out.first_over is not None:
            await self._too_many(out, response)

    async def _route(self, value: object, out: _Outgoing, response: Response | None, counts: list[int]) -> None:
        kind = _REQUEST if type(value) is Request else _kind(value)
        if kind is _REQUEST:
            out.add(value)  # type: ignore[arg-type]
        elif kind is _ITEM:
            counts[0] += 1
            await self._bus.publish(ItemParsed(item=value, response=response))
        elif kind is _DROP:  # a request the callback refused with a reason (sitemap limits): listed as a drop
            await self._drop(value.request, value.reason, out)  # type: ignore[attr-defined]

    async def _send(self, out: _Outgoing, response: Response | None) -> None:
        batch, out.batch = out.batch, []
        if batch:
            await self._bus.publish_batch(RequestGenerated, batch, response)

    async def _drop(self, request: Request, reason: str, out: _Outgoing) -> None:
        """``request`` ends as dropped for ``reason``: it was generated (counted) and refused at once."""
        out.stamp(request)
        self._stats.requests_generated += 1
        await self._bus.publish(RequestDropped(request=request, reason=reason))

    async def _too_many(self, out: _Outgoing, response: Response | None) -> None:
        """A page's requests past ``max_links_per_page``: one drop listed (the first), all counted."""
        assert out.first_over is not None
        self._stats.counters["links past max_links_per_page"] += out.over
        shown = redact_url(response.url) if response is not None else "a failed request's errback"
        logger.warning(
            "%s: %d requests past max_links_per_page (%d) dropped (too many links; the first listed in drops)",
            shown, out.over, out.limit,
        )  # fmt: skip
        await self._drop(out.first_over, "too many links", out)


_BATCH = 1000  # a plain callback's requests go to the frontier this many at a time, as it yields them


class _Outgoing:
    """The requests one callback yields, on their way to the frontier: stamped with their depth and
    referer, held to ``limit`` (0: none), sent in batches."""

    __slots__ = ("batch", "depth", "first_over", "limit", "over", "page", "policy", "referer", "taken")

    def __init__(self, request: Request, response: Response | None, limit: int) -> None:
        self.depth = request.depth + 1
        self.referer = response.url if response is not None else None
        self.page = response
        self.policy: str | None = None  # the page's referrer policy, read at its first request
        self.limit = limit
        self.batch: list[Request] = []
        self.taken = 0
        self.over = 0
        self.first_over: Request | None = None

    def stamp(self, request: Request) -> None:
        request.depth = self.depth
        request.referer = self.referer
        if self.page is not None:
            page = self.page
            self.policy, self.page = page_policy(page.body, page.headers.get("Referrer-Policy")), None
        if self.policy is not None and not (request._meta and POLICY_KEY in request._meta):
            request.meta[POLICY_KEY] = self.policy  # its own policy, if it has one, wins (as in Scrapy)

    def add(self, request: Request) -> None:
        if self.limit and self.taken >= self.limit:
            self.over += 1
            if self.first_over is None:
                self.first_over = request
            return
        self.stamp(request)
        self.taken += 1
        self.batch.append(request)


_REQUEST, _ITEM, _DROP, _NOTHING = "request", "item", "drop", "nothing"


def _kind(value: object) -> str:
    """What a callback yielded: a request, an item, or ``None`` (skipped, as Scrapy allows)."""
    if isinstance(value, Request):
        return _REQUEST
    if type(value) is RequestDropped or type(value) is Refused:
        return _DROP
    if is_item(value):
        return _ITEM
    if value is None:
        return _NOTHING
    raise TypeError(f"callback yielded {type(value).__name__}: expected an item (dict, dataclass) or Request")


def _completes(request: Request) -> bool:
    """Its callbacks finish an item a pipeline holds (files of an item): a checkpoint, which waits for that
    item, must not hold them back."""
    meta = request._meta
    return bool(meta and meta.get(COMPLETES))


@runtime_checkable
class Parser(Protocol):
    """Turns a response (or a final failure) into items and requests."""

    def parse(self, response: Response, spider: Spider) -> AsyncIterator[object] | Iterable[object]: ...

    def recover(self, failure: RequestFailed, spider: Spider) -> AsyncIterator[object] | Iterable[object]: ...


class CallbackParser:
    """The crawl's :class:`Parser`: calls ``request.callback`` (default ``spider.parse``)
    with the response, and ``request.errback`` with a final ``RequestFailed``.

    A callback may be an async generator, a generator, a coroutine, or a plain
    function; it may return or yield items (dicts, dataclass instances),
    ``Request`` objects, an iterable of them, or ``None``.
    """

    def parse(self, response: Response, spider: Spider) -> AsyncIterator[object] | Iterable[object]:
        request = response.request
        callback = request.callback or spider.parse
        kwargs = request._cb_kwargs
        return _outputs(callback(response, **kwargs) if kwargs else callback(response))

    def recover(self, failure: RequestFailed, spider: Spider) -> AsyncIterator[object] | Iterable[object]:
        errback = failure.request.errback
        if errback is None:
            return ()
        return _outputs(errback(failure))


def _outputs(result: Any) -> AsyncIterator[object] | Iterable[object]:
    """What a callback returned, as something to iterate (async or not)."""
    if inspect.isgenerator(result) or inspect.isasyncgen(result):
        return result  # the common case, iterated without an extra wrapper
    if inspect.isawaitable(result):
        return _awaited(result)
    return yielded(result)


async def _awaited(result: Any) -> AsyncIterator[object]:
    for value in yielded(await result):
        yield value
