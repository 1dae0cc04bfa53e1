"""Watching a crawl: request-aware log lines (text or JSON, to a file), the event trace, and metrics.

Log records get ``spider``, ``run_id`` and ``request_id`` from context
variables: the crawl sets the first two for all its tasks, and each download
task sets the request's id, so every line logged about a request carries it.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TextIO

from eclaw.events import (
    Event,
    ItemDropped,
    ItemParsed,
    ItemStored,
    RequestFailed,
    ResponseParsed,
)
from eclaw.exceptions import ConfigError
from eclaw.items import item_type

if TYPE_CHECKING:
    from eclaw.http.message import Request, Response
    from eclaw.settings import Settings
    from eclaw.stats import Stats

__all__ = [
    "TEXT_FORMAT",
    "JsonFormatter",
    "LogContext",
    "Metrics",
    "Observers",
    "Tracer",
    "log_formatter",
    "request_id",
]

request_id: contextvars.ContextVar[int] = contextvars.ContextVar("eclaw_request_id", default=0)
_crawl: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar("eclaw_crawl", default=("-", "-"))


class LogContext(logging.Filter):
    """Adds ``spider``, ``run_id`` and ``request_id`` (0: no request) to every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.spider, record.run_id = _crawl.get()
        record.request_id = request_id.get()
        return True


