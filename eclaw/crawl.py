"""One running crawl: the event queue, its dispatch loop and the component glue.

Internal; users drive crawls through :class:`eclaw.Engine`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from eclaw.callbacks import Callbacks
from eclaw.components import Components, uninterruptible
from eclaw.dispatch import EventBus, Handler
from eclaw.downloader import Downloader
from eclaw.events import (
    EngineIdle,
    Event,
    ItemDropped,
    ItemParsed,
    ItemStored,
    RequestDropped,
    RequestFailed,
    RequestGenerated,
    RequestScheduled,
    ResponseDownloaded,
    ResponseParsed,
    SpiderClosed,
    SpiderOpened,
)
from eclaw.exceptions import (
    DownloadError,
    EclawError,
    HttpError,
    IgnoreRequest,
    RetryRequest,
)
from eclaw.failures import FailureLog, RetryQueue, attempts_of
from eclaw.http import Request, Response
from eclaw.middleware import Middleware, chain
from eclaw.observe import Observers, request_id
from eclaw.parser import Parser
from eclaw.pipeline import DeadLetter, ItemPipeline, PipelineRunner
from eclaw.quality import RunRecorder
from eclaw.scheduler import Scheduler
from eclaw.settings import Settings
from eclaw.spider import Spider
from eclaw.state import CrawlState
from eclaw.stats import Stats
from eclaw.urls import redact_url

logger = logging.getLogger("eclaw.engine")

__all__ = ["Crawl", "Handler"]


class Crawl(Callbacks):
    """State and dispatch loop of one spider run."""

    def __init__(
        self,
        spider: Spider,
        settings: Settings,
        *,
        scheduler: Scheduler,
        downloader: Downloader,
        parser: Parser,
        middlewares: list[Middleware],
        pipelines: list[ItemPipeline],
        handlers: Callable[[type[Event]], tuple[Handler, ...]],
        runs: RunRecorder | None = None,
        state: CrawlState | None = None,
    ) -> None:
        self.spider = spider
        self._runs = runs
        self._state = state
        self.settings = settings
        self.stats = Stats(spider=spider.name)
        self.scheduler = scheduler
        self.downloader = downloader
        self.parser = parser
        self.pipelines = pipelines
        self.middlewares = middlewares
        self._components = Components(scheduler, downloader, middlewares, pipelines)
        self._observers = Observers(settings, spider.name)
        tracer = self._tracer = self._observers.tracer
        if tracer is not None:  # the trace sees the rarer events through the bus, the others directly
            subscribed = handlers
            handlers = lambda kind: (*subscribed(kind), *((tracer,) if kind.__name__ in tracer.BUS_EVENTS else ()))  # noqa: E731
        self._fetch = chain(middlewares, self._fetch_checked)
        self._dead_letter = DeadLetter(settings.dead_letter)
        self._failures = FailureLog(settings.failures)
        self._retrying = RetryQueue(self._retry_due)
        self._logs = {"failures": self._failures, "dead letter": self._dead_letter}
        self._wakeup = asyncio.Event()
        stats = self.stats

        def traced(count: Callable[[Any], None], record: Callable[[Any], None] | None) -> Callable[[Any], None]:
            """An accounting step that also writes the event to the trace (when there is one)."""
            if record is None or tracer is None:
                return count

            def count_and_record(event: Any) -> None:
                count(event)
                record(event)

            return count_and_record

        self.bus = EventBus(
            handlers,
            owners={
                RequestGenerated: self._on_generated,
                ResponseDownloaded: self._on_downloaded,
                RequestFailed: self._on_failed,
            },
            accounting={
                RequestScheduled: lambda event: setattr(stats, "requests_scheduled", stats.requests_scheduled + 1),
                ResponseParsed: traced(
                    lambda event: setattr(stats, "requests_parsed", stats.requests_parsed + 1),
                    None if tracer is None else tracer.parsed,
                ),
                RequestDropped: lambda event: stats.add_dropped(event.reason),
                ItemParsed: traced(self._accept_item, None if tracer is None else tracer.item),
                ItemStored: traced(
                    lambda event: setattr(stats, "items_stored", stats.items_stored + 1),
                    None if tracer is None else tracer.item,
                ),
                ItemDropped: traced(
                    lambda event: stats.add_item_dropped(event.reason), None if tracer is None else tracer.record
                ),
            },
            stats=stats,
            wake=self._wakeup.set,
        )
        self._watched = self.bus.watched
        self._items = PipelineRunner(pipelines, spider, self._dead_letter, self.bus.signal, self._items_finished)
        self._complete = getattr(scheduler, "done", None)  # a shared frontier: told when a request is finished
        self._completions: deque[tuple[int, Request]] = deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self._downloads: dict[asyncio.Task[None], Request] = {}
        self._busy = 0  # parse/errback tasks, retries being queued again, items inside pipelines
        self._start_done = False
        self._ids = itertools.count(1)
        self._start_exhausted = False  # every start request was taken (a resumed crawl skips them)
        self._hold: asyncio.Event | None = None  # set while a checkpoint waits for callbacks to end
        self._gated = 0  # callbacks waiting for a checkpoint to end
        self._ran = False  # the loop came to its end (not cancelled, not failed)
        self._drained = asyncio.Event()  # start requests wait on it when the frontier is full
        self._low_water = -1
        self._start_error: BaseException | None = None
        self._idle_mark = -1
        self._stopping = False
        self._stop_deadline: asyncio.TimerHandle | None = None
        self._allowed_status = frozenset(spider.handle_httpstatus_list)

    # -- public control -------------------------------------------------------------

    def emit(self, event: Event) -> None:
        """Queue ``event`` for dispatch (an ``EngineIdle`` handler may add requests this way)."""
        self.bus.emit(event)

    def stop(self, reason: str = "shutdown") -> None:
        """Stop scheduling; let in-flight downloads finish within ``shutdown_timeout``."""
        if self._stopping:
            return
        logger.info(
            "stopping crawl %r (%s); waiting for %d in-flight downloads", self.spider.name, reason, len(self._downloads)
        )
        self._stopping = True
        self.stats.finish_reason = reason
        loop = asyncio.get_running_loop()
        self._stop_deadline = loop.call_later(self.settings.shutdown_timeout, self._abort_downloads)
        self._wakeup.set()

    def set_delay(self, host: str | None, seconds: float, *, floor: bool = False) -> None:
        """``seconds`` between two downloads from ``host`` (throttle; robots Crawl-delay as a ``floor``)."""
        self.scheduler.set_delay(host, seconds, floor=floor)

    def _abort_downloads(self) -> None:
        for task in self._downloads:
            task.cancel()

    # -- main loop ------------------------------------------------------------------

    async def run(self) -> Stats:
        self._observers.open(self.sample)
        try:
            return await self._run()
        finally:
            self._observers.close(self.sample)

    def sample(self) -> tuple[Stats, int, int]:
        """Stats, requests queued, downloads in flight: what progress displays and metrics show."""
        return self.stats, self.scheduler.pending(), len(self._downloads)

    async def _run(self) -> Stats:
        saved = await self._open_state() if self._state is not None else None
        if saved is not None and saved.status == "finished":
            return self.stats
        try:
            if self._runs is not None:
                await self._runs.start(self.spider, self.settings)
            await self._components.open(self, self._wakeup.set)
            self.emit(SpiderOpened(spider=self.spider))
            if saved is not None and saved.status != "new":
                await self._resume(saved)
            elif saved is not None:  # where the outputs begin, should this run be killed before its first checkpoint
                await self._checkpoint("running")
            if (saved is not None and saved.start_done) or getattr(self.scheduler, "external_seeds", False):
                self._start_done = self._start_exhausted = True
            else:
                self._spawn(self._feed_start_requests())
            pipeline_task = asyncio.create_task(self._items.run())
            self._tasks.add(pipeline_task)
            await self._loop()
            self._ran = True
            if not self.stats.finish_reason:
                self.stats.finish_reason = "finished"
        except asyncio.CancelledError:
            self.stats.finish_reason = "cancelled"
            raise
        finally:
            await uninterruptible(self._close())
        if self._start_error is not None:
            raise self._start_error
        return self.stats

    async def _loop(self) -> None:
        while True:
            await self.bus.drain()
            if self._state is not None and self._state.due() and not self._stopping:
                await self._checkpoint("running")
                continue
            if not self._stopping:
                await self._pump()
            if self._stopping or self.scheduler.pending() <= self._low_water:
                self._drained.set()
            if self.bus:
                continue
            if self._idle():
                if self.bus.emitted != self._idle_mark and not self._stopping:
                    self.emit(EngineIdle(spider=self.spider))
                    self._idle_mark = self.bus.emitted
                    continue
                return
            self._wakeup.clear()
            await self._wakeup.wait()

    def _check_idle(self) -> None:
        """Wake the loop when work may have run out (it then checks for the end), or a checkpoint may go on."""
        idle = not self._downloads and not self._busy and not self._items and not self._retrying
        if idle or (self._hold is not None and self._busy == self._gated and not self._items):
            self._wakeup.set()

    def _idle(self) -> bool:
        if self._downloads or self._busy or self._items or (self._retrying and not self._stopping):
            return False
        return self._stopping or (self._start_done and not self.scheduler.pending())

    async def _pump(self) -> None:
        """Start downloads while the scheduler has requests and free slots."""
        while True:
            try:
                request = await self.scheduler.next_request()
            except Exception as exc:  # a broken frontier: stop cleanly, keep what is pending counted
                shown = None if isinstance(exc, EclawError) else exc  # our own errors say it all in one line
                logger.error("scheduler failed: %s: %s", type(exc).__name__, exc, exc_info=shown)
                self.stop("scheduler error")
                return
            if request is None:
                if self.scheduler.pending() <= self._low_water:
                    self._drained.set()
                return
            task = asyncio.create_task(self._download(request))
            self._downloads[task] = request
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            if self._watched[RequestScheduled]:
                self.emit(RequestScheduled(request=request))
            else:
                self.stats.requests_scheduled += 1
            if self._tracer is not None:
                self._tracer.scheduled(request)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- request lifecycle ----------------------------------------------------------

    async def _on_generated(self, event: RequestGenerated) -> None:
        await self._enqueue([event.request])

    async def _enqueue(self, requests: list[Request], *, retry: bool = False) -> None:
        if not retry:  # a retry is the same request again: counted once, when generated
            self.stats.requests_generated += len(requests)
        state = self._state
        self._assign(requests)
        try:
            reasons = await self.scheduler.enqueue(requests)
        except Exception as exc:
            shown = None if isinstance(exc, EclawError) else exc
            logger.error("scheduler failed on %d requests: %s", len(requests), exc, exc_info=shown)
            for request in requests:
                self.emit(RequestFailed(request=request, reason="scheduler error", error=exc))
            return
        if self._tracer is not None and not retry:
            self._tracer.generated(requests, reasons)
        if state is not None:
            for request, reason in zip(requests, reasons, strict=True):
                if reason is None:
                    if not retry:  # a retry was saved as changed when it was asked for
                        state.accepted(request)
                elif retry:
                    state.done(request)
        if self._watched[RequestDropped]:
            for request, reason in zip(requests, reasons, strict=True):
                if reason is not None:
                    self.emit(RequestDropped(request=request, reason=reason))
        else:
            self.stats.add_dropped_batch(reasons)
        if not self._stopping:
            await self._pump()

    def _assign(self, requests: Iterable[Request]) -> None:
        """Give new requests their id (logs, trace; the saved state's row)."""
        if self._state is not None:
            self._state.assign(requests)
            return
        ids = self._ids
        for request in requests:
            if not request._id:
                request._id = next(ids)

    def _drop(self, request: Request, reason: str) -> None:
        if self._tracer is not None:
            self._tracer.dropped(request, reason)
        if self._watched[RequestDropped]:
            self.emit(RequestDropped(request=request, reason=reason))
        else:
            self.stats.add_dropped(reason)

    async def _fetch_checked(self, request: Request) -> Response:
        response = await self.downloader.fetch(request)
        if response.status >= 400 and response.status not in self._allowed_status:
            meta = request.meta
            if not meta.get("handle_httpstatus_all") and response.status not in meta.get("handle_httpstatus_list", ()):
                raise HttpError(response)
        return response

    async def _download(self, request: Request) -> None:
        response = None
        request_id.set(request._id)  # this task's log lines name the request
        metrics = self._observers.metrics
        try:
            if metrics is None:
                response = await self._fetch(request)
            else:
                with metrics.latency.time():
                    response = await self._fetch(request)
        except IgnoreRequest as exc:
            self._drop(request, exc.reason)
            self._finished(request)
        except RetryRequest as exc:
            self.stats.retries += 1
            if self._state is not None:
                exc.request._id = exc.request._id or request._id
                self._state.accepted(exc.request)
            self.emit(
                RequestFailed(
                    request=request, reason=exc.reason, error=exc.error, attempt=attempts_of(request), final=False
                )
            )
            self._retrying.add(exc.request, exc.delay)
        except DownloadError as exc:
            logger.warning("failed %s: %s", redact_url(request.url), redact_url(str(exc)))
            self.emit(RequestFailed(request=request, reason=exc.reason, error=exc, attempt=attempts_of(request)))
        except asyncio.CancelledError:
            self.stats.requests_pending += 1  # aborted by shutdown: not crawled
            raise
        except Exception as exc:
            shown = redact_url(request.url)
            logger.error("error downloading %s: %s: %s", shown, type(exc).__name__, redact_url(str(exc)), exc_info=exc)
            reason = f"error: {type(exc).__name__}"
            self.emit(RequestFailed(request=request, reason=reason, error=exc, attempt=attempts_of(request)))
        finally:
            del self._downloads[asyncio.current_task()]  # type: ignore[arg-type]
            try:
                await self.scheduler.release(request)
            finally:
                self._check_idle()
        if not self._stopping:
            await self._pump()  # start the next download from here: no trip through the loop
        if response is None:
            return
        if self._watched[ResponseDownloaded]:
            self.emit(ResponseDownloaded(request=response.request, response=response))
        else:  # parse right here: the slot is already free, no extra task needed
            self._count_downloaded(response)
            self._busy += 1
            await self._parse(response)

    async def _on_downloaded(self, event: ResponseDownloaded) -> None:
        self._count_downloaded(event.response)
        self._busy += 1
        self._spawn(self._parse(event.response))

    def _count_downloaded(self, response: Response) -> None:
        if self._tracer is not None:
            self._tracer.downloaded(response)
        stats = self.stats
        stats.responses_downloaded += 1
        stats.status_counts[response.status] += 1
        stats.bytes_downloaded += len(response.body)

    def _retry_due(self, request: Request) -> None:
        """A retry's delay is over: back to the scheduler (not counted as a new request)."""
        if not self._stopping:
            self._busy += 1  # until it is queued: the crawl must not end in between
            self._spawn(self._requeue(request))
        else:
            self.stats.requests_pending += 1
            self._check_idle()

    async def _requeue(self, request: Request) -> None:
        try:
            await self._enqueue([request], retry=True)
        finally:
            self._busy -= 1
            self._check_idle()

    async def _on_failed(self, event: RequestFailed) -> None:
        if not event.final:
            return
        self.stats.add_failed(event.reason)
        self._failures.record(event.request, event.reason, event.error)
        if event.request.errback is not None:
            self._busy += 1
            self._spawn(self._recover(event))
        else:
            self._finished(event.request)

    # -- items ----------------------------------------------------------------------

    def _accept_item(self, event: ItemParsed) -> None:
        self.stats.items_parsed += 1
        if self._runs is not None:
            self._runs.observe(event.item)
        self._items.submit(event)

    # -- shutdown -------------------------------------------------------------------

    async def _close(self) -> None:
        if self._stop_deadline is not None:
            self._stop_deadline.cancel()
        tasks = [*self._tasks, *self._downloads]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        self.stats.requests_pending += self.scheduler.pending() + self._retrying.cancel_all()
        if self._state is not None:
            await self._close_state()
        await self._components.close()
        self._dead_letter.close()
        self._failures.close()
        self.stats.finished_at = time.time()
        if self._runs is not None and self._runs.log.run_id is not None:
            try:
                await self._runs.finish(self.stats)
            except Exception as exc:  # the crawl's data is safe; only its run record is missing
                logger.error("could not record the run in %s: %s", self._runs.log.path, exc)
        if self.stats.finish_reason != "cancelled":
            await self.bus.notify(SpiderClosed(spider=self.spider, stats=self.stats))
