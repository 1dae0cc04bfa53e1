"""Events: every step of a request's life, as a typed value.

Each event is a frozen, slotted, keyword-only dataclass named in the past
tense; its class is the dispatch key. Subscribing to a base class
(``Event``, ``RequestEvent``, ``ItemEvent``) receives every subclass.

==================  ========================================  ==========================
event               emitted by                                handled by
==================  ========================================  ==========================
RequestGenerated    spider start, callbacks (parser)          Scheduler
RequestScheduled    Scheduler, when a download slot is free   middleware + Downloader
ResponseDownloaded  Downloader                                Parser
ResponseParsed      Parser, after the callback finished       (terminal: parsed)
ItemParsed          Parser (callback yielded an item)         Pipeline
RequestFailed       Downloader / Parser / middleware          errback; final = terminal
RequestDropped      Scheduler / middleware (IgnoreRequest)    (terminal: dropped)
ItemStored          Pipeline, every pipeline passed           -
ItemDropped         Pipeline (DropItem or a pipeline error)   -
SpiderOpened        engine, before the first request          -
SpiderClosed        engine, after the last event              -
EngineIdle          engine, when nothing is queued or running handlers may add requests
==================  ========================================  ==========================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext
    from eclaw.http.message import Request, Response
    from eclaw.spider import Spider
    from eclaw.stats import Stats

__all__ = [
    "EngineIdle",
    "Event",
    "ItemDropped",
    "ItemEvent",
    "ItemParsed",
    "ItemStored",
    "RequestDropped",
    "RequestEvent",
    "RequestFailed",
    "RequestGenerated",
    "RequestScheduled",
    "ResponseDownloaded",
    "ResponseParsed",
    "SpiderClosed",
    "SpiderOpened",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of all events.

    ``crawl`` is the crawl the event comes from (its ``spider``, ``settings``,
    ``stats`` and ``run_id``), set by the crawl that dispatches it: a handler of an
    engine running several crawls tells them apart by it.
    """

    crawl: CrawlContext | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestEvent(Event):
    """Base of the events about one request."""

    request: Request


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestGenerated(RequestEvent):
    """A new request entered the engine (start request or followed link)."""

    parent: Response | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestScheduled(RequestEvent):
    """The scheduler handed the request to the downloader; a slot is held."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseDownloaded(RequestEvent):
    """The download finished (after middleware) and awaits parsing."""

    response: Response


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseParsed(RequestEvent):
    """Terminal: the callback for ``response`` ran to completion."""

    response: Response
    items: int
    requests: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestFailed(RequestEvent):
    """A download or callback failed. ``final`` failures are terminal."""

    reason: str
    error: BaseException | None = None
    attempt: int = 1
    final: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestDropped(RequestEvent):
    """Terminal: the request was filtered (duplicate, offsite, scheme, ...)."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemEvent(Event):
    """Base of the events about one item."""

    item: Any
    response: Response | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemParsed(ItemEvent):
    """A callback yielded an item."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemStored(ItemEvent):
    """Every pipeline accepted the item."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemDropped(ItemEvent):
    """A pipeline dropped the item or failed on it (then it is dead-lettered)."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SpiderOpened(Event):
    spider: Spider


@dataclass(frozen=True, slots=True, kw_only=True)
class SpiderClosed(Event):
    spider: Spider
    stats: Stats


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineIdle(Event):
    """Nothing is queued or in flight. Handlers may still emit requests."""

    spider: Spider
