"""Events: every step of a request's life, as a typed value.

Each event is a frozen, slotted, keyword-only dataclass named in the past
tense; its class is the dispatch key. Subscribing to a base class
(``Event``, ``RequestEvent``, ``ItemEvent``) receives every subclass.

Every event type has one owner, the component of the crawl that acts on it;
the owners register with the crawl's event bus when the crawl starts, and the
bus runs an event's subscribers (in priority order), then its owner. Events
without an owner are notifications.

==================  ======================================  =====================================
event               published by                            owner
==================  ======================================  =====================================
RequestGenerated    start requests, callbacks, errbacks     intake: filters, dedupe, the frontier
RequestScheduled    the crawl, when a download slot is free fetcher: middlewares + fetcher
ResponseDownloaded  fetcher                                 callback runner (the spider callback)
ItemParsed          callback runner (an item was yielded)   pipeline runner: pipelines, outputs
ItemStored          pipeline runner (an output wrote it)    accounting
ItemDropped         pipeline runner (DropItem, a failure)   accounting
ResponseParsed      callback runner, the callback finished  accounting (terminal: parsed)
RequestFailed       fetcher, callback runner                accounting (final = terminal), errback
RequestDropped      intake, fetcher (IgnoreRequest)         accounting (terminal: dropped)
FetcherChanged      the escalation ladder (a host's fetcher)  - (notification: trace, report)
ItemNew, ItemUpdated,  the SQLite store, against earlier runs  - (notifications: a recrawl's report)
ItemUnchanged, ItemGone
SpiderOpened        the crawl, before the first request     - (notification)
SpiderClosed        the crawl, after the last event         - (notification)
EngineIdle          the crawl, nothing queued or running    - (notification: handlers may add requests)
==================  ======================================  =====================================
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext
    from eclaw.http import Request, Response
    from eclaw.spider import Spider
    from eclaw.stats import Stats

__all__ = [
    "EngineIdle",
    "Event",
    "FetcherChanged",
    "ItemDelta",
    "ItemDropped",
    "ItemEvent",
    "ItemGone",
    "ItemNew",
    "ItemParsed",
    "ItemStored",
    "ItemUnchanged",
    "ItemUpdated",
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


def _fast_init(cls: type[Event]) -> type[Event]:
    """Give a frozen event class an ``__init__`` that fills its slots directly.

    A frozen dataclass sets each field through ``object.__setattr__``; the crawl
    builds several events per page, and writing the slots with their descriptors
    takes half the time. The signature (keyword-only, same defaults) and the
    frozen instances are unchanged; a test compares both constructions.
    """
    fields = dataclasses.fields(cls)
    params = ", ".join(f.name if f.default is dataclasses.MISSING else f"{f.name}=_d_{f.name}" for f in fields)
    body = "".join(f"    _s_{f.name}(self, {f.name})\n" for f in fields)
    namespace: dict[str, Any] = {f"_s_{f.name}": _slot(cls, f.name).__set__ for f in fields}
    namespace |= {f"_d_{f.name}": f.default for f in fields if f.default is not dataclasses.MISSING}
    exec(f"def __init__(self, *, {params}):\n{body}", namespace)  # generated from the field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


def _slot(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise AttributeError(name)


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestEvent(Event):
    """Base of the events about one request."""

    request: Request


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class RequestGenerated(RequestEvent):
    """A new request entered the engine (start request or followed link)."""

    parent: Response | None = None


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class RequestScheduled(RequestEvent):
    """The frontier handed the request to the fetcher; a slot is held."""


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseDownloaded(RequestEvent):
    """The download finished (after middleware) and awaits parsing."""

    response: Response


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseParsed(RequestEvent):
    """Terminal: the callback for ``response`` ran to completion."""

    response: Response
    items: int
    requests: int


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class RequestFailed(RequestEvent):
    """A download or callback failed. ``final`` failures are terminal."""

    reason: str
    error: BaseException | None = None
    attempt: int = 1
    final: bool = True


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class RequestDropped(RequestEvent):
    """Terminal: the request was filtered (duplicate, offsite, scheme, ...)."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemEvent(Event):
    """Base of the events about one item."""

    item: Any
    response: Response | None = None


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ItemParsed(ItemEvent):
    """A callback yielded an item."""


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ItemStored(ItemEvent):
    """Every pipeline accepted the item."""


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ItemDropped(ItemEvent):
    """A pipeline dropped the item or failed on it (then it is dead-lettered)."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemDelta(ItemEvent):
    """A keyed item, as the SQLite store found it against what it held from earlier runs."""

    key: str


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ItemNew(ItemDelta):
    """The store had no item of this type and key."""


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ItemUpdated(ItemDelta):
    """The store had this item, with other content: it holds the new one now."""


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ItemUnchanged(ItemDelta):
    """The store had this item, with the same content."""


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ItemGone(Event):
    """A keyed item of the previous run that this (finished) run did not see again: ``item`` is
    what the store last held (it keeps it)."""

    kind: str
    key: str
    item: Any


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class FetcherChanged(Event):
    """The escalation ladder moved ``host`` from the fetcher ``previous`` to ``fetcher``: up after a
    ban (``reason`` says which signal), or down after a quiet period (``reason`` says how long)."""

    host: str
    previous: str
    fetcher: str
    reason: str


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class SpiderOpened(Event):
    spider: Spider


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class SpiderClosed(Event):
    spider: Spider
    stats: Stats


@_fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class EngineIdle(Event):
    """Nothing is queued or in flight. Handlers may still emit requests."""

    spider: Spider
