"""The owner of ``ResponseDownloaded``: the spider's callback, and (for a final failure) its errback.

A callback runs in the task that downloaded its response. What it yields is
routed as it comes: items are published as ``ItemParsed`` (the pipeline runner
owns them), requests as ``RequestGenerated`` (the intake owns them). A plain
(not async) callback cannot pause while it runs, so its requests go to the
frontier as one batch when it is done and its items through the pipelines from
this same task; an async one's outputs go one by one, as it yields them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence

from eclaw.contracts import RetriesEmptyPages
from eclaw.core.activity import Activity
from eclaw.core.bus import EventBus
from eclaw.core.expect import ItemExpectations
from eclaw.core.parser import Parser
from eclaw.core.pipeline import PipelineRunner
from eclaw.events import ItemParsed, RequestFailed, RequestGenerated, ResponseDownloaded, ResponseParsed
from eclaw.exceptions import CloseSpider, HttpError, NotTextResponse, RetryRequest, SitemapError
from eclaw.http import Request, Response
from eclaw.http.urls import redact_url
from eclaw.items import is_item
from eclaw.observe.logs import request_id
from eclaw.observe.snapshots import Snapshots
from eclaw.spider import Spider
from eclaw.stats import Stats

__all__ = ["CallbackRunner"]

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
        assign: Callable[[list[Request]], None],
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
        self._assign = assign
        self._referer = referer  # the page a request comes from is its Referer (the downloader sends it)
        self._snapshots = snapshots
        self._expect = ItemExpectations(spider)
        self._empty = empty  # middlewares that fetch an empty page again another way (the ladder)
        self._retry = retry

    async def downloaded(self, event: ResponseDownloaded) -> None:
        """The owner: run the callback; the request ends as ``ResponseParsed`` or ``RequestFailed``."""
        response = event.response
        request = response.request
        request_id.set(request._id)
        counts = [0, 0]
        async with self._activity.callback():
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
        if self._snapshots is None:
            return ""
        folder = await self._snapshots.save(request, response, exc, reason=reason)
        if folder is None:
            return f" (no snapshot: {self._snapshots.dir} holds snapshots_max / snapshots_max_bytes)"
        self._stats.counters["snapshots saved"] += 1
        return f"; snapshot {folder}"

    async def recover(self, event: RequestFailed) -> None:
        """A request with an errback failed for good: run it (its outputs are routed like a callback's)."""
        response = event.error.response if isinstance(event.error, HttpError) else None
        try:
            async with self._activity.callback():
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
        depth = request.depth + 1
        referer = response.url if response is not None and self._referer else None
        if isinstance(outputs, AsyncIterator):
            async for value in outputs:  # may await between values: each goes on at once
                kind = _kind(value)
                if kind is _REQUEST:
                    value.depth = depth  # type: ignore[attr-defined]
                    value.referer = referer  # type: ignore[attr-defined]
                    counts[1] += 1
                    self._assign([value])  # type: ignore[list-item]
                    await self._bus.publish_batch(RequestGenerated, [value], response)
                elif kind is _ITEM:
                    counts[0] += 1
                    await self._bus.publish(ItemParsed(item=value, response=response))
            return
        # A plain iterable cannot yield control while it runs: its requests go on as one
        # batch when it is done, and its items through the pipelines from this task, in order.
        requests: list[Request] = []
        items = self._items
        items.held += 1
        try:
            for value in outputs:
                kind = _REQUEST if type(value) is Request else _kind(value)
                if kind is _REQUEST:
                    value.depth = depth  # type: ignore[attr-defined]
                    value.referer = referer  # type: ignore[attr-defined]
                    requests.append(value)  # type: ignore[arg-type]
                elif kind is _ITEM:
                    counts[0] += 1
                    await self._bus.publish(ItemParsed(item=value, response=response))
            counts[1] += len(requests)
            self._assign(requests)
            await self._bus.publish_batch(RequestGenerated, requests, response)
            if items:
                await items.drain()
        finally:
            items.release()


_REQUEST, _ITEM, _NOTHING = "request", "item", "nothing"


def _kind(value: object) -> str:
    """What a callback yielded: a request, an item, or ``None`` (skipped, as Scrapy allows)."""
    if isinstance(value, Request):
        return _REQUEST
    if is_item(value):
        return _ITEM
    if value is None:
        return _NOTHING
    raise TypeError(f"callback yielded {type(value).__name__}: expected an item (dict, dataclass) or Request")
