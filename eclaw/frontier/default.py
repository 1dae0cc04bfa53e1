"""The frontier: filters, dedupe, priority order and per-host politeness, memory-bounded."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from eclaw.exceptions import IgnoreRequest
from eclaw.frontier.base import FORWARDED, DupeFilter, check_hop, check_request, fingerprint, host_overrides
from eclaw.frontier.dupefilter import BloomDupeFilter, RecentSet, SetDupeFilter
from eclaw.frontier.politeness import NO_KEY, HostSlot, Names
from eclaw.frontier.spill import Row, SpillQueue
from eclaw.http import Request
from eclaw.http.urls import url_host

if TYPE_CHECKING:
    from eclaw.settings import Settings
    from eclaw.spider import Spider

__all__ = ["DefaultFrontier"]

_URL_REASONS = frozenset({"offsite", "unsupported scheme"})  # depend on the URL (fragment aside) alone
_REFILL_MAX = 512  # requests of one host read back from disk at once, at most


class DefaultFrontier:
    """In-memory priority frontier, spilling to disk past its window.

    Order: higher ``priority`` first, then first-in first-out (breadth-first),
    among the hosts that may start a download now.
    Filters, in order: scheme (http/https only), URL length, offsite
    (``allowed_domains``), depth (``max_depth``), duplicates (fingerprint in
    the dupefilter). ``dont_filter`` skips offsite and duplicate checks (its URL is still
    recorded: a link to a start URL later is a duplicate), ``meta["allow_offsite"]`` the offsite
    one. Each redirect hop passes the same URL checks (:meth:`check_hop`).
    Memory: past ``frontier_memory`` pending requests, ordinary ones wait in a
    SQLite file, read back host by host when that host's turn comes, so RAM stays
    flat however large the frontier grows, and where a request waits never
    changes when it is handed out: each host's slot knows the place of its first
    request on disk, and competes with it like any other.
    Politeness: at most ``concurrency`` downloads in all, at most
    ``concurrency_per_domain`` per host, and ``download_delay`` seconds (or
    the host's own delay, see ``set_delay``) between two requests to one host,
    counted from when the first was sent: with a fetcher that reports it
    (:class:`~eclaw.frontier.politeness.Pacing`), a host's next request is handed
    out once the previous one was sent (or ended unsent) and its delay is over;
    with any other, the delay counts from when the previous one was handed out.
    """

    def __init__(self, dupefilter: DupeFilter | None = None) -> None:
        self._dupefilter = dupefilter
        self._recent = RecentSet()
        self._limits: dict[str, int] = {}  # per-host concurrency over concurrency_per_domain
        self._leased: dict[int, HostSlot] = {}  # id of each request handed out -> its host's slot
        self._refused: dict[str, str] = {}  # recent URLs refused for a reason of the URL alone
        self._slots: dict[str, HostSlot] = {}  # hosts with requests queued, in flight or a timer running
        self._ready: list[tuple[int, int, int, HostSlot]] = []  # slots that may start a download, by their head
        self._seq = itertools.count()
        self._pending = 0  # in memory and on disk
        self._in_memory = 0
        self._active = 0
        self._wake: Callable[[], None] = lambda: None
        self._delay = 0.0  # for hosts without their own (download_delay, or the throttle's start delay)
        self._delays: dict[str, float] = {}  # per-host delays set by throttle / robots Crawl-delay
        self._floors: dict[str, float] = {}
        self._cooling: dict[str, float] = {}  # forgotten hosts whose delay has not elapsed yet
        self._cooling_limit = 1024
        self._paced = False  # a fetcher reports when it sends (sent() was called)
        self._names: Names | None = None  # the fetcher's resolver, asked before a host may start

    @property
    def dupefilter(self) -> DupeFilter:
        assert self._dupefilter is not None, "frontier not opened"
        return self._dupefilter

    async def open(self, spider: Spider, settings: Settings, wake: Callable[[], None]) -> None:
        self._settings = settings
        self._window = settings.frontier_memory
        self._per_host = settings.concurrency_per_domain
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
        spill: list[Row] = []
        for request in requests:
            # Most links on a site are repeats: a GET of a URL (fragment aside) seen
            # recently is a duplicate, known without canonicalising or hashing it;
            # an offsite or mailto: link seen recently is refused again, unchecked.
            key = None
            # nor is one in a cookie jar of its own, or one that may go offsite, by its URL alone
            meta = request._meta
            if (
                request.method == "GET"
                and not request.body
                and not request.dont_filter
                and not (meta and ("cookiejar" in meta or meta.get("allow_offsite")))
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
                if reason is None or reason == "duplicate" or reason == FORWARDED:
                    recent.add(key)
                elif reason in _URL_REASONS:
                    if len(refused) >= 4096:
                        refused.clear()
                    refused[key] = reason
            if reason is None:
                self._place(request, spill)
            reasons.append(reason)
        if spill:
            self._spill_rows(spill)
        return reasons

    def take_back(self, requests: Sequence[Request]) -> None:
        """A resumed crawl's saved requests, queued as they were (:class:`~eclaw.frontier.base.TakesBack`)."""
        spill: list[Row] = []
        for request in requests:
            self._place(request, spill)
        if spill:
            self._spill_rows(spill)

    def behind(self, hosts: Callable[[str], bool]) -> int:
        """How many requests wait in memory behind their host's next one, of the hosts ``hosts`` allows."""
        return sum(len(slot.heap) - 1 for slot in self._slots.values() if slot.heap and hosts(slot.host))

    def take_out(self, count: int, hosts: Callable[[str], bool], movable: Callable[[Request], bool]) -> list[Request]:
        """Up to ``count`` of the requests queued last in memory (those ``movable`` allows), out of the
        frontier, from the hosts ``hosts`` allows, a few from each: every host keeps its next request,
        so its place stands."""
        taken: list[Request] = []
        slots = [slot for slot in self._slots.values() if len(slot.heap) > 1 and hosts(slot.host)]
        for n, slot in enumerate(slots):
            share = -(-(count - len(taken)) // (len(slots) - n))  # what is left, spread over the hosts left
            if share <= 0:
                break
            entries = sorted(slot.heap)
            kept = entries[:1]
            for entry in reversed(entries[1:]):  # the last first
                if share and movable(entry[2]):
                    taken.append(entry[2])
                    share -= 1
                else:
                    kept.append(entry)
            slot.heap = sorted(kept)  # a sorted list is a heap; the head is still the head
        self._pending -= len(taken)
        self._in_memory -= len(taken)
        return taken

    def _place(self, request: Request, spill: list[Row]) -> None:
        """Queue ``request`` on its host: in memory, or (an ordinary request past the window, or behind
        others of its host on disk) for the disk."""
        host = url_host(request.url)
        slot = self._slots.get(host)
        if slot is None:
            slot = self._slots[host] = HostSlot(host, self._cooling.pop(host, 0.0) if self._cooling else 0.0)
        seq = next(self._seq)
        self._pending += 1
        if self._window and request.priority <= 0 and (slot.disk or self._in_memory >= self._window):
            spill.append((seq, host, request))
            return
        heapq.heappush(slot.heap, (-request.priority, seq, request))
        self._in_memory += 1
        self._offer(slot)

    def _spill_rows(self, rows: list[Row]) -> None:
        kept = {seq for seq, _, _ in self._spill.put(rows)}  # those that cannot be stored stay in memory
        slots = self._slots
        for seq, host, request in rows:
            slot = slots[host]
            if seq in kept:
                heapq.heappush(slot.heap, (-request.priority, seq, request))
                self._in_memory += 1
            else:
                slot.spilled((-request.priority, seq))
            self._offer(slot)

    def _unspill(self, slot: HostSlot) -> None:
        """Bring back the first of ``slot``'s requests on disk: its share of the window (at least one)."""
        share = max(self._limits.get(slot.host, self._per_host), self._window // len(self._slots))
        count = max(1, min(share, self._window - self._in_memory, _REFILL_MAX))
        taken, following = self._spill.take(slot.host, count)
        for seq, request in taken:
            heapq.heappush(slot.heap, (-request.priority, seq, request))
        self._in_memory += len(taken)
        slot.disk = slot.disk - len(taken) if following is not None else 0
        slot.disk_key = following or NO_KEY

    async def add_seen(self, requests: Sequence[Request]) -> list[bool]:
        dupefilter = self.dupefilter
        return [dupefilter.add(fingerprint(request)) for request in requests]

    def _filter(self, request: Request) -> str | None:
        reason = check_request(request, self._settings, self._allowed)
        if reason is not None:
            return reason
        if request.dont_filter:  # fetched whatever came before; a link to it later is a duplicate
            self.dupefilter.add(fingerprint(request))
            return None
        return None if self.dupefilter.add(fingerprint(request)) else "duplicate"

    async def check_hop(self, request: Request, url: str) -> None:
        """A redirect of ``request`` to ``url`` is refused as a new request to it would be: scheme, URL
        length, offsite (:class:`~eclaw.contracts.ChecksHops`)."""
        reason = check_hop(request, url, self._settings, self._allowed)
        if reason is not None:
            raise IgnoreRequest(reason)

    def _offer(self, slot: HostSlot) -> None:
        """Put ``slot`` in the ready heap if it can start a download now (else time it); one waiting there
        already moves up if a request that comes before its head arrived (its old entry goes stale)."""
        if slot.queued:
            key = slot.order()
            if key < slot.queued:
                heapq.heappush(self._ready, (key[0], key[1], next(self._seq), slot))
                slot.queued = key
            return
        if slot.timer is not None or slot.unsent or slot.looking_up or not (slot.heap or slot.disk):
            return
        if slot.active >= self._limits.get(slot.host, self._per_host):
            return
        if slot.not_before:
            loop = asyncio.get_running_loop()
            wait = slot.not_before - loop.time()
            if wait > 0:
                slot.timer = loop.call_later(wait, self._delay_elapsed, slot)
                return
        if self._names is not None and not self._names.prefetch(slot.host, lambda: self._named(slot)):
            slot.looking_up = True
            return
        key = slot.order()
        heapq.heappush(self._ready, (key[0], key[1], next(self._seq), slot))  # never compares two slots
        slot.queued = key

    def resolve_with(self, names: Names) -> None:
        """Look each host's name up before it may start a download
        (:class:`~eclaw.frontier.politeness.Prefetching`): waiting on DNS holds no download slot."""
        self._names = names

    def _named(self, slot: HostSlot) -> None:
        slot.looking_up = False
        if self._slots.get(slot.host) is slot:
            self._offer(slot)
            self._wake()

    def _delay_elapsed(self, slot: HostSlot) -> None:
        slot.timer = None
        slot.ready_at = next(self._seq)  # ready from now: behind the requests that arrived before
        self._offer(slot)
        self._wake()

    async def next_request(self) -> Request | None:
        if self._active >= self._settings.concurrency:
            return None
        ready = self._ready
        while ready:
            prio, seq, _, slot = heapq.heappop(ready)
            if slot.queued != (prio, seq):  # stale: it moved up since, or was handed out from there
                continue
            slot.queued = None
            if slot.not_before and slot.not_before > asyncio.get_running_loop().time():
                self._offer(slot)  # a request sent since it was offered moved its next start
                continue
            if slot.next_on_disk():
                self._unspill(slot)
            return self._hand_out(slot)
        return None

    def _hand_out(self, slot: HostSlot) -> Request:
        _, _, request = heapq.heappop(slot.heap)
        slot.ready_at = 0
        self._pending -= 1
        self._in_memory -= 1
        self._active += 1
        slot.active += 1
        self._leased[id(request)] = slot  # release() finds it without parsing the URL again
        delay = self._delays.get(slot.host, self._delay) if self._delays else self._delay
        if delay:  # until it is sent (see sent()), count from now
            slot.not_before = asyncio.get_running_loop().time() + delay
            if self._paced:  # the fetcher says when it sends: the host's next request waits for that
                slot.unsent += 1
        self._offer(slot)
        return request

    def sent(self, host: str) -> None:
        """A request to ``host`` left for the wire: its delay counts from now (:class:`Pacing`)."""
        if not self._delay and not self._delays:
            return
        self._paced = True
        slot = self._slots.get(host)
        if slot is None:  # a redirect to a host with nothing queued: nothing to pace
            return
        delay = self._delays.get(host, self._delay) if self._delays else self._delay
        if delay:
            slot.not_before = max(slot.not_before, asyncio.get_running_loop().time() + delay)
        if slot.unsent:  # a redirect's hops are sent too: never below none
            slot.unsent -= 1
            self._offer(slot)

    def keep_alive(self, host: str, seconds: float) -> bool:
        """Whether a connection to ``host`` may be used again within ``seconds`` (:class:`Pacing`)."""
        if not self._delay and not self._delays:
            return True
        delay = self._delays.get(host, self._delay) if self._delays else self._delay
        if not delay:
            return True
        slot = self._slots.get(host)
        if slot is None or not slot.waiting:
            return False
        return max(slot.not_before - asyncio.get_running_loop().time(), delay) <= seconds

    def set_delay(self, host: str | None, seconds: float, *, floor: bool = False) -> None:
        if host is None:
            self._delay = max(seconds, 0.0)
            return
        if floor:
            self._floors[host] = seconds
        self._delays[host] = max(seconds, self._floors.get(host, 0.0), 0.0)

    async def release(self, request: Request) -> None:
        slot = self._leased.pop(id(request), None) or self._slots[url_host(request.url)]
        slot.active -= 1
        self._active -= 1
        if slot.unsent > slot.active:  # it ended unsent (refused, cached, failed to connect)
            slot.unsent = slot.active
        self._offer(slot)
        if slot.idle():
            self._forget(slot)

    def _forget(self, slot: HostSlot) -> None:
        """Drop an idle host's slot (memory follows the live hosts), remembering a delay still running."""
        del self._slots[slot.host]
        now = asyncio.get_running_loop().time() if slot.not_before else 0.0
        if slot.not_before > now:
            if len(self._cooling) >= self._cooling_limit:  # drop the elapsed ones, at amortised cost
                self._cooling = {h: t for h, t in self._cooling.items() if t > now}
                self._cooling_limit = max(1024, 2 * len(self._cooling))
            self._cooling[slot.host] = slot.not_before

    def pending(self) -> int:
        return self._pending

    async def close(self) -> None:
        self._spill.close()
        for slot in self._slots.values():
            if slot.timer is not None:
                slot.timer.cancel()
                slot.timer = None
