"""Prometheus metrics (``--metrics-port N``): a subscriber like any other, serving the crawl's
counts, its queue, downloads in flight, the event loop's lag and download times."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from eclaw.contracts import CrawlContext, Handler
from eclaw.events import Event, RequestFailed, RequestScheduled, ResponseDownloaded
from eclaw.exceptions import ConfigError

if TYPE_CHECKING:
    from eclaw.stats import Stats

__all__ = ["Metrics"]


class Metrics:
    """A Prometheus endpoint for one crawl (``metrics_port``; needs ``prometheus-client``).

    Counters follow the stats; gauges show the queue, downloads in flight and the
    event loop's lag; a histogram times downloads (from ``RequestScheduled`` to the
    response or the failure)."""

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
        self.latency = prom.Histogram("eclaw_download_seconds", "Download time", registry=r)
        self._server: Any = None
        self._seen: dict[str, float] = {}
        self._started: dict[int, float] = {}  # request id -> when its download started
        self._crawl: CrawlContext | None = None
        self._task: asyncio.Task[None] | None = None

    def subscriptions(self) -> list[tuple[type[Event], Handler]]:
        return [(RequestScheduled, self._scheduled), (ResponseDownloaded, self._ended), (RequestFailed, self._ended)]

    def _scheduled(self, event: RequestScheduled) -> None:
        self._started[event.request._id] = asyncio.get_running_loop().time()

    def _ended(self, event: ResponseDownloaded | RequestFailed) -> None:
        started = self._started.pop(event.request._id, None)
        if started is not None:
            self.latency.observe(asyncio.get_running_loop().time() - started)

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        self.start()
        self._task = asyncio.create_task(self._watch(crawl))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._crawl is not None:
            self.update(self._crawl.stats, self._crawl.queued, self._crawl.in_flight)
        self.stop()

    async def _watch(self, crawl: CrawlContext) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(0.25)
            self.loop_lag.set(max(0.0, loop.time() - before - 0.25))
            self.update(crawl.stats, crawl.queued, crawl.in_flight)

    def start(self) -> None:
        import prometheus_client as prom

        try:
            self._server, _ = prom.start_http_server(self.port, addr="127.0.0.1", registry=self.registry)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on port {self.port}: {exc.strerror}") from None

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

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
