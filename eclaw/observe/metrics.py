"""Prometheus metrics (``--metrics-port N``): a subscriber like any other, serving the crawl's
counts, its queue, downloads in flight, the event loop's lag and download times."""

from __future__ import annotations

import asyncio
import bisect
import math
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from eclaw.contracts import CrawlContext, Handler
from eclaw.events import Event, RequestFailed, RequestScheduled, ResponseDownloaded
from eclaw.exceptions import ConfigError

if TYPE_CHECKING:
    from aiohttp import web

    from eclaw.stats import Stats

__all__ = ["DownloadTimes", "Metrics"]

_monotonic = time.monotonic


class Metrics:
    """A Prometheus endpoint for one crawl (``metrics_port``; needs ``prometheus-client``).

    Counters follow the stats and gauges show the queue and downloads in flight, all brought up
    to date when scraped; a gauge shows the event loop's lag (sampled every 0.25 s) and a
    histogram times downloads (from ``RequestScheduled`` to the response or the failure)."""

    def __init__(self, port: int) -> None:
        try:
            import prometheus_client as prom
        except ImportError:
            raise ConfigError("metrics_port needs prometheus-client: pip install 'eclaw[metrics]'") from None
        self.port = port
        self.registry = prom.CollectorRegistry()  # the crawl's own: no process-wide state
        r = self.registry
        self.responses = prom.Counter("eclaw_responses", "Responses by status", ["status"], registry=r)
        self.requests = prom.Counter("eclaw_requests", "Requests that ended, by outcome", ["outcome"], registry=r)
        self.bytes = prom.Counter("eclaw_downloaded_bytes", "Bytes downloaded", registry=r)
        self.items = prom.Counter("eclaw_items", "Items by outcome", ["outcome"], registry=r)
        self.retries = prom.Counter("eclaw_retries", "Attempts tried again", registry=r)
        self.queue = prom.Gauge("eclaw_queue", "Requests waiting in the frontier", registry=r)
        self.in_flight = prom.Gauge("eclaw_in_flight", "Downloads in flight", registry=r)
        self.loop_lag = prom.Gauge("eclaw_event_loop_lag_seconds", "How late the event loop wakes", registry=r)
        self.latency = DownloadTimes(prom.Histogram.DEFAULT_BUCKETS)  # prometheus-client's own
        r.register(self.latency)
        self._server: web.AppRunner | None = None
        self._seen: dict[str, float] = {}
        self._started: dict[int, float] = {}  # request id -> when its download started
        self._crawl: CrawlContext | None = None
        self._task: asyncio.Task[None] | None = None

    def subscriptions(self) -> list[tuple[type[Event], Handler]]:
        return [(RequestScheduled, self._scheduled), (ResponseDownloaded, self._ended), (RequestFailed, self._ended)]

    def _scheduled(self, event: RequestScheduled) -> None:
        self._started[event.request._id] = _monotonic()  # the loop's clock

    def _ended(self, event: ResponseDownloaded | RequestFailed) -> None:
        started = self._started.pop(event.request._id, None)
        if started is not None:
            self.latency.observe(_monotonic() - started)

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        await self.start()
        self._task = asyncio.create_task(self._watch())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.stop()

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(0.25)
            self.loop_lag.set(max(0.0, loop.time() - before - 0.25))

    async def start(self) -> None:
        """Serve the registry at ``/metrics`` from the crawl's own event loop: no thread beside the
        crawl (a server thread, idle as it is, cost the crawl 2-4 % of its pages a second)."""
        import prometheus_client as prom
        from aiohttp import web

        async def scrape(request: web.Request) -> web.Response:
            if self._crawl is not None:  # counts as they are now, not as a timer last saw them
                self.update(self._crawl.stats, self._crawl.queued, self._crawl.in_flight)
            body = prom.generate_latest(self.registry)
            return web.Response(body=body, headers={"Content-Type": prom.CONTENT_TYPE_LATEST})

        app = web.Application()
        app.router.add_get("/metrics", scrape)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", self.port).start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(f"cannot serve metrics on port {self.port}: {exc.strerror}") from None
        self._server = runner

    def update(self, stats: Stats, queue: int, in_flight: int) -> None:
        """Bring the counters up to ``stats`` (they only grow: add what is new)."""
        for status, n in stats.status_counts.items():
            self._add(self.responses.labels(str(status)), f"status {status}", n)
        for outcome, n in (
            ("parsed", stats.requests_parsed),
            ("failed", stats.requests_failed),
            ("dropped", stats.requests_dropped),
        ):
            self._add(self.requests.labels(outcome), outcome, n)
        for outcome, n in (("stored", stats.items_stored), ("dropped", stats.items_dropped)):
            self._add(self.items.labels(outcome), "items " + outcome, n)
        self._add(self.bytes, "bytes", stats.bytes_downloaded)
        self._add(self.retries, "retries", stats.retries)
        self.queue.set(queue)
        self.in_flight.set(in_flight)

    def _add(self, counter: Any, key: str, total: float) -> None:
        new = total - self._seen.get(key, 0)
        if new > 0:
            counter.inc(new)
            self._seen[key] = total

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.cleanup()
            self._server = None


class DownloadTimes:
    """The ``eclaw_download_seconds`` histogram over ``buckets`` (their upper bounds; ``inf`` is
    implied), counted by the crawl as plain integers and turned into a metric only when scraped (on
    the crawl's loop): prometheus-client's own ``Histogram.observe`` takes locks, ten times the cost
    of a count here."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.bounds = tuple(sorted(bound for bound in buckets if bound != math.inf))
        self._counts = [0] * (len(self.bounds) + 1)  # per bucket (the last: over every bound), not cumulative
        self._sum = 0.0

    def observe(self, seconds: float) -> None:
        self._counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self._sum += seconds

    def collect(self) -> Iterator[Any]:
        """The histogram as prometheus-client's registry asks for it."""
        from prometheus_client.core import HistogramMetricFamily

        counts, total, running = list(self._counts), self._sum, 0
        buckets = []
        for bound, count in zip((*map(str, self.bounds), "+Inf"), counts, strict=True):
            running += count
            buckets.append((bound, running))
        yield HistogramMetricFamily("eclaw_download_seconds", "Download time", buckets=buckets, sum_value=total)
