"""The event trace (``--trace FILE``): the events of a crawl as JSON lines, a page's links summed
(``eclaw trace`` and ``eclaw report`` read it)."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from eclaw.contracts import BatchHandler, CrawlContext, Handler
from eclaw.events import (
    Event,
    FetcherChanged,
    ItemDropped,
    ItemEvent,
    ItemParsed,
    ItemStored,
    RequestDropped,
    RequestEvent,
    RequestFailed,
    RequestGenerated,
    RequestScheduled,
    ResponseDownloaded,
    ResponseParsed,
    SpiderClosed,
    SpiderOpened,
)
from eclaw.exceptions import ConfigError
from eclaw.http import Request, Response
from eclaw.items import item_type
from eclaw.observe.snapshots import Snapshots
from eclaw.security.redact import Redactor

__all__ = ["Tracer"]


class Tracer:
    """The trace of a crawl: one JSON line per step of each request and item, and what became of
    every link.

    Each line has ``t`` (seconds since the start), ``event`` (the event's name), ``id`` (the
    request's) and ``url``, and as they apply ``status``, ``reason``, ``attempt``, ``final``,
    ``items``, ``requests``, ``duplicates``, ``type`` (an item's), ``bytes``, ``fetcher`` (a download's,
    when the escalation ladder chose it; a ``FetcherChanged``'s, with ``host``, ``previous`` and ``reason``),
    ``snapshots`` and ``since`` (a ``SpiderOpened``'s: the crawl's snapshots folder and the time it opened,
    so the report links each failure to its snapshot).

    Every request has a line for its fate: ``RequestScheduled`` when its download starts (again
    for each retry), ``RequestDropped`` with the reason, ``RequestFailed``, and for a page
    ``ResponseDownloaded`` then ``ResponseParsed``. The links a page yields are not written one
    by one: those scheduled appear as ``RequestScheduled`` (URL and id), those dropped for a reason
    of their own (offsite, robots, depth...) as ``RequestDropped``, and those dropped because they
    were seen already are counted in the page's ``ResponseParsed`` line as ``duplicates`` (or in
    its ``RequestFailed`` line if its callback failed); a duplicate URL's first sighting has its
    own lines. ``RequestGenerated`` is written only for requests that come from no page (start
    requests, an ``EngineIdle`` handler's). So ``requests_generated`` is the number of request
    ids in the trace plus the duplicates, and ``requests_dropped`` the ``RequestDropped`` lines
    plus the duplicates (see :func:`eclaw.observe.report.totals`).

    ``url`` is the request's URL as written (fragment included) in the records of a request
    generated, scheduled or dropped, and the fetched URL (``response.url``: no fragment, after
    redirects) in the records of a response, an item or a failure. The commonest events are
    formatted by hand (a download, an item: several per page); the rest with ``json``.
    """

    BATCH = 64  # events whose lines are formatted and written together ...
    HELD = 8 << 20  # ... or fewer, once the bodies of the responses they hold reach this many bytes

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: TextIO | None = None
        self._redactor = Redactor()  # the crawl's, once it opens
        self._start = time.monotonic()
        self._pending: list[tuple[float, Callable[[Any, str], str], Any]] = []  # (clock, formatter, event)
        self._held = 0  # bytes of the bodies of the responses downloaded in the pending events
        self._parsing: dict[int, int] = {}  # request id of a page whose callback runs -> its duplicate links
        self._types: dict[type, str] = {}  # item class -> its item_type as a JSON string
        self._snapshots: dict[str, Any] = {}  # the snapshots folder and the start, for the report's links
        self._formats: dict[type[Event], Callable[[Any, str], str]] = {
            RequestScheduled: self._scheduled,
            ResponseDownloaded: self._downloaded,
            ResponseParsed: self._parsed,
            ItemParsed: self._item,
            ItemStored: self._item,
        }

    def subscriptions(self) -> list[tuple[type[Event], Handler]]:
        return [(Event, self.record)]

    def batch_subscriptions(self) -> list[tuple[type[Event], BatchHandler]]:
        """A page's links and their drops come a batch at a time: no event is built for each."""
        return [(RequestGenerated, self.generated), (RequestDropped, self.dropped)]

    async def open(self, crawl: CrawlContext) -> None:
        if crawl is not None:  # a test may open one on its own
            self._redactor = crawl.redactor
            kept = Snapshots.from_settings(crawl.settings, crawl.spider.name)
            if kept is not None:  # the report links each failure to the snapshot saved since
                self._snapshots = {"snapshots": str(kept.dir.resolve()), "since": round(time.time(), 3)}
        try:
            self._file = open(self.path, "w", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115, ASYNC230 - once
        except OSError as exc:
            raise ConfigError(f"cannot write the trace {self.path}: {exc.strerror}") from None
        self._start = time.monotonic()

    async def close(self) -> None:
        if self._file is not None:
            try:
                self._flush()
            finally:
                self._file.close()
                self._file = None

    # Events are kept with the time they came, and their lines formatted a batch at a time:
    # formatting each line as its event comes, between a crawl's downloads and parses, cost the
    # crawl twice as much (``make bench-costs``).

    def record(self, event: Event) -> None:
        """The subscriber: ``event`` and its time, for the next batch of lines."""
        self._pending.append((_monotonic(), self._formats.get(type(event)) or self._generic, event))
        if type(event) is ResponseDownloaded:
            self._held += len(event.response.body)
            if self._held >= self.HELD:
                self._flush()
        if len(self._pending) >= self.BATCH:
            self._flush()

    def generated(self, requests: Sequence[Request], parent: Response | None) -> None:
        """New requests: a line each for those from no page (a page's links show when scheduled or dropped)."""
        if parent is None:
            self._pending.append((_monotonic(), self._generated, requests))

    def dropped(self, drops: Sequence[tuple[Request, str]], parent: Response | None) -> None:
        """Requests dropped: a line each, except a parsed page's links seen already (counted for the page)."""
        page = parent.request._id if parent is not None else None
        self._pending.append((_monotonic(), self._dropped, (page, drops)))

    def _flush(self) -> None:
        """Write the pending lines, in order. ``t`` is formatted again only once the clock moved by
        the 0.1 ms it shows (formatting a float costs more than the rest of a line)."""
        pending, self._pending, self._held = self._pending, [], 0
        if self._file is None:
            return
        lines, start, tick, t = [], self._start, 0.0, ""
        failed: Exception | None = None
        for clock, form, what in pending:
            if clock >= tick:
                tick, t = clock + 0.0001, f"{clock - start:.4f}"
            try:
                lines.append(form(what, t))
            except Exception as exc:  # that event's line is lost, not the batch's
                failed = failed or exc
        self._file.write(self._redactor.text("".join(lines)))  # a batch at a time: one pass of the regexes
        if failed is not None:
            raise failed  # to the subscriber's caller: logged and counted as a handler's error

    @staticmethod
    def _generated(requests: Sequence[Request], t: str) -> str:
        return "".join(_request_line(t, "RequestGenerated", request) for request in requests)

    @staticmethod
    def _scheduled(event: RequestScheduled, t: str) -> str:
        return _request_line(t, "RequestScheduled", event.request)

    def _dropped(self, fields: tuple[int | None, Sequence[tuple[Request, str]]], t: str) -> str:
        page, drops = fields
        if page in self._parsing:
            written = [drop for drop in drops if drop[1] != "duplicate"]  # most of a page's drops: counted
            self._parsing[page] += len(drops) - len(written)
            drops = written
        head = f'{{"t":{t},"event":"RequestDropped","id":'
        return "".join(
            f'{head}{request._id},"url":{_quoted(request.url)},"reason":{_reason(reason)}}}\n'
            for request, reason in drops
        )

    def _downloaded(self, event: ResponseDownloaded, t: str) -> str:
        response = event.response
        self._parsing[response.request._id] = 0  # its callback runs next: its duplicate links are counted
        meta = response.request._meta
        rung = meta.get("rung") if meta else None  # the fetcher the escalation ladder chose
        return (
            f'{{"t":{t},"event":"ResponseDownloaded","id":{response.request._id},"url":{_quoted(response.url)},'
            f'"status":{response.status},"bytes":{len(response.body)}'
            + (f',"fetcher":{_dumps(rung)}}}\n' if rung else "}\n")
        )

    def _parsed(self, event: ResponseParsed, t: str) -> str:
        ident = event.request._id
        return (
            f'{{"t":{t},"event":"ResponseParsed","id":{ident},"url":{_quoted(event.response.url)},'
            f'"items":{event.items},"requests":{event.requests},"duplicates":{self._parsing.pop(ident, 0)}}}\n'
        )

    def _item(self, event: ItemParsed | ItemStored, t: str) -> str:
        item, response = event.item, event.response
        kind = self._types.get(type(item))
        if kind is None:  # the item's type (item_type), as a JSON string: one per class
            kind = self._types[type(item)] = _dumps(item_type(item))
        where = f',"id":{response.request._id},"url":{_quoted(response.url)}' if response is not None else ""
        name = "ItemParsed" if type(event) is ItemParsed else "ItemStored"
        return f'{{"t":{t},"event":"{name}"{where},"type":{kind}}}\n'

    def _generic(self, event: Event, t: str) -> str:
        record: dict[str, Any] = {"t": float(t), "event": type(event).__name__}
        if isinstance(event, RequestEvent):  # the fetched URL: no fragment
            record |= {"id": event.request._id, "url": event.request.url.partition("#")[0]}
        elif isinstance(event, ItemEvent) and event.response is not None:
            record |= {"id": event.response.request._id, "url": event.response.url}
        if isinstance(event, RequestFailed):
            record |= {"reason": event.reason, "attempt": event.attempt, "final": event.final}
            duplicates = self._parsing.pop(event.request._id, 0)  # a page whose callback failed
            if duplicates:
                record["duplicates"] = duplicates
        elif isinstance(event, ItemDropped):
            record |= {"reason": event.reason, "type": item_type(event.item)}
        elif isinstance(event, FetcherChanged):
            record |= {"host": event.host, "previous": event.previous, "fetcher": event.fetcher, "reason": event.reason}
        elif isinstance(event, SpiderOpened):
            record |= self._snapshots
        elif isinstance(event, SpiderClosed):  # what each fetcher cost (the ladder's counts), for the report
            record["fetchers"] = {k: v for k, v in event.stats.counters.items() if k.startswith("fetcher ")}
        return json.dumps(record, ensure_ascii=False) + "\n"


_dumps = json.JSONEncoder(ensure_ascii=False).encode
_monotonic = time.monotonic


def _request_line(t: str, event: str, request: Request) -> str:
    return f'{{"t":{t},"event":"{event}","id":{request._id},"url":{_quoted(request.url)}}}\n'


@functools.lru_cache(maxsize=64)
def _reason(reason: str) -> str:
    """A drop's reason as a JSON string (a few reasons, written over and over)."""
    return _dumps(reason)


def _quoted(url: str) -> str:
    """``url`` as a JSON string. Request URLs are percent-escaped (no control characters), but a
    quote or backslash is still checked for."""
    return _dumps(url) if '"' in url or "\\" in url else f'"{url}"'
