"""What a plug-in implements, and what it sees of the crawl.

**Middleware**: one awaited call around the download, any object or function::

    async def my_middleware(request: Request, call_next: Fetch) -> Response

- request phase: code before ``call_next``; pass a changed request on with
  ``await call_next(request.replace(headers=...))``;
- consume the request: raise ``IgnoreRequest(reason)`` (it ends as
  ``RequestDropped(reason)``) instead of calling ``call_next``;
- response phase: code after ``call_next`` returns; return the response (or a
  different one);
- failure phase: ``except DownloadError`` around ``call_next`` (``HttpError``
  carries the response of a status the spider does not handle);
- retry: raise ``RetryRequest(request, delay=..., reason=...)``; the crawl
  frees the slot and schedules ``request`` again after ``delay``.

Middlewares are configured as a list: the first is the outermost, so it sees
the request first and the response last.

**Pipeline / output**: ``async def process_item(item, spider) -> item`` (or an
async function of the same shape).

Capabilities are declared by implementing a Protocol, never guessed:

- the lifecycle, :class:`Opens` (``open(crawl)`` before the first request) and
  :class:`Closes` (``close()`` at the end): middlewares, pipelines and outputs alike;
- :class:`Resumable` (``checkpoint()``, ``restore(saved)``, ``flush()``): an
  output a crawl saved with ``--state`` continues exactly (a middleware too: the session
  pool's sessions, like the crawl's cookie jars, come back on resume);
- :class:`ChecksHops` (``check_hop(request, url)``): a middleware that vets each redirect hop as
  it vets a new request (``Robots`` does: a hop obeys the robots.txt of its host).

**Frontier**: what waits to be fetched (:class:`Frontier`, its :class:`DupeFilter`; one that takes
a resumed crawl's requests back as they were: :class:`TakesBack`). ``eclaw.frontier.base`` names
them too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, runtime_checkable

from eclaw.http import Request, Response

if TYPE_CHECKING:
    from eclaw.security.redact import Redactor
    from eclaw.sessions.jars import CookieJars
    from eclaw.settings import Settings
    from eclaw.spider import Spider
    from eclaw.stats import Stats

__all__ = [
    "BatchHandler",
    "ChecksHops",
    "ChoosesProxy",
    "Closes",
    "CrawlContext",
    "DupeFilter",
    "Fetch",
    "Frontier",
    "Handler",
    "HopCheck",
    "ItemPipeline",
    "MarksSeen",
    "Middleware",
    "Opens",
    "Resumable",
    "RetriesEmptyPages",
    "SavesSeen",
    "SavesSnapshots",
    "Seeded",
    "Shared",
    "TakesBack",
    "TakesBatches",
    "Watcher",
    "WatchesPages",
]

Fetch = Callable[[Request], Awaitable[Response]]
Handler = Callable[[Any], Awaitable[None] | None]  # an event handler: async, or plain for quick bookkeeping
BatchHandler = Callable[[Sequence[Any], Any], None]  # a batch's payloads and its context (see TakesBatches)
HopCheck = Callable[[Request, str], Awaitable[None]]  # (request, hop URL): raises IgnoreRequest to refuse the hop


class Middleware(Protocol):
    """Anything callable as ``await mw(request, call_next)``."""

    def __call__(self, request: Request, call_next: Fetch, /) -> Awaitable[Response]: ...


class ChoosesProxy(Protocol):
    """Chooses the proxy of each redirect hop of one request, so that a hop goes through the proxy
    its own URL calls for (rotation, ``HTTPS_PROXY`` after an http→https redirect, ``NO_PROXY``):
    the ``Proxy`` middleware puts one in ``meta["proxy_chooser"]``; fetchers that follow redirects
    ask it (:func:`eclaw.fetchers.hops.hop_proxy`)."""

    async def proxy_for(self, url: str) -> str | None:
        """The proxy URL (its credentials in it) for a hop to ``url``, or ``None`` to go direct."""

    def whole(self) -> tuple[str, tuple[str, ...]] | None:
        """The policy as one proxy URL and the hosts that go direct (a client choosing per hop itself,
        the browser, is given it whole), or ``None`` when it is not one proxy (rotation, a proxy per scheme)."""


class SavesSnapshots(Protocol):
    """Where failed pages are saved for a developer: :class:`eclaw.observe.snapshots.Snapshots`."""

    async def save(
        self,
        request: Request,
        response: Response | None,
        error: BaseException | None,
        *,
        reason: str = "",
        extra_files: Mapping[str, bytes] | None = None,
    ) -> Path | None:
        """Save a snapshot (its folder), or ``None`` when its caps leave no room."""


class CrawlContext(Protocol):
    """The running crawl, as a plug-in or an event handler sees it."""

    @property
    def spider(self) -> Spider: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def stats(self) -> Stats: ...

    @property
    def run_id(self) -> str:
        """This run's id (in log lines and the files of record)."""

    @property
    def snapshots(self) -> SavesSnapshots | None:
        """Where failed pages are saved for a developer (:class:`~eclaw.observe.snapshots.Snapshots`);
        ``None`` when the ``snapshots`` setting is off."""

    @property
    def redactor(self) -> Redactor:
        """What every record the crawl writes passes (:mod:`eclaw.security.redact`)."""

    @property
    def queued(self) -> int:
        """Requests waiting in the frontier."""

    @property
    def cookies(self) -> CookieJars | None:
        """The crawl's cookie jars, by ``meta["cookiejar"]`` (``None`` with the ``cookies`` setting off)."""

    @property
    def in_flight(self) -> int:
        """Downloads under way."""

    def set_delay(self, host: str | None, seconds: float, *, floor: bool = False) -> None:
        """Politeness: ``seconds`` between two downloads from ``host`` (``None``: every host
        without its own delay); a ``floor`` is never undercut."""

    def stop(self, reason: str) -> None:
        """Stop the crawl gracefully."""

    def emit(self, event: Any) -> None:
        """Publish an event from outside the crawl's tasks (an ``EngineIdle`` handler adding requests)."""

    async def publish(self, event: Any) -> None:
        """Publish an event here and now: its subscribers, then its owner."""

    def dead_letter(self, output: object, items: list[Any], error: BaseException) -> None:
        """``output`` could not write ``items`` it had accepted (a failed batch): dead-letter them for it."""


