"""The saved-state side of a crawl: open or resume its state, checkpoint at a barrier, save at the end.

Mixed into :class:`eclaw.crawl.Crawl`; see :mod:`eclaw.state` for what is saved.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from eclaw.core.bus import EventBus
from eclaw.core.pipeline import ItemPipeline, PipelineRunner
from eclaw.core.state import CrawlState, Saved, restore_outputs, save_outputs
from eclaw.frontier.scheduler import Scheduler
from eclaw.spider import Spider
from eclaw.stats import Stats

__all__ = ["Checkpointing"]

logger = logging.getLogger("eclaw.engine")


class Checkpointing:
    """Parses and errbacks call :meth:`_gate` first while a checkpoint holds them."""

    spider: Spider
    stats: Stats
    scheduler: Scheduler
    pipelines: list[ItemPipeline]
    outputs: dict[str, ItemPipeline]
    bus: EventBus
    _state: CrawlState | None
    _logs: dict[str, Any]
    _hold: asyncio.Event | None
    _gated: int
    _busy: int
    _items: PipelineRunner
    _wakeup: asyncio.Event
    _start_exhausted: bool
    _ran: bool
    _enqueue: Callable[..., Awaitable[None]]
    _check_idle: Callable[[], None]

    def _resumables(self) -> dict[str, Any]:
        """Pipelines and outputs (by name) and the files of record: what a checkpoint may save."""
        named = {f"pipeline {index}: {pipeline!r}": pipeline for index, pipeline in enumerate(self.pipelines)}
        return named | {f"output {name}": output for name, output in self.outputs.items()} | self._logs

    async def _open_state(self) -> Saved:
        assert self._state is not None
        saved = await self._state.open(self._wakeup.set)
        self.stats.restore(saved.stats)
        if saved.status == "finished":
            await self._state.close()
            self.stats.finish_reason = "already finished"
            self.stats.finished_at = time.time()
            logger.info("crawl %r in %s had already finished: nothing to do", self.spider.name, self._state.directory)
        else:
            restore_outputs(self._resumables(), saved.outputs)
        return saved

    async def _resume(self, saved: Saved) -> None:
        assert self._state is not None
        load = getattr(getattr(self.scheduler, "dupefilter", None), "load", None)
        if load is not None:
            self._state.load_dupefilter(load)
        logger.info(
            "resuming crawl %r from %s (%s): %d requests to fetch",
            self.spider.name,
            self._state.directory,
            saved.status,
            saved.pending,
        )
        async for batch in self._state.pending_requests():
            for request in batch:
                request.dont_filter = True  # checked and counted before the pause
            await self._enqueue(batch, retry=True)

    async def _gate(self) -> None:
        """Wait while a checkpoint is taken (callbacks would add items to the outputs)."""
        self._gated += 1
        self._check_idle()
        try:
            while self._hold is not None:
                await self._hold.wait()
        finally:
            self._gated -= 1

    async def _checkpoint(self, status: str) -> None:
        """Save the crawl at a barrier: no callback running, every parsed item through the pipelines."""
        state = self._state
        assert state is not None
        await state.saved()
        hold = self._hold = asyncio.Event()
        try:
            while True:
                await self.bus.drain()
                if self._busy == self._gated and not self._items:
                    for pipeline in self._resumables().values():
                        flush = getattr(pipeline, "flush", None)
                        if flush is not None:
                            await flush()
                    if not self.bus and not self._items:
                        break
                    continue
                self._wakeup.clear()
                await self._wakeup.wait()
            dump = getattr(getattr(self.scheduler, "dupefilter", None), "dump", None)
            snapshot = state.snapshot(
                status=status,
                stats=self.stats.as_dict(),
                start_done=self._start_exhausted,
                outputs=save_outputs(self._resumables()),
                dupefilter=dump,
            )
        finally:
            self._hold = None
            hold.set()
        await state.save(snapshot)

    async def _close_state(self) -> None:
        """The last checkpoint (if the loop came to its end: a consistent point), then release the directory."""
        assert self._state is not None
        try:
            if self._ran:
                reason = self.stats.finish_reason
                finished = reason == "finished" or reason.startswith("closespider")
                await self._checkpoint("finished" if finished else "paused")
                await self._state.saved()
                if not finished:
                    logger.warning(
                        "crawl %r paused (%s): state saved in %s; run it again to resume",
                        self.spider.name,
                        reason,
                        self._state.directory,
                    )
        except Exception as exc:  # the previous checkpoint stands: a resume goes on from there
            logger.error("could not save the crawl state in %s: %s", self._state.directory, exc)
        finally:
            await self._state.close()
