"""One running crawl: its components wired through the event bus, and the loop that feeds the downloads.

Internal; users drive crawls through :class:`eclaw.Engine`. Each component owns
its events (see :mod:`eclaw.events`): the intake ``RequestGenerated``, the fetch
runner the download slots and ``RequestScheduled``, the callback runner
``ResponseDownloaded``, the pipeline runner ``ItemParsed``, the accounting the
terminal events. The loop pumps the fetch runner when woken, takes
checkpoints, and ends the crawl when there is nothing left to do.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from eclaw.contracts import Handler, RetriesEmptyPages, Seeded, Shared, TakesBatches, Watcher, WatchesPages
from eclaw.core.accounting import Accounting, Completions, DroppedIds, Ids, Intake, Journal
from eclaw.core.activity import Activity
from eclaw.core.budgets import PageBudget
from eclaw.core.bus import Batched, EventBus
from eclaw.core.callbacks import CallbackRunner
from eclaw.core.checkpoint import Checkpointer
from eclaw.core.components import CrawlComponents
from eclaw.core.fetch import FetchRunner, RetryQueue
from eclaw.core.lending import Lending
from eclaw.core.lifecycle import Lifecycle, uninterruptible
from eclaw.core.pipeline import PipelineRunner
from eclaw.core.records import Records
from eclaw.core.start import StartFeeder
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
from eclaw.exceptions import RetryRequest
from eclaw.frontier.base import Fed
from eclaw.http import Request
from eclaw.observe.logs import crawl_logs
from eclaw.observe.snapshots import Snapshots
from eclaw.security.redact import Redactor
from eclaw.stats import Stats

__all__ = ["Crawl"]

logger = logging.getLogger(__name__)
_CALLBACKS_BEHIND = 4  # x concurrency: downloads whose callbacks still run, before no more start

Subscribers = Callable[[type[Event]], tuple[Handler, ...]]


class Crawl:
    """One spider run; also the :class:`~eclaw.contracts.CrawlContext` its plug-ins and handlers see."""

    def __init__(self, components: CrawlComponents, subscribers: Subscribers) -> None:
        self.spider = components.spider
        self.spider.crawl = self  # self.settings, self.stats in callbacks
        self.settings = components.settings
        self.frontier = components.frontier
        self.outputs = components.outputs
        self.cookies = components.cookies
        self.stats = Stats(spider=self.spider.name)
        self.run_id = uuid.uuid4().hex[:12]
        self.redactor = Redactor.for_spider(self.settings, self.spider)  # every writer's one boundary
        self.records = Records(self.settings, self.spider.name, self.run_id, self.redactor)
        self.snapshots = Snapshots.from_settings(self.settings, self.spider.name, self.redactor)  # or None
        pages = [output for output in components.outputs.values() if isinstance(output, WatchesPages)]
        self.bus = EventBus(_with_watchers(subscribers, [*components.watchers, *pages]), self.stats, self)
        self._components = components
        plugins = [*components.middlewares, *components.pipelines, *components.outputs.values()]
        self._lifecycle = Lifecycle(components.frontier, components.fetcher, plugins)
        self._stopping = False
        self._stop_deadline: asyncio.TimerHandle | None = None
        self._ran = False  # the loop came to its end (not cancelled, not failed)
        self._idle_mark = -1
        self._build(components.state or Ids())

    def _item_runner(self) -> PipelineRunner:
        """The pipelines, then the outputs that take items (those of pages watch the bus), each listed at 0."""
        outputs = {name: o for name, o in self._components.outputs.items() if not isinstance(o, WatchesPages)}
        for name in outputs:
            self.stats.items_written[name] += 0
        return PipelineRunner(
            self._components.pipelines, outputs, self.spider, self.records.dead_letter, self.stats, self.bus.publish,
            self._item_done,
        )  # fmt: skip

    def _build(self, journal: Journal) -> None:
        """The collaborators, in the order a page meets them, and the events each of them owns."""
        components, settings, stats, bus = self._components, self.settings, self.stats, self.bus
        self.items = self._item_runner()
        self._retrying = RetryQueue(self._retry_due)
        # a download's task runs its callback too: at most 4 x concurrency callbacks behind the downloads
        self.activity = activity = Activity(self.items, self._retrying, (1 + _CALLBACKS_BEHIND) * settings.concurrency)
        shared = Completions(self.frontier, self.items, activity) if isinstance(self.frontier, Shared) else None
        self._completions = shared
        self.start = StartFeeder(
            self.spider, self.frontier, bus, high_water=max(1000, settings.concurrency * 8), stopping=self.stopping,
            stop=self.stop, wake=activity.wake, stats=stats,
        )  # fmt: skip
        callbacks = CallbackRunner(
            spider=self.spider, parser=components.parser, bus=bus, items=self.items, stats=stats, activity=activity,
            stop=self.stop, referer=settings.referer, snapshots=self.snapshots,
            empty=[m for m in components.middlewares if isinstance(m, RetriesEmptyPages)], retry=self._retry,
        )  # fmt: skip
        accounting = Accounting(
            stats=stats, journal=journal, failures=self.records.failures, drops=self.records.drops,
            completions=shared, errback=callbacks.recover, snapshots=self.snapshots,
        )  # fmt: skip
        self.fetches = FetchRunner(
            fetcher=components.fetcher, middlewares=components.middlewares, frontier=self.frontier, bus=bus,
            stats=stats, journal=journal, activity=activity, retrying=self._retrying,
            handled=frozenset(self.spider.handle_httpstatus_list), pages=PageBudget(settings.max_pages),
            stop=self.stop, starved=self.start.room, finished=accounting.finished,
        )  # fmt: skip
        self.intake = Intake(self.frontier, bus, stats, journal, activity, self.fetches.pump)
        self.lending = self._lending(journal)
        self.checkpointer = self._checkpointer()
        # a request gets its id as it enters the crawl, the one place ids are given (those another process
        # found or lent get one in Lending): before the trace or any subscriber sees it
        bus.own_batched(RequestGenerated, Batched(self.intake.generated, _generated, _unpack_generated, journal.assign))
        bus.own(RequestScheduled, self.fetches.scheduled)
        bus.own(ResponseDownloaded, callbacks.downloaded)
        bus.own(ItemParsed, self.items.submit)
        bus.own(ResponseParsed, accounting.parsed)
        bus.own(RequestFailed, accounting.failed)
        ids = DroppedIds(journal)  # a request refused as it was yielded (a sitemap's limits) is never generated
        bus.own_batched(RequestDropped, Batched(accounting.dropped, _dropped, _unpack_dropped, ids.assign))
        bus.own(ItemStored, accounting.stored)
        bus.own(ItemDropped, accounting.item_dropped)
        for watcher in components.watchers:
            for kind, taker in watcher.batch_subscriptions() if isinstance(watcher, TakesBatches) else ():
                bus.subscribe_batches(kind, taker)

    def _lending(self, journal: Journal) -> Lending | None:
        """A process of a crawl on several (``--processes``): the others' links and loans come in here."""
        if not isinstance(self.frontier, Fed):
            return None
        return Lending(
            self.frontier, intake=self.intake, journal=journal, activity=self.activity, stats=self.stats,
            state=self._components.state, stopping=self.stopping, pump=self.fetches.pump,
        )  # fmt: skip

    def _checkpointer(self) -> Checkpointer | None:
        """``--state``: checkpoints at a barrier, resume from the last one."""
        state = self._components.state
        if state is None:
            return None
        return Checkpointer(
            state, spider=self.spider, stats=self.stats, frontier=self.frontier, activity=self.activity,
            intake=self.intake, outputs=self._components.resumables(self.records.files()), redactor=self.redactor,
            start=self.start, lending=self.lending,
        )  # fmt: skip

    # -- what plug-ins and handlers see -----------------------------------------------

    @property
    def queued(self) -> int:
        return self.frontier.pending()

    @property
    def in_flight(self) -> int:
        return self.activity.downloads

    def emit(self, event: Event) -> None:
        """Publish ``event`` from outside the crawl's tasks (an ``EngineIdle`` handler adding requests)."""
        self.activity.callbacks += 1  # counted at once: the loop must not end before it is handled

        async def publish() -> None:
            try:
                await self.bus.publish(event)
            finally:
                self.activity.callbacks -= 1
                self.activity.check()

        self.activity.spawn(publish())

    async def publish(self, event: Event) -> None:
        """Publish ``event`` now, in this task (a plug-in's own events: the store's item deltas)."""
        await self.bus.publish(event)

    def stopping(self) -> bool:
        """Whether the crawl is stopping: no download starts, no start request is read."""
        return self._stopping

    def stop(self, reason: str = "shutdown") -> None:
        """Stop scheduling; let in-flight downloads finish within ``shutdown_timeout``."""
        if self._stopping:
            return
        logger.info(
            "stopping crawl %r (%s); waiting for %d in-flight downloads", self.spider.name, reason, self.in_flight
        )
        self._stopping = True
        self.fetches.halt()
        self.stats.finish_reason = reason
        loop = asyncio.get_running_loop()
        self._stop_deadline = loop.call_later(self.settings.shutdown_timeout, self.fetches.abort)
        self.activity.wake()

    def set_delay(self, host: str | None, seconds: float, *, floor: bool = False) -> None:
        """``seconds`` between two downloads from ``host`` (throttle; robots Crawl-delay as a ``floor``)."""
        self.frontier.set_delay(host, seconds, floor=floor)

    def dead_letter(self, output: object, items: list[Any], error: BaseException) -> None:
        """``output`` (one that buffers) could not write ``items`` it had accepted: dead-letter them for it."""
        names = {id(o): name for name, o in self.outputs.items()}
        self.items.dead_letter(names.get(id(output), repr(output)), items, error)

    # -- the run ----------------------------------------------------------------------

    async def run(self) -> Stats:
        settings = self.settings
        with crawl_logs(self.spider.name, self.run_id, settings.log_file, settings.log_format, self.redactor):
            opened: list[Watcher] = []
            try:
                for watcher in self._components.watchers:
                    await watcher.open(self)
                    opened.append(watcher)
                stats = await self._run()
            finally:
                for watcher in reversed(opened):
                    try:
                        await watcher.close()
                    except Exception as exc:  # the crawl's data is safe; only what this watcher keeps is not
                        logger.error("error closing %r: %s", watcher, exc)
            self._log_end()
            return stats

    async def _run(self) -> Stats:
        saved = await self.checkpointer.open() if self.checkpointer is not None else None
        if saved is not None and saved.status == "finished":
            return self.stats
        self.records.open()
        try:
            await self._lifecycle.open(self, self.activity.wake)
            await self.bus.notify(SpiderOpened(spider=self.spider))
            await self._begin(saved)
            await self._loop()
            self._ran = True
            if not self.stats.finish_reason:
                self.stats.finish_reason = "finished"
        except asyncio.CancelledError:
            self.stats.finish_reason = "cancelled"
            raise
        finally:
            await uninterruptible(self._close())
        if self.start.error is not None:
            raise self.start.error
        return self.stats

    async def _begin(self, saved: Any) -> None:
        """Resume what was saved, or feed the start requests; start the pipeline runner."""
        if saved is not None and saved.status != "new":
            assert self.checkpointer is not None
            await self.checkpointer.resume(saved)
        elif saved is not None and self.checkpointer is not None:  # where the outputs begin, should it be killed
            await self.checkpointer.checkpoint("running")
        if (saved is not None and saved.start_done) or (isinstance(self.frontier, Seeded) and self.frontier.seeded):
            self.start.skip()
        else:
            self.activity.spawn(self.start.run())
        self.activity.spawn(self.items.run())

    async def _loop(self) -> None:
        activity, start, checkpointer = self.activity, self.start, self.checkpointer
        while True:
            # cleared before the pump, never after it: a wake that comes while next_request() awaits
            # (a Redis frontier's lease, a timer that fires meanwhile) is kept for the wait below
            activity.wakeup.clear()
            if checkpointer is not None and checkpointer.due() and not self._stopping:
                await checkpointer.checkpoint("running")
                continue
            await self.fetches.pump()
            start.room()
            if activity.quiet(stopping=self._stopping) and (
                self._stopping or (start.done and not self.frontier.pending())
            ):
                if self._stopping or activity.admitted == self._idle_mark:
                    return
                self._idle_mark = activity.admitted  # EngineIdle handlers may add requests
                await self.bus.notify(EngineIdle(spider=self.spider))
                if self.lending is not None:
                    await self.lending.idle()  # until the other processes send work, or all are done
                continue
            await activity.wakeup.wait()

    async def _retry(self, request: Request, again: RetryRequest) -> None:
        """A callback asked for ``request`` again (a page with no items retried): the fetch runner retries it."""
        await self.fetches.retry(request, again)

    def _retry_due(self, request: Request) -> None:
        """A retry's delay is over: back to the frontier (not counted as a new request)."""
        if self._stopping:
            self.stats.requests_pending += 1
            self.activity.check()
        else:
            self.activity.requeuing += 1  # counted until queued: the crawl must not end in between
            self.activity.spawn(self._requeue(request))

    async def _requeue(self, request: Request) -> None:
        try:
            await self.intake.requeue([request])
        finally:
            self.activity.requeuing -= 1
            self.activity.check()

    def _item_done(self) -> None:
        if self._completions is not None:
            self._completions.items_finished()
        else:
            self.activity.check()

    async def _close(self) -> None:
        if self._stop_deadline is not None:
            self._stop_deadline.cancel()
        tasks = list(self.activity.tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        self.stats.requests_pending += self.frontier.pending() + self._retrying.cancel_all()
        if self.checkpointer is not None:
            await self.checkpointer.close(ran=self._ran)
        await self._lifecycle.close()
        self.records.close()
        self.stats.finished_at = time.time()
        if self.stats.finish_reason != "cancelled":
            await self.bus.notify(SpiderClosed(spider=self.spider, stats=self.stats))

    def _log_end(self) -> None:
        """The crawl's last line (in its log file too): how it ended, and whether any item missed an output."""
        stats = self.stats
        missed = sum(stats.items_dead_lettered.values())
        lost = f", {stats.items_lost} items lost" if stats.items_lost else ""
        dead = f", {missed} items dead-lettered to {self.records.dead_letter.path}" if missed else ""
        logger.log(
            logging.INFO if stats.clean else logging.WARNING,
            "crawl %r %s: %d requests, %d items in %.1fs%s%s",
            self.spider.name,
            stats.finish_reason,
            stats.requests_generated,
            stats.items_stored,
            stats.elapsed,
            dead,
            lost,
        )


def _with_watchers(subscribers: Subscribers, watchers: list[Watcher | WatchesPages]) -> Subscribers:
    """The engine's subscribers, then the crawl's own watchers' (trace, metrics, quality profile) and
    the outputs that watch pages (opened and closed as outputs, not here)."""
    own: dict[type[Event], list[tuple[Handler, set[type[Event]]]]] = {}
    for watcher in watchers:
        batched = {kind for kind, _ in watcher.batch_subscriptions()} if isinstance(watcher, TakesBatches) else set()
        for kind, handler in watcher.subscriptions():
            own.setdefault(kind, []).append((handler, batched))  # not for the kinds it takes in batches

    def handlers(kind: type[Event]) -> tuple[Handler, ...]:
        mine = (h for base in kind.__mro__ for h, batched in own.get(base, ()) if kind not in batched)
        return subscribers(kind) + tuple(mine)

    return handlers


def _generated(request: Request, parent: Any) -> RequestGenerated:
    return RequestGenerated(request=request, parent=parent)


def _unpack_generated(event: RequestGenerated) -> tuple[Request, Any]:
    return event.request, event.parent


def _dropped(drop: tuple[Request, str], context: Any) -> RequestDropped:
    return RequestDropped(request=drop[0], reason=drop[1])


def _unpack_dropped(event: RequestDropped) -> tuple[tuple[Request, str], Any]:
    return (event.request, event.reason), None