@runtime_checkable
class Opens(Protocol):
    """The lifecycle's start, for a middleware, a pipeline or an output: ``open(crawl)`` before the
    first request. One of the two halves of the lifecycle (implement either, or both)."""

    async def open(self, crawl: CrawlContext) -> None: ...


@runtime_checkable
class Closes(Protocol):
    """The lifecycle's end: ``close()`` when the crawl ends (in reverse order of opening);
    flush what is buffered."""

    async def close(self) -> None: ...


@runtime_checkable
class ItemPipeline(Protocol):
    """Changes, drops (``DropItem``) or stores an item; returns it to pass it on."""

    async def process_item(self, item: Any, spider: Spider) -> Any: ...


@runtime_checkable
class Resumable(Protocol):
    """An output a saved crawl (``--state``) continues exactly: no item lost, none twice (or a
    middleware, or the cookie jars: what they hold comes back on resume)."""

    def checkpoint(self) -> dict[str, Any] | None:
        """Where the output stands (its committed length...), taken at the checkpoint's barrier."""

    def restore(self, saved: dict[str, Any]) -> None:
        """Before ``open``: go back to what ``checkpoint`` returned (cut off what came after)."""

    async def flush(self) -> None:
        """Make what was written so far durable before a checkpoint records it."""


@runtime_checkable
class ChecksHops(Protocol):
    """A middleware (or the frontier) that vets each hop of a redirect as it vets a new request:
    ``check_hop`` raises ``IgnoreRequest(reason)`` to refuse it, and the request ends dropped with
    that reason. The crawl hands these checks (the frontier's first, then the middlewares' in list
    order) to a fetcher that follows redirects itself
    (:class:`~eclaw.fetchers.base.VetsHops`)."""

    async def check_hop(self, request: Request, url: str) -> None:
        """Refuse (raise ``IgnoreRequest``) or allow ``request``'s redirect to ``url``."""


@runtime_checkable
class RetriesEmptyPages(Protocol):
    """A middleware that can fetch a page again another way when it yielded no item where the
    spider expects some (``expect_items``): the escalation ladder moves its host to a stronger fetcher."""

    async def retry_empty(self, request: Request, response: Response) -> Request | None:
        """The request to fetch again (it replaces ``request``; the page's ``no items`` is then not a
        failure), or ``None`` to let it fail."""


