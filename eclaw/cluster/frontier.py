"""A frontier in Redis shared by every worker of one crawl (``frontier_url=redis://...``).

Requests wait in a Redis sorted set (priority, then first-in first-out),
deduplicated by a Bloom filter over a Redis bitmap (or a plain set), checked
and set in one Lua script. A worker *leases* the requests it takes; a worker
that stops sending heartbeats has its leases handed back to the queue by the
others after ``lease_timeout``. A request's lease is dropped only once the
request is finished and its items are stored, so a worker killed at any moment
loses nothing. Per-host politeness (``concurrency_per_domain``, the host's
delay) holds for the whole cluster: a download needs one of the host's slots,
kept in Redis. See :mod:`eclaw.cluster.lua` for the keys.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import os
import socket
import uuid
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from eclaw._deprecated import renamed
from eclaw.cluster import lua as redis_lua
from eclaw.cluster.link import RedisLink, ScriptCall, crawl_prefix
from eclaw.cluster.sink import ClusterSink
from eclaw.cluster.waits import Waits
from eclaw.cluster.wakeups import Wakeups
from eclaw.exceptions import EclawError, NotSerialisable
from eclaw.frontier.base import check_request, fingerprint, host_overrides
from eclaw.frontier.dupefilter import RecentSet, recent_key
from eclaw.frontier.serial import from_text, to_text
from eclaw.http import Request
from eclaw.http.urls import redact_url, url_host

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from eclaw.contracts import ItemPipeline
    from eclaw.settings import Settings
    from eclaw.spider import Spider

__all__ = ["RedisFrontier"]

logger = logging.getLogger(__name__)
T = TypeVar("T")
_LEASE_MAX = 16  # requests one LEASE takes at most (and never more than the worker's share of the queue)


class RedisFrontier:
    """The :class:`~eclaw.frontier.base.Frontier` of a distributed crawl.

    Args:
        url: ``redis://host:port/db``.
        seed: push the spider's start requests (``eclaw crawl``, ``eclaw seed``);
            ``False`` for ``eclaw worker``, which waits for them.
        worker: this worker's name (default: host, pid and a random suffix).
    """

    def __init__(self, url: str, *, seed: bool = True, worker: str | None = None) -> None:
        self.url = url
        self.seed = seed
        self.worker = worker or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.link = RedisLink(url, self.worker)
        self.counts = (0, 0, 0)  # queued, leased (every worker), seeded: refreshed by the heartbeat
        self.reclaimed = 0  # requests given back from workers presumed dead
        self._waits = Waits(self._wake_crawl)  # leased, waiting for their host
        # URLs this worker already put through the shared filter: a repeated link is a duplicate
        # without a round trip (most links on a site are repeats)
        self._recent = RecentSet()
        self._held: dict[int, tuple[str, str]] = {}  # request id -> (host, slot token)
        self._asking = 0  # requests asked for by LEASEs under way, or asking for their slot
        self._tokens = itertools.count()
        self._life = uuid.uuid4().hex[:8]  # tells this frontier's calls from a worker of the same name's before
        self._holding: Counter[str] = Counter()  # host -> slots this worker holds there (or is asking for)
        self._workers = 1  # in the crawl, as the last LEASE counted them
        self._ready: deque[Request] = deque()  # holding their slot, not handed out yet
        self._delays: dict[str, float] = {}
        self._limits: dict[str, int] = {}  # per-host concurrency over concurrency_per_domain
        self._delay = 0.0
        self._beat: asyncio.Task[None] | None = None
        self._wakeups: Wakeups | None = None
        self._bloom: tuple[int, int] = (0, 0)  # bits, hashes
        self._wake: Callable[[], None] = lambda: None
        self._marked_seeded = False
        self._works = 0  # "work" messages heard so far
        self._sink = ClusterSink(self.link)

    def __repr__(self) -> str:
        return f"RedisFrontier({redact_url(self.url)!r}, worker={self.worker!r})"

    @property
    def redis(self) -> Redis | None:
        """The client, once open."""
        return self.link.redis

    @property
    def prefix(self) -> str:
        """``eclaw:<spider>:``, the start of the crawl's keys (once open)."""
        return self.link.prefix

    @property
    def seeded(self) -> bool:
        """A worker (``seed=False``) does not run the start requests: ``eclaw seed`` did."""
        return not self.seed

    def outputs(self) -> dict[str, ItemPipeline]:
        """Items go to Redis too, once each, whichever worker stored them."""
        return {"redis": self._sink}

    # -- life cycle -------------------------------------------------------------------

    async def open(self, spider: Spider, settings: Settings, wake: Callable[[], None]) -> None:
        self._spider, self._settings, self._wake = spider, settings, wake
        self._allowed = frozenset(d.lower() for d in spider.allowed_domains)
        self._delay = settings.download_delay
        self._limits, delays = host_overrides(settings)
        for host, seconds in delays.items():
            self.set_delay(host, seconds, floor=True)
        redis = await self.link.open(crawl_prefix(spider.name), settings.lease_timeout)
        if settings.dupefilter == "bloom":
            n, p = settings.dupefilter_capacity, settings.dupefilter_error_rate
            bits = math.ceil(-n * math.log(p) / math.log(2) ** 2)
            wanted = f"{bits}:{max(1, round(bits / n * math.log(2)))}"
            await redis.set(self.prefix + "bloom:size", wanted, nx=True)  # every worker uses the first sizing
            size = await redis.get(self.prefix + "bloom:size")
            bits_text, hashes = str(size or wanted).split(":")
            self._bloom = (int(bits_text), int(hashes))
        self._wakeups = Wakeups(redis, self.prefix + "events", self._heard)
        await self._wakeups.start()  # before the first count: nothing said after it is missed
        # a worker restarted under its old name (``--processes`` names them) takes back at once what
        # its previous life held: its heartbeat would otherwise keep those leases alive for ever
        await self.link.run("REAP", ["workers", "queue"], [self.prefix, self.worker, -1])
        await self._heartbeat()
        self._beat = asyncio.create_task(self._beat_loop())
        logger.info("worker %s joined the crawl %r on %s", self.worker, spider.name, redact_url(self.url))

    async def close(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
            await asyncio.gather(self._beat, return_exceptions=True)
        if self._wakeups is not None:
            await self._wakeups.stop()
        self._waits.clear()
        self._ready.clear()  # leased with their slots: the REAP below gives both back
        if self.redis is not None:
            try:  # what this worker still holds goes back to the queue at once
                await self.link.run("REAP", ["workers", "queue"], [self.prefix, self.worker, -1])
            except EclawError as exc:
                logger.warning("could not hand back this worker's requests (%s): others take them later", exc)
            await self.link.close()

    # -- Redis calls, retried while Redis is away ---------------------------------------

    async def _heartbeat(self) -> None:
        deadline_ms = int(self._settings.lease_timeout * 1000)
        reclaimed = await self.link.run("REAP", ["workers", "queue"], [self.prefix, self.worker, deadline_ms])
        if reclaimed:
            self.reclaimed += int(reclaimed)
            logger.warning("%d requests of a worker presumed dead are back in the queue", reclaimed)
        queued, leased, seeded = await self.link.run("COUNT", ["workers", "queue", "seeded"], [self.prefix])
        self.counts = (int(queued), int(leased), int(seeded))
        if queued or not leased:
            self._wake()  # work to take, or maybe the end of the crawl

    def _wake_crawl(self) -> None:
        self._wake()  # looked up when called: the crawl's wake is given at open

    def _heard(self, message: str) -> None:
        """Another worker (or this one) said there is work to take, or that the crawl is done."""
        queued, leased, seeded = self.counts
        if message == "end":  # nothing queued, nothing leased: the crawl (seeded by then) is over
            self.counts = (0, 0, 1)
        else:
            self.counts = (max(queued, 1), leased, seeded)  # worth a LEASE, which says how many
            self._works += 1
        self._wake()

    async def _beat_loop(self) -> None:
        every = max(0.1, min(1.0, self._settings.lease_timeout / 4))
        while True:
            await asyncio.sleep(every)
            try:
                await self._heartbeat()
            except EclawError as exc:
                logger.error("%s", exc)

    # -- the Frontier protocol ---------------------------------------------------------

    async def enqueue(self, requests: Sequence[Request]) -> list[str | None]:
        assert self.redis is not None
        reasons: list[str | None] = []
        calls: list[tuple[int, str, list[str], list[Any]]] = []
        kept: list[Request] = []  # leased requests that cannot go back to Redis
        sent: dict[int, str] = {}  # index -> recent key, of the requests sent to the shared filter
        for index, request in enumerate(requests):
            key = recent_key(request) if request._id >= 0 else None
            if key is not None and key in self._recent:
                reasons.append("duplicate")
                continue
            reason = check_request(request, self._settings, self._allowed)
            if reason is None:
                try:
                    record = to_text(request, self._spider)
                except NotSerialisable as exc:
                    if request._id < 0:  # leased here (a retry): it is tried again here, under its lease
                        kept.append(request)
                        reasons.append(None)
                        continue
                    logger.error("%s: it cannot wait in Redis", exc)
                    reason = "not serialisable"
            reasons.append(reason)
            if reason is not None:
                continue
            if request._id < 0:  # leased by this worker (a retry): back to the queue, with its new retry count
                names = ["leases:" + self.worker, "queue", "requests", "events"]
                calls.append((index, "REQUEUE", names, [-request._id, record, request.priority]))
                continue
            mode, marks = self._marks(request)
            names = ["seen" if mode == "set" else "bloom", "queue", "requests", "seq", "events"]
            calls.append((index, "ENQUEUE", names, [mode, len(marks), *marks, record, request.priority]))
            if request.dont_filter:  # queued whatever came before; a link to it later is a duplicate
                mode, marks = self._marks(request, always=True)
                calls.append((index, "MARK", ["seen" if mode == "set" else "bloom"], [mode, len(marks), *marks]))
            if key is not None:
                sent[index] = key
        if calls:
            results = await self.link.call(lambda: self._pipelined(calls))
            for (index, script, _, _), result in zip(calls, results, strict=True):
                if script == "ENQUEUE" and not result:
                    reasons[index] = "duplicate"
            for key in sent.values():  # queued or a duplicate: either way in the shared filter now
                self._recent.add(key)
            queued = sum(1 for call, result in zip(calls, results, strict=True) if call[1] != "MARK" and result)
            self.counts = (self.counts[0] + queued, *self.counts[1:])
        if kept:
            await self._keep(kept)
        if self.seed and not self._marked_seeded:
            await self.link.call(lambda: self.link.command("SET", self.prefix + "seeded", "1"))
            self._marked_seeded = True
        return reasons

    async def _keep(self, requests: list[Request]) -> None:
        """Leased requests (retries) that cannot go back to Redis: tried again here, under their leases,
        once they have a slot of their host, as requests just leased (counted as asked for meanwhile)."""
        self._asking += len(requests)
        try:
            await self._acquire(requests)
        finally:
            self._asking -= len(requests)
        self._wake()

    async def add_seen(self, requests: Sequence[Request]) -> list[bool]:
        """Record ``requests`` as seen in the crawl's shared filter (where a redirect led), unqueued."""
        calls: list[tuple[int, str, list[str], list[Any]]] = []
        for index, request in enumerate(requests):
            mode, marks = self._marks(request)
            calls.append((index, "MARK", ["seen" if mode == "set" else "bloom"], [mode, len(marks), *marks]))
        results = await self.link.call(lambda: self._pipelined(calls)) if calls else []
        return [bool(result) for result in results]

    def _pipelined(self, calls: list[tuple[int, str, list[str], list[Any]]]) -> Awaitable[list[Any]]:
        scripts: list[ScriptCall] = [(script, keys, args) for _, script, keys, args in calls]
        return self.link.scripts(scripts)

    def _marks(self, request: Request, *, always: bool = False) -> tuple[str, list[Any]]:
        if request.dont_filter and not always:
            return "none", []
        fp = fingerprint(request)
        if self._settings.dupefilter == "set":
            return "set", [fp.hex()]
        bits, hashes = self._bloom
        h1, h2 = int.from_bytes(fp[:8], "big"), int.from_bytes(fp[8:16], "big") | 1
        return "bloom", [(h1 + i * h2) % bits for i in range(hashes)]

    async def next_request(self) -> Request | None:
        settings = self._settings
        loop = asyncio.get_running_loop()
        while not self._ready and len(self._held) + self._asking < settings.concurrency:
            request = self._waits.ready(loop.time())
            if request is not None:
                self._asking += 1
                try:
                    await self._acquire([request])
                finally:
                    self._asking -= 1
                continue
            # the pumps lease at the same time (their LEASEs share a pipeline): each counts what the others asked for
            room = settings.concurrency - len(self._held) - self._asking
            if room <= 0 or len(self._waits) >= settings.concurrency or not self.counts[0]:
                return None
            count = min(_LEASE_MAX, room)
            self._asking += count
            try:
                batch = await self._lease(count)
                if batch:
                    await self._acquire(batch)
            finally:
                self._asking -= count  # now held (or waiting for their host)
            # round again even if nothing was leased: a request that fell due meanwhile woke the crawl while it
            # was in this call (its loop clears the wake-up after pumping): said "nothing", it waited for ever
        return self._ready.popleft() if self._ready else None

    async def _lease(self, count: int) -> list[Request]:
        """Up to ``count`` requests from the queue (two round trips for them all: lease, then their slots)."""
        keys = ["queue", "requests", "leases:" + self.worker, "workers"]
        works = self._works
        token = f"{self.worker}:{self._life}:{next(self._tokens)}"  # the same on every retry of this call
        keep_ms = int(self.link.retry_for * 1000) + 60_000
        popped = await self.link.run("LEASE", keys, [count, self.prefix, token, keep_ms])
        self._workers = int(popped[0])
        if len(popped) == 2:  # nothing queued; but while others hold requests, the crawl is not over
            # work announced while the LEASE was out may have come after Redis ran it: worth another
            self.counts = (int(works != self._works), int(popped[1]), self.counts[2])
            return []
        leased = []
        for request_id, record in zip(popped[1::2], popped[2::2], strict=True):
            request = from_text(record, self._spider)
            request._id = -int(request_id)  # negative: a Redis id (ids made by the crawl itself are positive)
            leased.append(request)
        return leased

    async def _acquire(self, requests: list[Request]) -> None:
        """One of each request's host slots, cluster-wide, in one round trip: those that got one are
        ready to hand out; the others wait here for as long as Redis says.

        A worker holds at most its share of a host's slots (the host's limit / workers, at least
        one): a worker that frees a slot asks again at once, the others only after a pause, so
        without a share the first worker on a busy host would keep all its slots and the others
        would starve."""
        calls: list[tuple[int, str, list[str], list[Any]]] = []
        lifetime = int((self._settings.timeout + 30) * 1000)
        asking: list[Request] = []
        for request in requests:
            host = url_host(request.url)
            limit = self._limits.get(host, self._settings.concurrency_per_domain)
            if self._holding[host] >= max(1, -(-limit // self._workers)):
                self._waits.full(host, request)  # asks again when this worker frees one of its slots
                continue
            delay = self._delays.get(host, self._delay)
            # a token of its own per slot taken: a late release of an earlier try cannot free this one
            args = [limit, int(delay * 1000), f"{self.worker}:{-request._id}:{next(self._tokens)}", lifetime, host]
            calls.append((len(asking), "ACQUIRE", ["slots:" + host, "next:" + host, "hosts:" + self.worker], args))
            asking.append(request)
            self._holding[host] += 1  # counted as held while asked: one batch cannot take more than the share
        waits = await self.link.call(lambda: self._pipelined(calls)) if calls else []
        now = asyncio.get_running_loop().time()
        for request, (_, _, keys, args), wait_ms in zip(asking, calls, waits, strict=True):
            host = keys[0].removeprefix("slots:")
            if not wait_ms:
                self._held[request._id] = (host, str(args[2]))
                self._waits.acquired(host)
                self._ready.append(request)
                continue
            self._let_go(host)
            if int(wait_ms) < 0:
                self._waits.full(host, request)
            else:
                self._waits.delayed(request, now + int(wait_ms) / 1000)

    def _let_go(self, host: str) -> None:
        self._holding[host] -= 1
        if not self._holding[host]:
            del self._holding[host]

    async def release(self, request: Request) -> None:
        """The download is over: its host slot goes back, with the next pipeline (the next download
        need not wait for it: whatever asks for the slot next is sent after it)."""
        host, token = self._held.pop(request._id, ("", ""))
        if token:
            self._let_go(host)
            self.link.send("ZREM", self.prefix + "slots:" + host, token)  # sent again if its pipeline is lost
            self._waits.freed(host)

    async def done(self, request: Request) -> None:
        """``request`` is finished and its items are handed to the outputs: once they are in Redis, drop its lease."""
        if request._id < 0:
            await self._sink.confirm()
            keys = ["leases:" + self.worker, "requests", "workers", "queue", "events"]
            await self.link.run("COMPLETE", keys, [-request._id, self.prefix])

    def pending(self) -> int:
        queued, leased, seeded = self.counts
        if not seeded and not self.seed:
            return 1  # no start requests yet: wait for `eclaw seed`
        return len(self._waits) + len(self._ready) + queued + leased

    def sent(self, host: str) -> None:
        """A request to ``host`` has just been sent (:class:`~eclaw.frontier.politeness.Pacing`): its next start,
        cluster-wide, counts from now, as one process's frontier counts it (nothing waits for Redis)."""
        delay = self._delays.get(host, self._delay)
        if delay > 0:
            self.link.send("EVAL", redis_lua.PACE, 1, self.prefix + "next:" + host, int(delay * 1000))

    def keep_alive(self, host: str, seconds: float) -> bool:
        """Connections are kept (:class:`~eclaw.frontier.politeness.Pacing`): which worker asks a host next is
        not known here."""
        return True

    def set_delay(self, host: str | None, seconds: float, *, floor: bool = False) -> None:
        if host is None:
            self._delay = max(seconds, 0.0)
        else:
            self._delays[host] = max(seconds, self._delays.get(host, 0.0) if floor else 0.0, 0.0)


__getattr__ = renamed(__name__, {"RedisScheduler": "RedisFrontier"})  # eclaw-rename: keep (old names, one release)
