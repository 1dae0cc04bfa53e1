"""What the crawl needs from a frontier (:class:`Frontier`) and a duplicate filter
(:class:`DupeFilter`), and the checks every frontier makes of a request."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, Protocol, runtime_checkable

from eclaw._deprecated import renamed
from eclaw.http import Request
from eclaw.http.urls import canonical_url, host_allowed, url_host
from eclaw.settings import host_map

if TYPE_CHECKING:
    from eclaw.contracts import ItemPipeline
    from eclaw.settings import Settings
    from eclaw.spider import Spider

__all__ = [
    "FORWARDED",
    "DupeFilter",
    "Fed",
    "Feed",
    "Frontier",
    "TakesBack",
    "check_hop",
    "check_request",
    "fingerprint",
    "host_overrides",
    "offsite",
]

_SCHEMES = frozenset({"http", "https"})
FORWARDED = "forwarded"  # what enqueue answers for a request another process queues: neither queued nor dropped


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

    ``shared`` declares a frontier several workers share (Redis): the crawl tells
    it when each request is ``done`` (its items stored), skips the start requests
    when it is ``seeded`` elsewhere, and sends every item to its ``outputs()`` too.
    ``dupefilter`` is what ``--state`` saves, or ``None`` where the frontier keeps
    its own state (it cannot then be paused and resumed with ``--state``).
    """

    shared: bool

    async def open(self, spider: Spider, settings: Settings, wake: Callable[[], None]) -> None: ...

    async def enqueue(self, requests: Sequence[Request]) -> list[str | None]: ...

    async def next_request(self) -> Request | None: ...

    async def release(self, request: Request) -> None: ...

    async def add_seen(self, requests: Sequence[Request]) -> list[bool]:
        """Record ``requests`` as seen without queueing them: where a redirect led, so a later link
        there is a duplicate. For each, ``False`` if it was seen (or queued) before."""

    async def done(self, request: Request) -> None:
        """``request`` reached its end and its items are stored (called only when ``shared``)."""

    def pending(self) -> int: ...

    def set_delay(self, host: str | None, seconds: float, *, floor: bool = False) -> None:
        """Politeness for ``host`` from now on: ``seconds`` between two download starts.

        ``host=None`` sets the delay of every host without one of its own. A
        ``floor`` (robots.txt ``Crawl-delay``) is a minimum later calls cannot go under.
        """

    @property
    def seeded(self) -> bool:
        """The start requests are in the frontier already (another process put them there)."""

    @property
    def dupefilter(self) -> DupeFilter | None: ...

    def outputs(self) -> dict[str, ItemPipeline]:
        """Where every stored item must also go (a shared frontier's item store), by name."""

    async def close(self) -> None: ...


@runtime_checkable
class TakesBack(Protocol):
    """A frontier that takes a resumed crawl's saved requests back as they were: checked, counted and
    in the restored dupe filter already, so queued with no check."""

    def take_back(self, requests: Sequence[Request]) -> None: ...


@dataclass(frozen=True)
class Feed:
    """The crawl's side of a :class:`Fed` frontier: its ways in and out for requests."""

    admit: Callable[[list[Request]], Awaitable[None]]  # found by another process: filtered, counted, saved
    adopt: Callable[[list[Request]], Awaitable[None]]  # lent by another process: queued as they are, saved
    lent: Callable[[list[Request]], None]  # lent to another process: no longer this crawl's to save
    movable: Callable[[Request], bool]  # whether a queued request may be lent (none of it lives only here)
    save_soon: Callable[[], None]  # take a checkpoint as soon as the crawl can (--state)
    stopping: Callable[[], bool]
    keeps_state: bool  # --state: what it lends may be read once a checkpoint on disk holds it as lent


@runtime_checkable
class Fed(Protocol):
    """A frontier that requests also reach from outside the crawl: the links the other processes of
    a crawl on several (``--processes``) found for its part, and requests of theirs they lend it once it
    has nothing left to do. The crawl hands it a :class:`Feed`, tells it when a checkpoint it took is on
    disk (``checkpointed``), and when it has nothing left to do it awaits ``idle`` before it ends: that
    returns once more work was queued, or the crawl as a whole is over."""

    def feed(self, feed: Feed) -> None: ...

    async def idle(self) -> None: ...

    def checkpointed(self) -> None:
        """The checkpoint last taken (``checkpoint()``, as a :class:`~eclaw.contracts.Resumable`) is on disk."""

    def elsewhere(self, url: str) -> bool:
        """Whether ``url`` is another process's to fetch (a redirect that led there goes to it)."""


def check_request(request: Request, settings: Settings, allowed: frozenset[str]) -> str | None:
    """Why ``request`` may not be crawled, duplicates aside (``None``: it may): scheme,
    URL length, depth, and the spider's ``allowed_domains`` (see :func:`offsite`)."""
    url = request.url
    reason = _url_refusal(url, settings)
    if reason is not None:
        return reason
    if settings.max_depth and request.depth > settings.max_depth:
        return "max depth"
    if offsite(request, url, allowed):
        return "offsite"
    return None


def check_hop(request: Request, url: str, settings: Settings, allowed: frozenset[str]) -> str | None:
    """Why ``request`` may not be redirected to ``url`` (``None``: it may): the checks of a new request
    to ``url`` (scheme, URL length, ``"offsite redirect"``), those of ``request`` itself (depth) aside."""
    reason = _url_refusal(url, settings)
    if reason is None and offsite(request, url, allowed):
        return "offsite redirect"
    return reason


def _url_refusal(url: str, settings: Settings) -> str | None:
    if not url.startswith(("http://", "https://")) and url.partition(":")[0].lower() not in _SCHEMES:
        return "unsupported scheme"
    if len(url) > settings.max_url_length:
        return "url too long"
    return None


def offsite(request: Request, url: str, allowed: frozenset[str]) -> bool:
    """Whether ``url`` (``request``'s own, or where a redirect of it leads) is off ``allowed`` for
    ``request``: never for a ``dont_filter`` request, nor one with ``meta["allow_offsite"]`` (as
    Scrapy's OffsiteMiddleware)."""
    if not allowed or request.dont_filter:
        return False
    meta = request._meta  # not request.meta: that would give every request a dict
    if meta and meta.get("allow_offsite"):
        return False
    return not host_allowed(url_host(url), allowed)


def host_overrides(settings: Settings) -> tuple[dict[str, int], dict[str, float]]:
    """Per-host concurrency limits and delays from ``host_concurrency`` and ``host_delay``."""
    limits = {host: int(n) for host, n in host_map(settings.host_concurrency, "host_concurrency", int).items()}
    return limits, host_map(settings.host_delay, "host_delay", float)


def fingerprint(request: Request) -> bytes:
    """A 20-byte digest of method, canonical URL, body and cookie jar: what duplicate filters remember.

    The jar (``meta["cookiejar"]``) counts: two accounts' ``/inbox`` are two pages."""
    key = f"{request.method} {canonical_url(request.url)}".encode()
    meta = request._meta  # not request.meta: that would give every request a dict
    if meta and "cookiejar" in meta:
        key += f" jar={meta['cookiejar']!r}".encode()
    if request.body:
        key += b" " + request.body
    return hashlib.sha1(key, usedforsecurity=False).digest()


__getattr__ = renamed(__name__, {"Scheduler": "Frontier"})  # eclaw-rename: keep (old names, one release)