@runtime_checkable
class WatchesPages(Protocol):
    """An output that watches pages rather than items (WARC records, markdown pages): the crawl
    subscribes its handlers to the bus as it does a :class:`Watcher`'s, and opens, checkpoints
    (:class:`Resumable`) and closes it like any output. Its ``process_item`` may pass items on untouched."""

    def subscriptions(self) -> list[tuple[type[Any], Handler]]: ...


class Watcher(Protocol):
    """Watches a crawl through its events, like any subscriber, from its start to its end:
    the trace, metrics, the quality profile."""

    def subscriptions(self) -> list[tuple[type[Any], Handler]]: ...

    async def open(self, crawl: CrawlContext) -> None: ...

    async def close(self) -> None: ...


@runtime_checkable
class TakesBatches(Protocol):
    """A :class:`Watcher` that takes the kinds the crawl publishes a page at a time in batches, one
    plain call per batch and no event built: ``RequestGenerated`` (payloads: the requests; context:
    the response they come from, or ``None``) and ``RequestDropped`` (``(request, reason)`` pairs;
    the response whose links they are, or ``None``). Its :meth:`Watcher.subscriptions` handlers are
    not called for the kinds it takes in batches."""

    def batch_subscriptions(self) -> list[tuple[type[Any], BatchHandler]]: ...


# -- the frontier: what waits to be fetched --------------------------------------


class DupeFilter(Protocol):
    """Remembers fingerprints. ``add`` returns ``False`` if it was already seen; ``dump`` and
    ``load`` save it with a paused crawl's state (``--state``) and read it back."""

    def add(self, fp: bytes) -> bool: ...

    def __len__(self) -> int: ...

    def dump(self, file: BinaryIO) -> None: ...

    def load(self, file: BinaryIO) -> None: ...


class Frontier(Protocol):
    """What the engine needs from a frontier.

    ``enqueue`` takes a batch (the links of one page) and returns, for each
    request, ``None`` when it was queued, else the reason it was dropped.
    ``next_request`` returns a request only when a download slot is free for
    it (the slot is held until ``release``). ``wake`` (given to ``open``) must
    be called when a request becomes available later (a politeness delay elapsed).

    What only some frontiers do is a small protocol of its own, checked with
    ``isinstance`` where the crawl uses it: :class:`Shared`, :class:`Seeded`,
    :class:`MarksSeen`, :class:`SavesSeen` and :class:`TakesBack`.
    """

    async def open(self, spider: Spider, settings: Settings, wake: Callable[[], None]) -> None: ...

    async def enqueue(self, requests: Sequence[Request]) -> list[str | None]: ...

    async def next_request(self) -> Request | None: ...

    async def release(self, request: Request) -> None: ...

    def pending(self) -> int: ...

    def set_delay(self, host: str | None, seconds: float, *, floor: bool = False) -> None:
        """Politeness for ``host`` from now on: ``seconds`` between two download starts.

        ``host=None`` sets the delay of every host without one of its own. A
        ``floor`` (robots.txt ``Crawl-delay``) is a minimum later calls cannot go under.
        """

    async def close(self) -> None: ...


@runtime_checkable
class Shared(Protocol):
    """A frontier several workers share (Redis): the crawl tells it when each request is ``done``
    and sends every item to its ``outputs()`` too (``--state`` does not apply: it keeps the state)."""

    async def done(self, request: Request) -> None:
        """``request`` reached its end and its items are stored."""

    def outputs(self) -> dict[str, ItemPipeline]:
        """Where every stored item must also go (the shared frontier's item store), by name."""


@runtime_checkable
class Seeded(Protocol):
    """A frontier whose start requests may come from elsewhere (another worker or process)."""

    @property
    def seeded(self) -> bool:
        """The start requests are in the frontier already (another process put them there)."""


@runtime_checkable
class MarksSeen(Protocol):
    """A frontier that records where a redirect led, so a later link there is a duplicate."""

    async def add_seen(self, requests: Sequence[Request]) -> list[bool]:
        """Record ``requests`` as seen without queueing them. For each, ``False`` if it was seen
        (or queued) before."""


@runtime_checkable
class SavesSeen(Protocol):
    """A frontier whose duplicate filter ``--state`` saves and reads back (without one, a paused
    crawl's resume fetches again what it had seen)."""

    @property
    def dupefilter(self) -> DupeFilter: ...


@runtime_checkable
class TakesBack(Protocol):
    """A frontier that takes a resumed crawl's saved requests back as they were: checked, counted and
    in the restored dupe filter already, so queued with no check."""

    def take_back(self, requests: Sequence[Request]) -> None: ...
