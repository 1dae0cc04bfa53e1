"""What a crawl is doing right now, for its loop (is there work left?) and its checkpoint barrier.

Downloads are tasks of their own; a callback (or errback) runs inside the task of
the download it parses. While a checkpoint is being taken, callbacks wait at the
gate before they start, and the barrier waits for those already running to end
and for every item they yielded to be through the pipelines.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Sized
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["Activity"]


class Activity:
    """Tasks, downloads in flight, callbacks running; wakes the crawl's loop when that may matter."""

    def __init__(self, items: Sized, retrying: Sized, most: int = 0) -> None:
        self.wakeup = asyncio.Event()
        self.downloads = 0  # download tasks: downloading, or running the callback of what they fetched
        self.most = most  # download tasks at most (0: no limit), so slow callbacks hold back the downloads
        self.callbacks = 0  # callbacks, errbacks and completions running (or waiting at the gate)
        self.admitted = 0  # requests admitted to the frontier so far: the loop sees new work by it
        self.requeuing = 0  # retries whose delay is over, on their way back to the frontier
        self._gated = 0
        self._hold: asyncio.Event | None = None
        self._items = items
        self._retrying = retrying
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def wake(self) -> None:
        self.wakeup.set()

    def quiet(self, *, stopping: bool) -> bool:
        """Nothing downloading, no callback running, no item in the pipelines (nor a retry waiting, unless stopping)."""
        if self.downloads or self.callbacks or self._items or self.requeuing:
            return False
        return stopping or not self._retrying

    def room(self) -> bool:
        """Another download may start: fewer download tasks than :attr:`most`."""
        return not self.most or self.downloads < self.most

    def download_ended(self) -> None:
        self.downloads -= 1
        if self.downloads == self.most - 1:
            self.wakeup.set()  # room again: the loop starts the next download
        self.check()

    def check(self) -> None:
        """Wake the loop if work may have run out, or a checkpoint waiting at the barrier may go on."""
        idle = not (self.downloads or self.callbacks or self._items or self._retrying or self.requeuing)
        if idle or (self._hold is not None and self.settled()):
            self.wakeup.set()

    @asynccontextmanager
    async def callback(self, *, gated: bool = True) -> AsyncIterator[None]:
        """Around a callback, an errback or anything that may yield items: held at the gate during a checkpoint
        (unless not ``gated``: one that only completes an item a pipeline holds, which the checkpoint waits for)."""
        self.callbacks += 1
        try:
            if gated and self._hold is not None:
                await self._gate()
            yield
        finally:
            self.callbacks -= 1
            self.check()

    async def _gate(self) -> None:
        self._gated += 1
        self.check()
        try:
            while self._hold is not None:
                await self._hold.wait()
        finally:
            self._gated -= 1

    @asynccontextmanager
    async def barrier(self) -> AsyncIterator[None]:
        """Hold new callbacks; ``settled()`` says when those running have ended and their items are stored."""
        hold = self._hold = asyncio.Event()
        try:
            yield
        finally:
            self._hold = None
            hold.set()

    def settled(self) -> bool:
        return self.callbacks == self._gated and not self._items
