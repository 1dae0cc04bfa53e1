"""Leased requests a worker holds until their host lets them go: by time, or for a free slot.

A host waiting out its politeness delay says for how long, so its request waits on a timer.
A host at its concurrency limit says nothing of when a slot frees up: polling it for every
request that waits would cost more Redis calls than the crawl itself (64 requests every 20 ms
on one busy host). So requests for a full host queue behind it, and one of them asks again
when this worker frees a slot of that host (most often the case: it holds some of them) or,
for slots other workers free, after a pause that doubles while the host stays full.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable

from eclaw.http import Request

__all__ = ["Waits"]

_FIRST_POLL = 0.02  # seconds before a full host is asked again ...
_LAST_POLL = 0.5  # ... doubling up to this while it stays full


class Waits:
    """Requests waiting for their host, each handed back by :meth:`ready` once worth asking again."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._due: list[tuple[float, int, Request]] = []  # (when, order, request): ask again then
        self._full: dict[str, deque[Request]] = {}  # host -> requests waiting for one of its slots
        self._polls: dict[str, asyncio.TimerHandle] = {}  # host -> its next poll
        self._pause: dict[str, float] = {}  # host -> the pause before its next poll
        self._blocked = 0  # requests in _full
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._due) + self._blocked

    def ready(self, now: float) -> Request | None:
        """A request worth asking its host for again, if one is."""
        request = heapq.heappop(self._due)[2] if self._due and self._due[0][0] <= now else None
        self._arm()  # for the next one: a timer goes off for the first request only
        return request

    def delayed(self, request: Request, when: float) -> None:
        """``request``'s host is waiting out its delay until ``when`` (loop time)."""
        heapq.heappush(self._due, (when, next(self._seq), request))
        self._arm()

    def _arm(self) -> None:
        """A timer for the first request to fall due. Each wake-up goes with one: a request left waiting
        when the last timer went off (due a little later than the one it woke for) had none, and with
        no download under way to ask for it, it waited for ever."""
        if not self._due:
            return
        when = self._due[0][0]
        if self._timer is not None:
            if self._timer.when() <= when:
                return
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(when, self._timer_due)

    def full(self, host: str, request: Request) -> None:
        """``request``'s host has no free slot: it waits behind the host's other waiting requests."""
        self._full.setdefault(host, deque()).append(request)
        self._blocked += 1
        self._schedule(host)

    def freed(self, host: str) -> None:
        """This worker gave back a slot of ``host``: its first waiting request asks at once."""
        self._pause.pop(host, None)
        self._release_one(host)

    def acquired(self, host: str) -> None:
        """A slot of ``host`` was taken: the host is not stuck, its next poll comes soon again."""
        self._pause.pop(host, None)

    def clear(self) -> None:
        for handle in (*self._polls.values(), *([self._timer] if self._timer is not None else [])):
            handle.cancel()
        self._polls.clear()
        self._timer = None

    def _schedule(self, host: str) -> None:
        """The next poll of a full host (slots other workers free are seen only so)."""
        if host in self._full and host not in self._polls:
            pause = self._pause.get(host, _FIRST_POLL)
            self._pause[host] = min(pause * 2, _LAST_POLL)
            self._polls[host] = asyncio.get_running_loop().call_later(pause, self._poll, host)

    def _poll(self, host: str) -> None:
        del self._polls[host]
        self._release_one(host)
        self._schedule(host)

    def _release_one(self, host: str) -> None:
        queue = self._full.get(host)
        if not queue:
            return
        request = queue.popleft()
        self._blocked -= 1
        if not queue:
            del self._full[host]
            poll = self._polls.pop(host, None)
            if poll is not None:
                poll.cancel()
        heapq.heappush(self._due, (0.0, next(self._seq), request))
        self._wake()

    def _timer_due(self) -> None:
        self._timer = None
        self._wake()
