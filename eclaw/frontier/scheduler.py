"""The frontier: filters, dedupe, priority order and per-domain politeness."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from eclaw.frontier.base import DupeFilter, check_request, fingerprint, host_overrides
from eclaw.frontier.dupefilter import BloomDupeFilter, RecentSet, SetDupeFilter
from eclaw.frontier.spill import SpillQueue
from eclaw.http import Request
from eclaw.http.urls import url_host

if TYPE_CHECKING:
    from eclaw.contracts import ItemPipeline
    from eclaw.settings import Settings
    from eclaw.spider import Spider

__all__ = ["DefaultScheduler"]

_URL_REASONS = frozenset({"offsite", "unsupported scheme"})  # depend on the URL (fragment aside) alone


class _Slot:
    """Per-host politeness: in-flight count, next allowed start, own queue."""

    __slots__ = ("active", "heap", "host", "not_before", "queued", "timer")

    def __init__(self, host: str) -> None:
        self.host = host
        self.active = 0
        self.not_before = 0.0
        self.heap: list[tuple[int, int, Request]] = []
        self.queued = False  # present in the scheduler's ready heap
        self.timer: asyncio.TimerHandle | None = None


class DefaultScheduler:
    """In-memory priority frontier.

    Order: higher ``priority`` first, then first-in first-out (breadth-first).
    Filters, in order: scheme (http/https only), URL length, offsite
    (``allowed_domains``), depth (``max_depth``), duplicates (fingerprint in
    the dupefilter). ``dont_filter`` skips offsite and duplicate checks.
    Memory: past ``frontier_memory`` pending requests, ordinary ones wait in a
    SQLite file (spilled in order, read back in batches), so RAM stays flat
    however large the frontier grows.
    Politeness: at most ``concurrency`` downloads in all, at most
    ``concurrency_per_domain`` per host, and ``download_delay`` seconds (or
    the host's own delay, see ``set_delay``) between two starts on one host.
    """

    def __init__(self, dupefilter: DupeFilter | None = None) -> None:
        self._dupefilter = dupefilter
        self._recent = RecentSet()
        self._limits: dict[str, int] = {}  # per-host concurrency over concurrency_per_domain
        self._leased: dict[int, _Slot] = {}  # id of each request handed out -> its host's slot
        self._refused: dict[str, str] = {}  # recent URLs refused for a reason of the URL alone
        self._slots: dict[str, _Slot] = {}
        self._ready: list[tuple[int, int, _Slot]] = []  # slots that may start a download
        self._seq = itertools.count()
        self._pending = 0  # in memory and on disk
        self._in_memory = 0
        self._active = 0
        self._wake: Callable[[], None] = lambda: None
        self._delay = 0.0  # for hosts without their own (download_delay, or the throttle's start delay)
        self._delays: dict[str, float] = {}  # per-host delays set by throttle / robots Crawl-delay
        self._floors: dict[str, float] = {}
        self._cooling: dict[str, float] = {}  # idle hosts whose delay has not elapsed yet

    shared = False  # one crawl's own frontier

    @property
    def dupefilter(self) -> DupeFilter:
        assert self._dupefilter is not None, "scheduler not opened"
        return self._dupefilter

    @property
    def seeded(self) -> bool:
        return False

    def outputs(self) -> dict[str, ItemPipeline]:
        return {}

    async def done(self, request: Request) -> None:
        """Not shared: nothing to tell."""

    async def open(self, spider: Spider, settings: Settings, wake: Callable[[], None]) -> None:
        self._settings = settings
        self._window = settings.frontier_memory
        self._spill = SpillQueue(spider)
        self._delay = settings.download_delay
        self._wake = wake
        self._allowed = frozenset(d.lower() for d in spider.allowed_domains)
        self._limits, delays = host_overrides(settings)
        for host, seconds in delays.items():
            self.set_delay(host, seconds, floor=True)
        if self._dupefilter is None:
            self._dupefilter = (
                SetDupeFilter()
                if settings.dupefilter == "set"
                else BloomDupeFilter(settings.dupefilter_capacity, settings.dupefilter_error_rate)
            )

    async def enqueue(self, requests: Sequence[Request]) -> list[str | None]:
        recent, refused = self._recent, self._refused
        reasons: list[str | None] = []
        spill: list[Request] = []
        for request in requests:
            # Most links on a site are repeats: a GET of a URL (fragment aside) seen
            # recently is a duplicate, known without canonicalising or hashing it;
            # an offsite or mailto: link seen recently is refused again, unchecked.
            key = None
            meta = request._meta  # a request in a cookie jar of its own is not known by its URL alone
            if request.method == "GET" and not request.body and not request.dont_filter and not (
                meta and "cookiejar" in meta
            ):
                key = request.url.partition("#")[0]
                if key in recent.new or key in recent.old:
                    reasons.append("duplicate")
                    continue
                known = refused.get(key)
                if known is not None:
                    reasons.append(known)
                    continue
            reason = self._filter(request)
            if key is not None:
                if reason is None or reason == "duplicate":
                    recent.add(key)
                elif reason in _URL_REASONS:
                    if len(refused) >= 4096:
                        refused.clear()
                    refused[key] = reason
            if reason is None:
                if self._spilling(request):
                    spill.append(request)
                else:
                    self._push(request)
            reasons.append(reason)
        if spill:
            self._pending += len(spill)
            for request in self._spill.put(spill):  # those that cannot be stored stay in memory
                self._pending -= 1
                self._push(request)
        return reasons

    def _spilling(self, request: Request) -> bool:
        """Past the in-memory window (or once requests wait on disk, to keep their order), ordinary
        requests go to disk; a request with a raised priority always stays in memory."""
        return (
            bool(self._window) and request.priority <= 0 and (len(self._spill) > 0 or self._in_memory >= self._window)
        )

    def _refill(self, host: str | None = None, limit: int = 0) -> None:
        for request in self._spill.take(limit or max(1, self._window // 2), host):
            self._pending -= 1
            self._push(request)

    def _refill_idle_hosts(self) -> None:
        """Nothing in memory can start (its hosts wait out a delay or are at their limit) while
        other hosts' requests wait on disk: bring some of those back, whatever the window."""
        limit = self._settings.concurrency_per_domain * 4
        for host in itertools.islice(list(self._spill.hosts), 256):
            slot = self._slots.get(host)
            if slot is None or (not slot.heap and slot.timer is None):
                self._refill(host, limit)
                if self._ready:
                    return

    def _push(self, request: Request) -> None:
        host = url_host(request.url)
        slot = self._slots.get(host)
        if slot is None:
            slot = self._slots[host] = _Slot(host)
            if self._cooling:
                slot.not_before = self._cooling.pop(host, 0.0)
        heapq.heappush(slot.heap, (-request.priority, next(self._seq), request))
        self._pending += 1
        self._in_memory += 1
        self._offer(slot)

    async def add_seen(self, requests: Sequence[Request]) -> list[bool]:
        dupefilter = self.dupefilter
        return [dupefilter.add(fingerprint(request)) for request in requests]

    def _filter(self, request: Request) -> str | None:
        reason = check_request(request, self._settings, self._allowed)
        if reason is not None or request.dont_filter:
            return reason
        return None if self.dupefilter.add(fingerprint(request)) else "duplicate"

    def _offer(self, slot: _Slot) -> None:
        """Put ``slot`` in the ready heap if it can start a download now."""
        if slot.queued or not slot.heap or slot.timer is not None:
            return
        if slot.active >= self._limits.get(slot.host, self._settings.concurrency_per_domain):
            return
        loop = asyncio.get_running_loop()
        wait = slot.not_before - loop.time()
        if wait > 0:
            slot.timer = loop.call_later(wait, self._delay_elapsed, slot)
            return
        prio, seq, _ = slot.heap[0]
        heapq.heappush(self._ready, (prio, seq, slot))
        slot.queued = True

    def _delay_elapsed(self, slot: _Slot) -> None:
        slot.timer = None
        self._offer(slot)
        self._wake()

    async def next_request(self) -> Request | None:
        if len(self._spill) and self._in_memory < self._window // 2:
            self._refill()
        if self._active >= self._settings.concurrency:
            return None
        if not self._ready and len(self._spill):
            self._refill_idle_hosts()
        if not self._ready:
            return None
        _, _, slot = heapq.heappop(self._ready)
        slot.queued = False
        _, _, request = heapq.heappop(slot.heap)
        self._pending -= 1
        self._in_memory -= 1
        self._active += 1
        slot.active += 1
        self._leased[id(request)] = slot  # release() finds it without parsing the URL again
        delay = self._delays.get(slot.host, self._delay) if self._delays else self._delay
        if delay:
            slot.not_before = asyncio.get_running_loop().time() + delay
        self._offer(slot)
        return request

    def set_delay(self, host: str | None, seconds: float, *, floor: bool = False) -> None:
        if host is None:
            self._delay = max(seconds, 0.0)
            return
        if floor:
            self._floors[host] = seconds
        self._delays[host] = max(seconds, self._floors.get(host, 0.0), 0.0)

    async def release(self, request: Request) -> None:
        slot = self._leased.pop(id(request), None) or self._slots[url_host(request.url)]
        host = slot.host
        slot.active -= 1
        self._active -= 1
        self._offer(slot)
        if not slot.active and not slot.heap and slot.timer is None:
            del self._slots[host]  # keep memory proportional to live hosts
            now = asyncio.get_running_loop().time()
            if slot.not_before > now:  # ... but remember a delay still running
                if len(self._cooling) > 10_000:
                    self._cooling = {h: t for h, t in self._cooling.items() if t > now}
                self._cooling[host] = slot.not_before

    def pending(self) -> int:
        return self._pending

    async def close(self) -> None:
        self._spill.close()
        for slot in self._slots.values():
            if slot.timer is not None:
                slot.timer.cancel()
                slot.timer = None