class OwnCrawl(logging.Filter):
    """Lets through only the records of one crawl (its run id), so two crawls in one process that
    each have a ``log_file`` keep separate files."""

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id

    def filter(self, record: logging.LogRecord) -> bool:
        return _crawl.get()[1] == self.run_id


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, spider, run_id, request_id (and the error)."""

    def format(self, record: logging.LogRecord) -> str:
        data = {
            "time": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "spider": getattr(record, "spider", "-"),
            "run_id": getattr(record, "run_id", "-"),
            "request_id": getattr(record, "request_id", 0),
        }
        if record.exc_info:
            data["error"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False)


TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(spider)s %(run_id)s req=%(request_id)s]: %(message)s"


def log_formatter(kind: str) -> logging.Formatter:
    return JsonFormatter() if kind == "json" else logging.Formatter(TEXT_FORMAT)


class Tracer:
    """Writes every event of a crawl as one JSON line: ``t`` (seconds since the start), ``event``,
    ``id`` (the request's), ``url``, and as they apply ``status``, ``reason``, ``attempt``,
    ``final``, ``items``, ``type`` (an item's), ``bytes``.

    ``url`` is the request's URL as written (fragment included) in the records of a request
    generated, scheduled or dropped, and the fetched URL (``response.url``: no fragment, after
    redirects) in the records of a response, an item or a failure.

    The crawl calls :meth:`generated`, :meth:`scheduled`, :meth:`downloaded` and (from its
    accounting) :meth:`record` itself: those happen per link, download or item, and subscribing
    would take the engine off its fast path; the rare events arrive as a bus subscriber. A link dropped when
    it is generated is one ``RequestGenerated`` record with its ``dropped`` reason.
    """

    BUS_EVENTS = frozenset({"RequestFailed", "SpiderOpened", "SpiderClosed", "EngineIdle"})

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: TextIO | None = None
        self._write: Any = None
        self._ends: dict[str | None, str] = {}  # the end of a generated record, by drop reason
        self._start = time.monotonic()

    def open(self) -> None:
        try:
            self._file = open(self.path, "w", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115
        except OSError as exc:
            raise ConfigError(f"cannot write the trace {self.path}: {exc.strerror}") from None
        self._write = self._file.write
        self._start = time.monotonic()

    def generated(self, requests: Iterable[Request], reasons: Iterable[str | None]) -> None:
        head = f'{{"t":{time.monotonic() - self._start:.4f},"event":"RequestGenerated","id":'
        ends = self._ends
        lines = []
        for request, reason in zip(requests, reasons, strict=True):
            url = request.url
            end = ends.get(reason)
            if end is None:
                end = ends[reason] = "}\n" if reason is None else f',"dropped":{_dumps(reason)}}}\n'
            lines.append(f'{head}{request._id},"url":{_quoted(url)}{end}')
        self._write("".join(lines))

    def dropped(self, request: Request, reason: str) -> None:
        t = round(time.monotonic() - self._start, 4)
        self._write(
            f'{{"t":{t},"event":"RequestDropped","id":{request._id},"url":{_dumps(request.url)},'
            f'"reason":{_dumps(reason)}}}\n'
        )

    def scheduled(self, request: Request) -> None:
        t = round(time.monotonic() - self._start, 4)
        self._write(f'{{"t":{t},"event":"RequestScheduled","id":{request._id},"url":{_quoted(request.url)}}}\n')

    def downloaded(self, response: Response) -> None:
        t, request = round(time.monotonic() - self._start, 4), response.request
        self._write(
            f'{{"t":{t},"event":"ResponseDownloaded","id":{request._id},"url":{_quoted(response.url)},'
            f'"status":{response.status},"bytes":{len(response.body)}}}\n'
        )

    async def __call__(self, event: Event) -> None:
        self.record(event)

    def parsed(self, event: ResponseParsed) -> None:
        t, request = time.monotonic() - self._start, event.request
        self._write(
            f'{{"t":{t:.4f},"event":"ResponseParsed","id":{request._id},"url":{_quoted(event.response.url)},'
            f'"items":{event.items},"requests":{event.requests}}}\n'
        )

    def item(self, event: ItemParsed | ItemStored) -> None:
        t, response = time.monotonic() - self._start, event.response
        where = f',"id":{response.request._id},"url":{_quoted(response.url)}' if response is not None else ""
        kind = type(event).__name__
        self._write(f'{{"t":{t:.4f},"event":"{kind}"{where},"type":{_dumps(item_type(event.item))}}}\n')

    def record(self, event: Event) -> None:
        """Write one event of any kind (the rarer ones; the crawl calls the others directly)."""
        if self._file is None:
            return
        record: dict[str, Any] = {"t": round(time.monotonic() - self._start, 4), "event": type(event).__name__}
        request: Request | None = getattr(event, "request", None)
        response = getattr(event, "response", None)
        if request is None and response is not None:
            request = response.request
        if request is not None:
            record["id"] = request._id
            record["url"] = response.url if response is not None else request.url.partition("#")[0]
        if isinstance(event, RequestFailed):
            record |= {"reason": event.reason, "attempt": event.attempt, "final": event.final}
        elif isinstance(event, ItemDropped):
            record["reason"] = event.reason
        elif isinstance(event, ResponseParsed):
            record |= {"items": event.items, "requests": event.requests}
        if isinstance(event, ItemParsed | ItemStored | ItemDropped):
            record["type"] = item_type(event.item)
        self._write(json.dumps(record, ensure_ascii=False) + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


_dumps = json.JSONEncoder(ensure_ascii=False).encode


def _quoted(url: str) -> str:
    """``url`` as a JSON string. Request URLs are percent-escaped (no control characters), but a
    quote or backslash is still checked for."""
    return _dumps(url) if '"' in url or "\\" in url else f'"{url}"'


class Metrics:
    """A Prometheus endpoint for one crawl (``metrics_port``; needs ``prometheus-client``).

    Counters follow the stats; gauges show the queue, downloads in flight and the
    event loop's lag; a histogram times downloads."""

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


class Observers:
    """What a crawl's settings ask for: a log file, the trace, metrics; set up and torn down with the crawl."""

    def __init__(self, settings: Settings, spider: str) -> None:
        self.run_id = uuid.uuid4().hex[:12]
        self.spider = spider
        self.settings = settings
        self.tracer = Tracer(settings.trace) if settings.trace else None
        self.metrics = Metrics(settings.metrics_port) if settings.metrics_port else None
        self._handler: logging.Handler | None = None
        self._task: asyncio.Task[None] | None = None

    def open(self, sample: Any) -> None:
        """``sample()`` returns (stats, queue size, downloads in flight) for the metrics."""
        _crawl.set((self.spider, self.run_id))  # this task's context: the crawl's tasks inherit it
        if self.settings.log_file:
            try:
                self._handler = logging.FileHandler(self.settings.log_file, encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot write the log file {self.settings.log_file}: {exc.strerror}") from None
            self._handler.addFilter(OwnCrawl(self.run_id))
            self._handler.addFilter(LogContext())
            self._handler.setFormatter(log_formatter(self.settings.log_format))
            logging.getLogger("eclaw").addHandler(self._handler)
        if self.tracer is not None:
            self.tracer.open()
        if self.metrics is not None:
            self.metrics.start()
            self._task = asyncio.create_task(self._watch(sample))

    async def _watch(self, sample: Any) -> None:
        assert self.metrics is not None
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(0.25)
            self.metrics.loop_lag.set(max(0.0, loop.time() - before - 0.25))
            self.metrics.update(*sample())

    def close(self, sample: Any) -> None:
        if self._task is not None:
            self._task.cancel()
        if self.metrics is not None:
            self.metrics.update(*sample())
            self.metrics.stop()
        if self.tracer is not None:
            self.tracer.close()
        if self._handler is not None:
            logging.getLogger("eclaw").removeHandler(self._handler)
            self._handler.close()
            self._handler = None
