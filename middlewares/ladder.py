"""Ladder: each host on the cheapest fetcher that works for it, escalated on bans, relaxed when quiet."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from eclaw.contracts import Fetch
from eclaw.events import FetcherChanged
from eclaw.exceptions import HttpError
from eclaw.fetchers.router import FETCHERS, fetcher_of, host_fetchers
from eclaw.fetchers.rungs import Change, Rungs, parse_rungs
from eclaw.http import Request, Response
from eclaw.http.urls import url_host
from eclaw.observe.cpu import CpuShares, descendants_cpu
from eclaw.settings import CHALLENGE_MARKERS, Settings

if TYPE_CHECKING:
    from eclaw.cluster.rungs import SharedRungs
    from eclaw.contracts import CrawlContext

__all__ = ["CHALLENGE_MARKERS", "Ladder"]

logger = logging.getLogger(__name__)

_SCAN = 65_536  # bytes of a page searched for a marker
_PINS = ("fetcher", "rung")  # what the ladder puts in a request's meta for the fetch it chose


class Ladder:
    """Fetch each host with the cheapest fetcher that works for it (``-s ladder=plain,impersonate,browser``).

    A host starts on its base rung (the fetcher ``fetchers`` or the spider gives it, else the
    first). A ban — a status in ``ban_statuses`` whose page has a challenge marker
    (``ban_pattern``) or ``is_banned(response)`` (yours, or the spider's ``is_banned``) — moves
    the host one rung up and fetches the page again there at once; after ``quiet`` seconds
    without a ban the host drifts one rung down (banned again there, its quiet period doubles).
    A page that yields no item where the spider expects some (``expect_items``) is fetched
    again one rung up by itself; its host follows once most of its pages come empty (see
    :mod:`eclaw.fetchers.rungs`). Requests that name their fetcher (``render=True``,
    ``meta["fetcher"]``) are left alone.

    Each move is a :class:`~eclaw.events.FetcherChanged` event (in the trace and the report);
    the stats count pages, bans, empty pages and CPU milliseconds per fetcher
    (``fetcher browser pages``, ``fetcher plain banned``, ``fetcher plain empty``, ``fetcher browser cpu ms``).
    With ``--redis`` the rungs are shared by the workers; with ``--state`` they are saved.

    Args:
        fetchers: the rungs, lowest first (names of :data:`eclaw.fetchers.router.FETCHERS`).
        quiet: seconds without a ban before a host comes one rung down.
        ban_statuses: statuses that are a ban when the page has a challenge marker.
        ban_pattern: the challenge markers, a regular expression searched in the first 64 KB.
        is_banned: your own test of a response (over the spider's ``is_banned``).
    """

    def __init__(
        self,
        fetchers: Sequence[str] = ("plain", "impersonate", "browser"),
        *,
        quiet: float = 300.0,
        ban_statuses: Sequence[int] = (403, 429, 503),
        ban_pattern: str = CHALLENGE_MARKERS,
        is_banned: Callable[[Response], bool] | None = None,
    ) -> None:
        self.names = parse_rungs(",".join(fetchers), list(FETCHERS))
        self.quiet = quiet
        self.ban_statuses = frozenset(ban_statuses)
        self.ban_pattern = re.compile(ban_pattern.encode())
        self.is_banned = is_banned
        self.cpu = CpuShares()
        self.rungs = Rungs(self.names, quiet, lambda host: 0)
        self._saved: dict[str, Any] = {}
        self._crawl: CrawlContext | None = None
        self._shared: SharedRungs | None = None
        self._sampler: asyncio.Task[None] | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Ladder:
        return cls(settings.ladder.split(","), quiet=settings.ladder_quiet, ban_pattern=settings.ladder_ban_pattern)

    def __repr__(self) -> str:
        return f"Ladder({','.join(self.names)})"

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        hosts, own = host_fetchers(crawl.settings.fetchers), crawl.spider.fetcher or self.names[0]
        ranks = {name: rung for rung, name in enumerate(self.names)}
        self.rungs = Rungs(self.names, self.quiet, lambda host: ranks.get(fetcher_of(hosts, host, own), 0))
        self.rungs.load(self._saved.get("hosts", {}))
        if crawl.settings.frontier_url:
            from eclaw.cluster.rungs import SharedRungs  # only a Redis crawl needs the client

            self._shared = SharedRungs(crawl.settings.frontier_url, crawl.spider.name, self.rungs)
            await self._shared.open()
        self._sampler = asyncio.create_task(self._sample(), name="eclaw-ladder-cpu")

    async def close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
        self.cpu.sample()
        if self._crawl is not None:
            for name, seconds in self.cpu.seconds.items():
                self._crawl.stats.counters[f"fetcher {name} cpu ms"] += round(seconds * 1000)
        if self._shared is not None:
            await self._shared.close()

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        meta = request._meta  # not request.meta: that would give every request a dict
        if meta and (meta.get("fetcher") or meta.get("render")):
            return await call_next(request)
        host = url_host(request.url)
        rung, change = self.rungs.current(host)
        await self._report(change)
        floor = meta.get("rung") if meta else None  # an empty page fetched again a rung up
        if floor in self.names:
            rung = max(rung, self.names.index(str(floor)))
        self.rungs.fetched(host, rung)
        while True:
            name = self.names[rung]
            response, error = await self._fetch(request, name, call_next)
            why = self._ban(response)
            if why is None:
                break
            self._count(name, "banned")
            higher, change = self.rungs.escalate(host, rung, why)
            await self._report(change)
            if higher == rung:  # the top rung is banned too: the page is what it is
                self.rungs.banned_again(host)
                break
            rung = higher
        if error is not None:
            raise error
        return response

    async def _fetch(self, request: Request, name: str, call_next: Fetch) -> tuple[Response, HttpError | None]:
        """The page fetched with ``name`` (a status the crawl fails on comes as its ``HttpError`` too)."""
        self.cpu.started(name)
        try:
            response = await call_next(request.replace(meta={**request.meta, "fetcher": name, "rung": name}))
            error = None
        except HttpError as exc:
            response, error = exc.response, exc
        finally:
            self.cpu.finished(name)
        self._count(name, "pages")
        return response, error

    def _ban(self, response: Response) -> str | None:
        """Why ``response`` looks like a ban, or ``None``."""
        if response.status in self.ban_statuses and self.ban_pattern.search(response.body, 0, _SCAN):
            return f"http {response.status} with a challenge"
        check = self.is_banned or (self._crawl.spider.is_banned if self._crawl is not None else None)
        if check is not None and check(response):
            return "is_banned"
        return None

    async def retry_empty(self, request: Request, response: Response) -> Request | None:
        """A page expected to yield items yielded none: fetch it again one rung up (its host follows
        when most of its pages come empty); ``None`` if it was not fetched through the ladder or was
        fetched on the top rung already."""
        meta = response.request._meta
        used = meta.get("rung") if meta else None
        if used not in self.names:
            return None
        rung = self.names.index(str(used))
        self._count(str(used), "empty")
        if rung + 1 >= len(self.names):
            return None
        await self._report(self.rungs.empty(url_host(request.url), rung))
        # the page alone goes one rung up; the fetcher this fetch was pinned to goes
        again = {key: value for key, value in request.meta.items() if key not in _PINS}
        return request.replace(dont_filter=True, meta=again | {"rung": self.names[rung + 1]})

    async def _report(self, change: Change | None) -> None:
        if change is not None and self._crawl is not None:
            self._announce(change)
            await self._crawl.publish(FetcherChanged(**vars(change)))

    def _announce(self, change: Change) -> None:
        logger.info("%s now fetched with %s, was %s (%s)", change.host, change.fetcher, change.previous, change.reason)
        if self._crawl is not None:
            self._crawl.stats.counters["fetcher changes"] += 1

    def _count(self, name: str, what: str) -> None:
        if self._crawl is not None:
            self._crawl.stats.counters[f"fetcher {name} {what}"] += 1

    async def _sample(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            # the browser's processes are read from /proc off the event loop; shared out on it
            children = await asyncio.to_thread(descendants_cpu) if self.cpu.watching_children else None
            self.cpu.sample(children)

    # -- Resumable: the hosts' rungs are saved with --state ---------------------------

    def checkpoint(self) -> dict[str, Any]:
        return {"hosts": self.rungs.dump()}

    def restore(self, saved: dict[str, Any]) -> None:
        self._saved = saved

    async def flush(self) -> None:
        """Nothing to write ahead."""
