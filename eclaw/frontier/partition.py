"""The frontier of one of the processes of a crawl on N (``--processes N``): its part of the URLs.

Each request has one owner among the processes, the same in every process: a host
that must be paced as a whole (a delay, the throttle on, or fewer connections
allowed than there are processes) belongs whole to one process, by its name; any
other URL belongs to the process its fingerprint names, and each process then uses
its share of the host's connections. A process queues, deduplicates and saves (with
``--state``) only its own requests, exactly as one process does; the others go to
their owner through :class:`~eclaw.frontier.mesh.Mesh`. Nothing is shared but those
files: no process waits for another on a link.

A process that has nothing left to do while another still has a queue is lent part of
it, so the crawl does not end on one process alone: the lender takes the requests it
queued last in memory out of its frontier (of hosts shared among the processes: a host
paced as a whole stays with its owner, so with a ``download_delay`` or the throttle nothing
is lent) and writes them to the idle one's file, marked as lent; the borrower queues them
as they are (they were filtered and counted by their owner) and saves them as its own, and
the lender's saved state forgets them (see the mesh for the order of the two). A retry of a
lent request goes back to its owner, and a redirect to the owner of the page it led to, as
any link does; a request its owner will not deduplicate (``dont_filter``: a retry) is held
until the sender's checkpoint on disk holds it as sent, as a lent one is.

Exactly once, through a kill -9 at any moment (``--state``): a process's checkpoint holds, in
one consistent cut, the requests its crawl has taken in and how far it has read each file.
The poller takes a file's lines in through the crawl (the :class:`~eclaw.frontier.base.Feed`'s
``admit`` and ``adopt``, which record their requests in the saved state's journal before they
first suspend), and a checkpoint may fall at any later suspension; so the read position moves
on just before the call that records a run of lines, never after it: a checkpoint that holds a
lent (or held) request as this process's own also holds its line as read, or the resumed
process would read the line again and queue the request twice.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from eclaw.exceptions import NotSerialisable
from eclaw.frontier.base import FORWARDED, Feed, check_request, fingerprint, host_overrides
from eclaw.frontier.default import DefaultFrontier
from eclaw.frontier.mesh import HELD, LENT, Mesh, read_status
from eclaw.frontier.serial import from_line, to_line
from eclaw.http import Request
from eclaw.http.urls import url_host

if TYPE_CHECKING:
    from eclaw.settings import Settings
    from eclaw.spider import Spider

__all__ = ["PartFrontier"]

logger = logging.getLogger(__name__)
_POLL = 0.005  # seconds between two looks at the other processes' files
_LEND_EVERY = 20  # polls between two looks for an idle process to lend requests to


class PartFrontier(DefaultFrontier):
    """Process ``mesh.part``'s frontier; the start requests come from process 0."""

    def __init__(self, mesh: Mesh) -> None:
        super().__init__()
        self.mesh = mesh
        self._count = mesh.count
        self._out: dict[int, list[bytes]] = {peer: [] for peer in mesh.peers}  # records for each peer
        self._whole_hosts: dict[str, bool] = {}
        self._all_whole = False
        self._paced_hosts: frozenset[str] = frozenset()  # hosts given a delay of their own (host_delay)
        self._host_limits: dict[str, int] = {}
        self._default_limit = 1
        self._feed: Feed | None = None
        self._stopping: Callable[[], bool] = lambda: False
        self._reserve = 0  # requests a process keeps queued before it lends any: its concurrency
        self._uncommitted: dict[int, int] = {}  # peer -> where the lent/held lines no checkpoint on disk holds end
        self._holding: set[int] = set()  # peers with a held line among the records waiting in ``_out``
        self._at_checkpoint: dict[int, int] = {}  # each peer's file's length at the checkpoint being saved
        self._commits: dict[int, int] = {}  # peer -> the length of its file it may read lent/held lines to
        self._poller: asyncio.Task[None] | None = None
        self._arrived = asyncio.Event()
        self._idle = False
        self._queued = 0  # requests of this process's part queued so far

    def __repr__(self) -> str:
        return f"PartFrontier(part {self.mesh.part + 1} of {self._count})"

    @property
    def seeded(self) -> bool:
        return self.mesh.part != 0

    # -- owners and politeness -------------------------------------------------------------

    async def open(self, spider: Spider, settings: Settings, wake: Callable[[], None]) -> None:
        count, per_host = self._count, settings.concurrency_per_domain
        limits, delays = host_overrides(settings)  # from the settings alone: the same in every process
        self._all_whole = settings.download_delay > 0 or settings.autothrottle or per_host < count
        self._paced_hosts = frozenset(delays)
        self._host_limits, self._default_limit = limits, per_host
        await super().open(spider, settings, wake)
        self._spider = spider
        self._reserve = settings.concurrency
        if not self._all_whole:
            self._per_host = per_host // count  # a host's connections, shared among the processes
            for host in delays:
                self._limits.setdefault(host, per_host)  # paced: whole in one process, with all its connections
            for host, limit in limits.items():
                if not self._whole(host):
                    self._limits[host] = limit // count
        self.mesh.open()

    def _whole(self, host: str) -> bool:
        """Whether ``host`` is paced as a whole, so one process has all its URLs (from the settings alone)."""
        whole = self._whole_hosts.get(host)
        if whole is None:
            limit = self._host_limits.get(host, self._default_limit)
            whole = self._whole_hosts[host] = self._all_whole or host in self._paced_hosts or limit < self._count
        return whole

    def owner(self, request: Request) -> int:
        """The process that queues ``request``: the same answer in every process of the crawl."""
        return self._owner(request)[0]

    def _owner(self, request: Request) -> tuple[int, bytes | None]:
        """The owner, and the fingerprint if it took one (a URL of a host shared among the processes)."""
        host = url_host(request.url)
        if self._whole(host):
            return zlib.crc32(host.encode()) % self._count, None
        fp = fingerprint(request)
        return int.from_bytes(fp[:4], "big") % self._count, fp

    def set_delay(self, host: str | None, seconds: float, *, floor: bool = False) -> None:
        """A delay found during the crawl (robots.txt, Retry-After) for a host shared among the processes
        is kept by each of them N times over: together they keep it."""
        shared = not self._all_whole and (host is None or not self._whole(host))
        super().set_delay(host, seconds * self._count if shared else seconds, floor=floor)

    # -- requests in -------------------------------------------------------------------------

    async def enqueue(self, requests: Sequence[Request]) -> list[str | None]:
        """As one process's frontier, in its one pass over the links (a link seen lately, here or sent on,
        is a duplicate without more ado); a new one of another part is sent there (``_filter``)."""
        reasons = await super().enqueue(requests)
        self._queued += reasons.count(None)
        for peer, lines in self._out.items():
            if lines:
                self.mesh.send(peer, lines)
                lines.clear()
                if peer in self._holding:
                    self._holding.discard(peer)
                    self._gated(peer)
        return reasons

    def _filter(self, request: Request) -> str | None:
        reason = check_request(request, self._settings, self._allowed)
        if reason is not None:
            return reason
        owner, fp = self._owner(request)
        if owner != self.mesh.part:
            return self._forward(request, owner)
        if request.dont_filter:  # fetched whatever came before; a link to it later is a duplicate
            self.dupefilter.add(fp or fingerprint(request))
            return None
        return None if self.dupefilter.add(fp or fingerprint(request)) else "duplicate"

    def _forward(self, request: Request, owner: int) -> str:
        try:
            line = to_line(request, self._spider)
        except NotSerialisable as exc:
            logger.error("%s: it cannot go to another process", exc)
            return "not serialisable"
        if request.dont_filter:  # its owner's dupe filter would not stop a second one: held (see the mesh)
            line = HELD + line
            self._holding.add(owner)
        self._out[owner].append(line)
        return FORWARDED  # remembered as seen lately: a repeat is a duplicate (queued there)

    def elsewhere(self, url: str) -> bool:
        """Whether a plain GET of ``url`` is another process's."""
        return self.owner(Request(url)) != self.mesh.part

    async def next_request(self) -> Request | None:
        if self._poller is None and self._feed is not None:  # the crawl has begun (a resumed one: its
            self._poller = asyncio.create_task(self._poll())  # dupe filter is back): the others' links may come
        return await super().next_request()

    # -- the other processes' links --------------------------------------------------------

    def feed(self, feed: Feed) -> None:
        """The crawl's ways in and out for requests, and its stop flag."""
        self._feed, self._stopping = feed, feed.stopping

    async def _poll(self) -> None:
        polls = 0
        while not self._stopping():
            arrived = self.mesh.arrivals()
            if arrived:
                queued = self._queued
                self.mesh.say(idle=False)
                for peer, (lines, position) in arrived.items():
                    await self._take(peer, lines, position)
                if self._queued != queued:
                    self._idle = False  # work for the crawl: it is not idle from here
                    self._arrived.set()
            if self._idle:
                self.mesh.say(idle=True)  # with how far it has read now
                if self.mesh.ended():
                    self._arrived.set()
            polls += 1
            if polls % _LEND_EVERY == 0 and not self._idle:
                self._lend()
            await asyncio.sleep(_POLL)
        self._arrived.set()

    async def _take(self, peer: int, lines: list[bytes], end: int) -> None:
        """Take in ``lines``, read from ``peer``'s file up to ``end``: a run of lines at a time, in the
        file's order (lent ones adopted, the others admitted), the read position moved on to a run's end
        just before the call that records it, with no suspension between (see the module's doc)."""
        assert self._feed is not None
        position = end - sum(len(line) + 1 for line in lines)
        for lent, run in self._runs(lines):
            position += sum(len(line) + 1 for line in run)
            requests = [from_line(line[1:] if line[:1] in (LENT, HELD) else line, self._spider) for line in run]
            for request in requests:
                request._id = 0  # the sender's id: it gets one of this process's own
            self.mesh.taken(peer, position)
            if lent:
                await self._feed.adopt(requests)
                self._queued += len(requests)
            else:
                await self._feed.admit(requests)

    @staticmethod
    def _runs(lines: list[bytes]) -> list[tuple[bool, list[bytes]]]:
        """``lines`` in runs of lent ones and of others (each of 1,000 lines at most), in order."""
        runs: list[tuple[bool, list[bytes]]] = []
        for line in lines:
            lent = line.startswith(LENT)
            if not runs or runs[-1][0] != lent or len(runs[-1][1]) == 1000:
                runs.append((lent, []))
            runs[-1][1].append(line)
        return runs

    # -- lending to an idle process ----------------------------------------------------------

    def _lend(self) -> None:
        """Lend part of this process's queue to the processes that have nothing left to do (idle, and
        every request sent them read): of the requests queued in memory behind their host's next one,
        those past the crawl's concurrency, if there are as many as that, are shared out evenly between
        them and this one. A request that made its redirect's page seen before a pause stays: that page is
        its to parse (see :meth:`~eclaw.core.accounting.Journal.marked_by`)."""
        if self._all_whole or self._in_memory < 2 * self._reserve:
            return
        hungry = [peer for peer in self.mesh.peers if self._hungry(peer)]
        if not hungry:
            return
        spare = self.behind(self._shared) - self._reserve
        if spare < self._reserve:
            return
        assert self._feed is not None
        for peer in hungry:
            self._lend_to(peer, self.take_out(spare // (len(hungry) + 1), self._shared, self._feed.movable))

    def _shared(self, host: str) -> bool:
        return not self._whole(host)

    def _hungry(self, peer: int) -> bool:
        status = read_status(self.mesh.directory, peer)
        return bool(status and status["idle"] and status["read"].get(str(self.mesh.part)) == self.mesh.sent(peer))

    def _lend_to(self, peer: int, requests: list[Request]) -> None:
        assert self._feed is not None
        lines, lent, kept = [], [], []
        for request in requests:
            try:
                lines.append(LENT + to_line(request, self._spider))
                lent.append(request)
            except NotSerialisable:
                kept.append(request)  # it cannot be written: it stays here
        self.take_back(kept)
        if not lines:
            return
        self.mesh.send(peer, lines)
        self._feed.lent(lent)
        logger.debug("lent %d requests to process %d", len(lent), peer + 1)
        self._gated(peer)

    def _gated(self, peer: int) -> None:
        """Lent or held lines were just written to ``peer``'s file: it may read them once a checkpoint on
        disk holds them as sent (``checkpointed``, one asked for now), at once without ``--state``."""
        if self._feed is not None and self._feed.keeps_state:
            self._uncommitted[peer] = self.mesh.sent(peer)
            self._feed.save_soon()
        else:
            self._commit(peer, self.mesh.sent(peer))

    async def idle(self) -> None:
        """The crawl has nothing left to do: wait until the other processes send work (queued here)
        or every process is idle with every file read (the parent writes ``end``), or a stop."""
        self._idle = True
        self._release_unsaved()
        try:  # work that came while the crawl's idle handlers ran is queued: not idle
            while self._idle and not self._pending and not (self._stopping() or self.mesh.ended()):
                self._arrived.clear()
                await self._arrived.wait()
        finally:
            self._idle = False

    def _release_unsaved(self) -> None:
        """Held lines sent after the last checkpoint taken, as the crawl goes idle, came from its idle
        handlers (lent ones cannot: a lender has a queue, and takes the checkpoint it asked for before
        it runs dry). No checkpoint is taken while idle, so they are readable now, or their owner would
        wait for ever; the handlers run again after a resume, so a request of theirs may then be fetched
        again, as in a crawl on one process."""
        for peer, end in list(self._uncommitted.items()):
            if end > self._at_checkpoint.get(peer, 0):
                self._commit(peer, end)
                del self._uncommitted[peer]

    def _commit(self, peer: int, length: int) -> None:
        """``peer`` may read the lent and held lines of its file up to ``length`` (never fewer than before)."""
        if length > self._commits.get(peer, -1):
            self._commits[peer] = length
            self.mesh.commit(peer, length)

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
        self.mesh.close()
        await super().close()

    # -- saved with the crawl (--state) ----------------------------------------------------

    def checkpoint(self) -> dict[str, Any]:
        saved = self.mesh.checkpoint()
        self._at_checkpoint = dict(saved["sent"])
        return saved

    def checkpointed(self) -> None:
        """What was lent or held before the checkpoint now on disk may be read by its readers."""
        for peer, end in list(self._uncommitted.items()):
            length = self._at_checkpoint.get(peer, 0)
            self._commit(peer, length)
            if length >= end:
                del self._uncommitted[peer]

    def restore(self, saved: dict[str, Any]) -> None:
        self.mesh.restore(saved)

    async def flush(self) -> None:
        await asyncio.to_thread(self.mesh.flush)
