"""Spider callbacks and errbacks, what they yield, and the end of each request.

Mixed into :class:`eclaw.crawl.Crawl`: a callback's items go to the pipelines and its
requests to the scheduler; when a request is finished the saved state (``--state``) and
a shared frontier (Redis: once the request's items are stored) are told.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from eclaw.checkpoint import Checkpointing
from eclaw.components import iterate
from eclaw.events import Event, ItemParsed, RequestFailed, RequestGenerated, ResponseParsed
from eclaw.exceptions import CloseSpider, ConfigError, EclawError, HttpError
from eclaw.http import Request, Response
from eclaw.items import is_item
from eclaw.observe import request_id
from eclaw.parser import Parser
from eclaw.settings import Settings
from eclaw.urls import redact_url

__all__ = ["Callbacks"]

logger = logging.getLogger("eclaw.engine")


class Callbacks(Checkpointing):
    """Feeding start requests, running callbacks (``_parse``) and errbacks (``_recover``), routing what they yield."""

    parser: Parser
    settings: Settings
    _watched: Any
    _stopping: bool
    _start_done: bool
    _start_error: BaseException | None
    _drained: asyncio.Event
    _low_water: int
    _wakeup: asyncio.Event
    _complete: Callable[[Request], Awaitable[None]] | None
    _completions: deque[tuple[int, Request]]
    _enqueue: Callable[..., Awaitable[None]]
    _assign: Callable[[Iterable[Request]], None]
    _spawn: Callable[[Any], None]
    stop: Callable[..., None]
    emit: Callable[[Event], None]

    async def _parse(self, response: Response) -> None:
        request = response.request
        request_id.set(request._id)
        counts = [0, 0]
        try:
            if self._hold is not None:
                await self._gate()
            await self._collect(self.parser.parse(response, self.spider), request, response, counts)
        except CloseSpider as exc:
            self.stop(f"closespider: {exc.reason}")
            self._parsed(request, response, counts)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            shown = redact_url(response.url)
            logger.error("callback failed for %s: %s: %s", shown, type(exc).__name__, exc, exc_info=exc)
            self.emit(RequestFailed(request=request, reason=f"callback error: {type(exc).__name__}", error=exc))
        else:
            self._parsed(request, response, counts)
        finally:
            self._busy -= 1
            self._check_idle()

    def _parsed(self, request: Request, response: Response, counts: list[int]) -> None:
        self.bus.signal(ResponseParsed(request=request, response=response, items=counts[0], requests=counts[1]))
        self._finished(request)

    async def _collect(
        self,
        outputs: AsyncIterator[object] | Iterable[object],
        request: Request,
        response: Response | None,
        counts: list[int],
    ) -> None:
        depth = request.depth + 1
        if isinstance(outputs, AsyncIterator):
            async for value in outputs:  # may await between values: enqueue each at once
                if self._take(value, depth, response, counts):
                    await self._enqueue([value])
            return
        # A plain iterable cannot yield control while it runs, so its requests
        # are enqueued as one batch when it is done, with no change in timing,
        # and its items go through the pipelines from here, in order.
        batch: list[Request] = []
        watched = self._watched[RequestGenerated]
        items = self._items
        items.held += 1
        try:
            for value in outputs:
                if type(value) is Request and not watched:
                    value.depth = depth
                    counts[1] += 1
                    batch.append(value)
                elif self._take(value, depth, response, counts):
                    batch.append(value)  # type: ignore[arg-type]
            if batch:
                await self._enqueue(batch)
            if items:
                await items.drain()
        finally:
            items.release()

    def _take(self, value: object, depth: int, response: Response | None, counts: list[int]) -> bool:
        """Route one callback output; True means "a request: enqueue it now"."""
        if isinstance(value, Request):
            value.depth = depth
            counts[1] += 1
            if not self._watched[RequestGenerated]:
                return True
            self._assign((value,))
            self.emit(RequestGenerated(request=value, parent=response))
        elif is_item(value):
            counts[0] += 1
            self.bus.signal(ItemParsed(item=value, response=response))
        elif value is not None:  # None is skipped, as Scrapy allows
            kind = type(value).__name__
            raise TypeError(f"callback yielded {kind}: expected an item (dict, dataclass) or Request")
        return False

    async def _recover(self, event: RequestFailed) -> None:
        response = event.error.response if isinstance(event.error, HttpError) else None
        try:
            if self._hold is not None:
                await self._gate()
            await self._collect(self.parser.recover(event, self.spider), event.request, response, [0, 0])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.stats.handler_errors += 1
            shown = redact_url(event.request.url)
            logger.error("errback failed for %s: %s: %s", shown, type(exc).__name__, exc, exc_info=exc)
        finally:
            self._finished(event.request)
            self._busy -= 1
            self._check_idle()

    def _finished(self, request: Request) -> None:
        """``request`` reached its end: tell the saved state, and (once its items are stored) the scheduler."""
        if self._state is not None:
            self._state.done(request)
        if self._complete is not None:
            mark = self._items.submitted
            if self._items.finished >= mark:
                self._spawn_done(request)
            else:
                self._completions.append((mark, request))

    def _items_finished(self) -> None:
        while self._completions and self._completions[0][0] <= self._items.finished:
            self._spawn_done(self._completions.popleft()[1])
        self._check_idle()

    def _spawn_done(self, request: Request) -> None:
        self._busy += 1
        self._spawn(self._complete_request(request))

    async def _complete_request(self, request: Request) -> None:
        assert self._complete is not None
        try:
            await self._complete(request)
        except Exception as exc:  # its lease expires: another worker redoes it, its items are stored once
            logger.error("could not mark %s done: %s", redact_url(request.url), exc)
        finally:
            self._busy -= 1
            self._check_idle()

    async def _feed_start_requests(self) -> None:
        try:
            produced = self.spider.start_requests()
            high_water = max(1000, self.settings.concurrency * 8)
            async for request in iterate(produced):
                if self._stopping:
                    break
                if not isinstance(request, Request):
                    raise ConfigError(f"start_requests() yielded {request!r}, not a Request")
                await self._submit(request, None)
                if self.scheduler.pending() > high_water:
                    await self._frontier_drained(high_water)
            else:
                self._start_exhausted = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            message = f"start_requests() of spider {self.spider.name!r} failed: {type(exc).__name__}: {exc}"
            logger.debug(message)  # raised to the caller by run(): one message, not two
            self._start_error = exc if isinstance(exc, EclawError) else ConfigError(message)
            self.stop("start_requests error")
        finally:
            self._start_done = True
            self._wakeup.set()

    async def _frontier_drained(self, high_water: int) -> None:
        """Back-pressure for start requests: wait until the frontier is half drained."""
        self._low_water = high_water // 2
        self._drained.clear()
        await self._drained.wait()

    async def _submit(self, request: Request, parent: Response | None) -> None:
        """A new request: through dispatch if observed, else straight to the scheduler."""
        if self._watched[RequestGenerated]:
            self._assign((request,))
            self.emit(RequestGenerated(request=request, parent=parent))
        else:
            await self._enqueue([request])
