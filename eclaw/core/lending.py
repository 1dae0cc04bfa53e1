"""The crawl's side of ``--processes``: where one process of a crawl on several meets the others.

A process's frontier is :class:`~eclaw.frontier.base.Fed` (``eclaw/frontier/partition.py``): the links
the other processes found for its part come in, requests are lent to an idle process and taken back.
:class:`Lending` is the one object of the core that knows it: it gives the frontier the crawl's ways in
and out (:class:`~eclaw.frontier.base.Feed`), tells it when a checkpoint is on disk, and waits with it
when the crawl has nothing left to do. A crawl on one process has none, and nothing of this runs.
(A redirect that lands on another process's page is handed over by the fetch runner, which asks the
frontier's ``elsewhere``.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from eclaw.core.accounting import Intake, Journal
from eclaw.core.activity import Activity
from eclaw.frontier.base import Fed, Feed, TakesBack
from eclaw.http import Request
from eclaw.stats import Stats

if TYPE_CHECKING:
    from eclaw.core.state import CrawlState

__all__ = ["Lending"]


class Lending:
    """One process's lending and borrowing of requests, for the crawl that owns ``frontier``.

    Args:
        frontier: the process's part of the crawl (it takes back what it lent, :class:`TakesBack`).
        intake: where the links another process found for this part are admitted, as this crawl's own.
        journal: what the crawl saves of each request (``--state``), or just its ids.
        state: the crawl's saved state, if ``--state``: a lent request may be read by its borrower once a
            checkpoint on disk holds it as lent.
        stopping: whether the crawl is stopping (nothing is lent or borrowed then).
        pump: starts what downloads it can (after requests were taken back).
    """

    def __init__(
        self,
        frontier: Fed,
        *,
        intake: Intake,
        journal: Journal,
        activity: Activity,
        stats: Stats,
        state: CrawlState | None,
        stopping: Callable[[], bool],
        pump: Callable[[], Awaitable[None]],
    ) -> None:
        assert isinstance(frontier, TakesBack), f"{frontier!r} lends requests, so it must take them back"
        self._frontier, self._takes_back = frontier, frontier
        self._intake, self._journal, self._activity, self._stats = intake, journal, activity, stats
        self._pump = pump
        feed = Feed(
            admit=self._admit, adopt=self._adopt, lent=self._lent, movable=self._movable,
            save_soon=state.soon if state is not None else _nothing, stopping=stopping, keeps_state=state is not None,
        )  # fmt: skip
        frontier.feed(feed)

    async def _admit(self, requests: list[Request]) -> None:
        """Links another process found for this part: filtered, counted and saved as this crawl's own
        (with ids of this process's own)."""
        self._journal.assign(requests)
        await self._intake.admit(requests, again=False)

    async def _adopt(self, requests: list[Request]) -> None:
        """Requests another process lent this one: checked and counted there, so queued as they are, and
        saved from now on as this crawl's own."""
        self._journal.assign(requests)
        self._journal.admitted(requests, [None] * len(requests), again=False)
        self._takes_back.take_back(requests)
        self._activity.admitted += len(requests)
        await self._pump()

    def _lent(self, requests: list[Request]) -> None:
        """Requests this process lent another: that one fetches them (and saves them)."""
        self._stats.counters["requests lent to another process"] += len(requests)
        for request in requests:
            self._journal.done(request)

    def _movable(self, request: Request) -> bool:
        """Whether a queued request may be lent: none of it lives only here (a resumed request that had
        made its redirect's page seen before the crawl stopped is this process's to parse)."""
        return self._journal.marked_by(request) is None

    def checkpointed(self) -> None:
        """The checkpoint last taken is on disk: what it holds as lent may be read by the borrowers."""
        self._frontier.checkpointed()

    async def idle(self) -> None:
        """Nothing left to do here: until the other processes send work, or the crawl as a whole is over."""
        await self._frontier.idle()


def _nothing() -> None:
    return None
