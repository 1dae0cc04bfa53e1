"""Per-host politeness: each host's slot (its queue, its downloads in flight, when it may start the
next), and what a fetcher tells the frontier about its hosts (:class:`Pacing`).

A host's delay counts from the moment its previous request left for the wire, not from when the
frontier handed it out: between the two come the middlewares, a robots.txt fetch, a connection.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Callable

    from eclaw.http import Request

__all__ = ["NO_KEY", "HostSlot", "Names", "Pacing", "Prefetching"]

logger = logging.getLogger(__name__)

NO_KEY = (1 << 62, 0)  # sorts after every real (-priority, seq) key


@runtime_checkable
class Pacing(Protocol):
    """A frontier that paces hosts by what reaches the wire (the default one does).

    The crawl hands it to a fetcher that declares :class:`~eclaw.fetchers.base.Paced`.
    """

    def sent(self, host: str) -> None:
        """A request to ``host`` has just been sent: its delay counts from now."""

    def keep_alive(self, host: str, seconds: float) -> bool:
        """Whether a connection to ``host`` is worth keeping idle for ``seconds`` after the request now sent.

        Always, for a host without a politeness delay (its next request may come at any moment, from the
        page being fetched); with a delay, only while a request to it is queued and may start by then.
        """


class Names(Protocol):
    """A resolver that can look a name up ahead of the download that needs it
    (:class:`~eclaw.fetchers.dns.CachingResolver`)."""

    def prefetch(self, host: str, ready: Callable[[], None]) -> bool:
        """True when ``host`` needs no wait; else start its lookup, call ``ready`` when it ends, return False."""


@runtime_checkable
class Prefetching(Protocol):
    """A frontier that keeps a host's requests back while its name is looked up, so a slow name holds
    neither a download slot nor the host's politeness turn. A fetcher with a resolver of its own
    hands it over when it opens (the crawl handed the fetcher the frontier's :class:`Pacing`)."""

    def resolve_with(self, names: Names) -> None: ...


class HostSlot:
    """One host: its queued requests (in memory, and how many on disk), downloads in flight, next start."""

    __slots__ = (
        "active", "disk", "disk_key", "heap", "host", "looking_up",
        "not_before", "queued", "ready_at", "timer", "unsent",
    )  # fmt: skip

    def __init__(self, host: str, not_before: float = 0.0) -> None:
        self.host = host
        self.active = 0
        self.not_before = not_before  # loop time before which no download may start
        self.unsent = 0  # requests handed out, not sent yet: the next waits for them (their delay is unknown)
        self.heap: list[tuple[int, int, Request]] = []  # (-priority, seq, request)
        self.disk = 0  # requests of the host waiting on disk ...
        self.disk_key = NO_KEY  # ... and the (-priority, seq) of the first of them
        self.queued: tuple[int, int] | None = None  # the order key it waits under in the frontier's ready heap
        self.ready_at = 0  # the frontier's count when its delay last ran out (0: none since its last request)
        self.timer: asyncio.TimerHandle | None = None
        self.looking_up = False  # its name is being looked up (:class:`Prefetching`): nothing starts until then

    def __repr__(self) -> str:
        return f"HostSlot({self.host!r}, memory={len(self.heap)}, disk={self.disk}, active={self.active})"

    @property
    def waiting(self) -> bool:
        """It has requests queued, in memory or on disk."""
        return bool(self.heap) or self.disk > 0

    def head(self) -> tuple[int, int]:
        """The order key of its next request, wherever it waits."""
        if not self.heap:
            return self.disk_key
        prio, seq, _ = self.heap[0]
        if self.disk and self.disk_key < (prio, seq):
            return self.disk_key
        return prio, seq

    def order(self) -> tuple[int, int]:
        """Its key in the ready heap: its next request's, but never before the moment its delay ran out.
        First ready, first served: a host back from its delay waits behind those ready before it, so
        hosts with long queues of old requests cannot starve one whose only request came later."""
        prio, seq = self.head()
        return (prio, seq) if seq > self.ready_at else (prio, self.ready_at)

    def next_on_disk(self) -> bool:
        """Its next request waits on disk: bring some back before handing it out."""
        return self.disk > 0 and (not self.heap or self.disk_key < self.heap[0][:2])

    def spilled(self, key: tuple[int, int]) -> None:
        """One more of its requests went to disk, with order key ``key``."""
        self.disk += 1
        if key < self.disk_key:
            self.disk_key = key

    def idle(self) -> bool:
        """Nothing queued, in flight or timed: the frontier may forget it."""
        return not self.active and not self.heap and not self.disk and self.timer is None
