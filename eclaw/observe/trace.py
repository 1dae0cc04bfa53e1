"""The event trace (``--trace FILE``): every event of a crawl as one JSON line, written by a
subscriber like any other (``eclaw trace`` and ``eclaw report`` read it)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TextIO

from eclaw.contracts import CrawlContext, Handler
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
)
from eclaw.exceptions import ConfigError
from eclaw.items import item_type

__all__ = ["Tracer"]



class Tracer:
    """One JSON line per event: ``t`` (seconds since the start), ``event``, ``id`` (the request's),
    ``url``, and as they apply ``status``, ``reason``, ``attempt``, ``final``, ``items``,
    ``requests``, ``type`` (an item's), ``bytes``, ``fetcher`` (a download's, when the escalation
    ladder chose it; a ``FetcherChanged``'s, with ``host``, ``previous`` and ``reason``).

    ``url`` is the request's URL as written (fragment included) in the records of a request
    generated, scheduled or dropped, and the fetched URL (``response.url``: no fragment, after
    redirects) in the records of a response, an item or a failure. The commonest events are
    formatted by hand (a link, a download, an item: several per page); the rest with ``json``.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: TextIO | None = None
        self._write: Callable[[str], Any] = lambda text: None
        self._start = time.monotonic()
        self._formats: dict[type[Event], Callable[[Any, float], str]] = {
            RequestGenerated: self._request,
            RequestScheduled: self._request,
            RequestDropped: self._dropped,
            ResponseDownloaded: self._downloaded,
            ResponseParsed: self._parsed,
            ItemParsed: self._item,
            ItemStored: self._item,
        }

    def subscriptions(self) -> list[tuple[type[Event], Handler]]:
        return [(Event, self.record)]

    async def open(self, crawl: CrawlContext) -> None:
        try:
            self._file = open(self.path, "w", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115, ASYNC230 - once
        except OSError as exc:
            raise ConfigError(f"cannot write the trace {self.path}: {exc.strerror}") from None
        self._write = self._file.write
        self._start = time.monotonic()

    async def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            self._write = lambda text: None

    def record(self, event: Event) -> None:
        """The subscriber: one line for ``event``."""
        t = time.monotonic() - self._start
        form = self._formats.get(type(event))
        self._write(form(event, t) if form is not None else self._generic(event, t))

    @staticmethod
    def _request(event: RequestGenerated | RequestScheduled, t: float) -> str:
        request = event.request
        return f'{{"t":{t:.4f},"event":"{type(event).__name__}","id":{request._id},"url":{_quoted(request.url)}}}\n'

    @staticmethod
    def _dropped(event: RequestDropped, t: float) -> str:
        request = event.request
        return (
            f'{{"t":{t:.4f},"event":"RequestDropped","id":{request._id},"url":{_quoted(request.url)},'
            f'"reason":{_dumps(event.reason)}}}\n'
        )

    @staticmethod
    def _downloaded(event: ResponseDownloaded, t: float) -> str:
        response = event.response
        meta = response.request._meta
        rung = meta.get("rung") if meta else None  # the fetcher the escalation ladder chose
        return (
            f'{{"t":{t:.4f},"event":"ResponseDownloaded","id":{response.request._id},"url":{_quoted(response.url)},'
            f'"status":{response.status},"bytes":{len(response.body)}'
            + (f',"fetcher":{_dumps(rung)}}}\n' if rung else "}\n")
        )

    @staticmethod
    def _parsed(event: ResponseParsed, t: float) -> str:
        return (
            f'{{"t":{t:.4f},"event":"ResponseParsed","id":{event.request._id},"url":{_quoted(event.response.url)},'
            f'"items":{event.items},"requests":{event.requests}}}\n'
        )

    @staticmethod
    def _item(event: ItemParsed | ItemStored, t: float) -> str:
        response = event.response
        where = f',"id":{response.request._id},"url":{_quoted(response.url)}' if response is not None else ""
        return f'{{"t":{t:.4f},"event":"{type(event).__name__}"{where},"type":{_dumps(item_type(event.item))}}}\n'

    @staticmethod
    def _generic(event: Event, t: float) -> str:
        record: dict[str, Any] = {"t": round(t, 4), "event": type(event).__name__}
        if isinstance(event, RequestEvent):  # the fetched URL: no fragment
            record |= {"id": event.request._id, "url": event.request.url.partition("#")[0]}
        elif isinstance(event, ItemEvent) and event.response is not None:
            record |= {"id": event.response.request._id, "url": event.response.url}
        if isinstance(event, RequestFailed):
            record |= {"reason": event.reason, "attempt": event.attempt, "final": event.final}
        elif isinstance(event, ItemDropped):
            record |= {"reason": event.reason, "type": item_type(event.item)}
        elif isinstance(event, FetcherChanged):
            record |= {"host": event.host, "previous": event.previous, "fetcher": event.fetcher, "reason": event.reason}
        elif isinstance(event, SpiderClosed):  # what each fetcher cost (the ladder's counts), for the report
            record["fetchers"] = {k: v for k, v in event.stats.counters.items() if k.startswith("fetcher ")}
        return json.dumps(record, ensure_ascii=False) + "\n"


_dumps = json.JSONEncoder(ensure_ascii=False).encode


def _quoted(url: str) -> str:
    """``url`` as a JSON string. Request URLs are percent-escaped (no control characters), but a
    quote or backslash is still checked for."""
    return _dumps(url) if '"' in url or "\\" in url else f'"{url}"'
