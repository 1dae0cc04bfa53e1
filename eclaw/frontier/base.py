"""The checks every frontier makes of a request, and what a process of a crawl on several is fed
(:class:`Fed`). The protocols of a frontier and a duplicate filter are contracts
(:mod:`eclaw.contracts`), named here too."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from eclaw._deprecated import renamed
from eclaw.contracts import DupeFilter, Frontier, TakesBack
from eclaw.http import Request
from eclaw.http.urls import canonical_url, host_allowed, url_host
from eclaw.settings import host_map

if TYPE_CHECKING:
    from eclaw.settings import Settings

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
