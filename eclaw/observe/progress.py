"""Live progress of a CLI crawl: a rich panel on a terminal, a log line every few seconds otherwise."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import deque
from collections.abc import Callable

from eclaw.events import SpiderClosed, SpiderOpened
from eclaw.stats import Stats

__all__ = ["Progress", "progress_line"]

logger = logging.getLogger(__name__)


class Rate:
    """Pages per second over the last ``window`` seconds."""

    def __init__(self, window: float = 10.0) -> None:
        self.window = window
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, done: int) -> float:
        now = time.monotonic()
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[0][0] > self.window:
            self._samples.popleft()
        (t0, d0), (t1, d1) = self._samples[0], self._samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 else 0.0


def _errors(stats: Stats) -> str:
    kinds = stats.failed_by_reason.most_common(3)
    return ", ".join(f"{reason} {n}" for reason, n in kinds) or "none"


def progress_line(stats: Stats, queued: int, in_flight: int, rate: float) -> str:
    """The one-line form: what the plain log shows every few seconds."""
    eta = f", queue ETA {queued / rate:.0f}s" if rate > 0 and queued else ""
    return (
        f"{stats.requests_parsed} pages ({rate:.0f}/s), {stats.requests_failed} failed, "
        f"{stats.requests_dropped} dropped, {stats.items_stored} items, {queued} queued, {in_flight} in flight, "
        f"elapsed {stats.elapsed:.0f}s{eta}; errors: {_errors(stats)}"
    )


class Progress:
    """Shows a crawl's progress from its start (``SpiderOpened``) to its end (``SpiderClosed``): subscribe
    :meth:`opened` and :meth:`closed`. On a TTY a rich live table (refreshed twice a second); otherwise one
    log line every ``every`` seconds."""

    def __init__(self, *, every: float = 5.0) -> None:
        self.every = every
        self.rate = Rate()
        self._task: asyncio.Task[None] | None = None

    async def opened(self, event: SpiderOpened) -> None:
        crawl = event.crawl
        assert crawl is not None
        self.stop()
        self._task = asyncio.create_task(self.run(lambda: (crawl.stats, crawl.queued, crawl.in_flight)))

    async def closed(self, event: SpiderClosed) -> None:
        self.stop()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def run(self, sample: Callable[[], tuple[Stats, int, int]]) -> None:
        self.sample = sample
        if sys.stdout.isatty():
            await self._live()
        else:
            while True:
                await asyncio.sleep(self.every)
                stats, queued, in_flight = self.sample()
                logger.info(
                    "progress: %s", progress_line(stats, queued, in_flight, self.rate.add(stats.requests_parsed))
                )

    async def _live(self) -> None:
        from rich.live import Live
        from rich.table import Table

        def render() -> Table:
            stats, queued, in_flight = self.sample()
            rate = self.rate.add(stats.requests_parsed)
            table = Table(title=f"eclaw: {stats.spider}", show_header=False, min_width=50)
            rows = [
                ("pages", f"{stats.requests_parsed}  ({rate:.0f}/s)"),
                ("failed / dropped", f"{stats.requests_failed} / {stats.requests_dropped}"),
                ("items", str(stats.items_stored)),
                ("queued / in flight", f"{queued} / {in_flight}"),
                ("errors", _errors(stats)),
                ("elapsed", f"{stats.elapsed:.0f}s" + (f", queue ETA {queued / rate:.0f}s" if rate and queued else "")),
            ]
            for name, value in rows:
                table.add_row(name, value)
            return table

        with Live(render(), refresh_per_second=2, transient=True) as live:
            while True:
                await asyncio.sleep(0.5)
                live.update(render())
