"""The owner of ``ItemParsed``: items through the pipelines (a chain), then to every output (each on its own).

Items go through the pipelines one at a time, in order. A pipeline that waits for something per item
(the files pipeline: its downloads) may start it early: one with ``prefetch(item)``
(:class:`Prefetches`) hears of each item as it is submitted, so the waits of the items queued
behind the current one overlap.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from eclaw.contracts import ItemPipeline
from eclaw.core.records import DeadLetter
from eclaw.events import Event, ItemDropped, ItemParsed, ItemStored
from eclaw.exceptions import DropItem
from eclaw.items import validate

if TYPE_CHECKING:
    from eclaw.spider import Spider
    from eclaw.stats import Stats

__all__ = ["FunctionPipeline", "PipelineRunner", "Prefetches", "as_pipeline"]

logger = logging.getLogger(__name__)


@runtime_checkable
class Prefetches(Protocol):
    """A pipeline that starts its work on an item when the item is submitted, before its turn."""

    def prefetch(self, item: Any) -> None:
        """``item`` was submitted (it may still be dropped before this pipeline): start what it needs."""


class FunctionPipeline:
    """Adapts ``async def fn(item, spider) -> item`` to an :class:`~eclaw.contracts.ItemPipeline`."""

    def __init__(self, fn: Callable[[Any, Spider], Awaitable[Any]]) -> None:
        self.fn = fn

    def __repr__(self) -> str:
        return f"FunctionPipeline({getattr(self.fn, '__qualname__', self.fn)!r})"

    async def process_item(self, item: Any, spider: Spider) -> Any:
        return await self.fn(item, spider)


def as_pipeline(obj: Any) -> ItemPipeline:
    """``obj`` as a pipeline: an :class:`~eclaw.contracts.ItemPipeline`, or an async function."""
    if isinstance(obj, ItemPipeline):
        return obj
    if callable(obj):
        return FunctionPipeline(obj)
    raise TypeError(
        f"{obj!r} is not a pipeline: give an object with async process_item(item, spider) "
        "or an async function (item, spider) -> item"
    )


class PipelineRunner:
    """Passes parsed items through the pipelines in order, then to every output.

    A callback that yields items without awaiting (a plain generator) passes
    them through itself when it is done (``held``/``drain``: no task switch per
    item); any other item wakes the runner's own task (``run``), so a slow
    pipeline never blocks event dispatch.

    Pipelines are a chain (each may change or drop the item); outputs are
    independent: each receives every item the pipelines passed, and one output
    failing dead-letters the item for that output only. An item ends as
    ``ItemStored`` when at least one output wrote it (or there are none), else as
    ``ItemDropped`` (``DropItem``, invalid, a pipeline error, every output failed);
    whatever failed is in the dead-letter file.
    """

    def __init__(
        self,
        pipelines: list[ItemPipeline],
        outputs: dict[str, ItemPipeline],
        spider: Spider,
        dead_letter: DeadLetter,
        stats: Stats,
        publish: Callable[[Event], Awaitable[None]],
        done: Callable[[], None],
    ) -> None:
        self.pipelines = pipelines
        self._prefetchers = [p for p in pipelines if isinstance(p, Prefetches)]
        self.outputs = outputs
        self._spider = spider
        self._dead_letter = dead_letter
        self._stats = stats
        self._publish = publish
        self._done = done
        self._queue: deque[ItemParsed] = deque()
        self._ready = asyncio.Event()
        self._draining = False  # a task is passing the queue through the pipelines
        self.held = 0  # callbacks running that will drain what they submit
        self.submitted = 0  # items handed in so far
        self.finished = 0  # ... and through the pipelines (they go in order)

    def submit(self, event: ItemParsed) -> None:
        """The owner of ``ItemParsed``: counted, queued for the pipelines."""
        self._stats.items_parsed += 1
        for pipeline in self._prefetchers:
            try:
                pipeline.prefetch(event.item)
            except Exception as exc:  # its process_item will meet the problem again, in its turn
                logger.warning("prefetch of %r failed: %s: %s", pipeline, type(exc).__name__, exc)
        self._queue.append(event)
        self.submitted += 1
        if not self.held and not self._draining:
            self._ready.set()

    def release(self) -> None:
        """A holding callback is done (after its ``drain``, or failed): the runner takes what is left."""
        self.held -= 1
        if not self.held and self._queue and not self._draining:
            self._ready.set()

    def __len__(self) -> int:
        """Items submitted and not yet finished."""
        return len(self._queue)

    async def run(self) -> None:
        while True:
            while not self._queue or self._draining:
                self._ready.clear()
                await self._ready.wait()
            await self.drain()

    async def drain(self) -> None:
        """Pass every queued item through the pipelines (unless another task already does)."""
        if self._draining:
            return
        self._draining = True
        try:
            while self._queue:
                event = self._queue[0]
                try:
                    try:
                        outcome = await self._process(event)
                    except Exception as exc:  # a bug of ours: count it, never lose an item silently
                        logger.error("item lost in the pipelines (%s: %s): %r", type(exc).__name__, exc, event.item)
                        self._stats.items_lost += 1
                        outcome = ItemDropped(
                            item=event.item, response=event.response, reason="lost: " + type(exc).__name__
                        )
                    await self._publish(outcome)
                finally:
                    self._queue.popleft()
                    self.finished += 1
                    self._done()
        finally:
            self._draining = False
            if self._queue:  # left by a cancelled drain
                self._ready.set()

    async def _process(self, event: ItemParsed) -> Event:
        item, stage = event.item, None
        try:
            problem = validate(item)
        except Exception as exc:  # a validator bug must not lose the item
            problem = f"validation error: {type(exc).__name__}"
        if problem is not None:
            self._dead(item, ValueError(problem), event, "validation", "validation")
            return ItemDropped(item=item, response=event.response, reason=f"invalid: {problem}")
        try:
            for stage in self.pipelines:
                item = await stage.process_item(item, self._spider)
                if item is None:
                    raise DropItem(f"{stage!r} returned None")
        except DropItem as exc:
            return ItemDropped(item=item, response=event.response, reason=exc.reason)
        except Exception as exc:
            self._dead(event.item, exc, event, "pipeline", repr(stage))
            return ItemDropped(item=event.item, response=event.response, reason=f"pipeline error: {type(exc).__name__}")
        return await self._output(item, event)

    async def _output(self, item: Any, event: ItemParsed) -> Event:
        """Hand ``item`` to every output, each on its own."""
        written, error = not self.outputs, None
        for name, output in self.outputs.items():
            try:
                await output.process_item(item, self._spider)
            except Exception as exc:
                error = exc
                self._dead(item, exc, event, "output", name)
            else:
                self._stats.items_written[name] += 1
                written = True
        if written:
            return ItemStored(item=item, response=event.response)
        return ItemDropped(item=item, response=event.response, reason=f"output error: {type(error).__name__}")

    def _dead(self, item: Any, error: BaseException, event: ItemParsed, stage: str, name: str) -> None:
        """Dead-letter ``item`` (counted by ``name``); if even that fails, count it lost."""
        url = event.response.url if event.response is not None else None
        try:
            self._dead_letter.record(item, error=error, stage=stage, name=name, url=url)
        except Exception as exc:
            logger.error("item lost: the dead-letter file failed too (%s: %s): %r", type(exc).__name__, exc, item)
            self._stats.items_lost += 1
        else:
            self._stats.items_dead_lettered[name] += 1

    def dead_letter(self, name: str, rows: list[Any], error: BaseException) -> None:
        """An output that buffers (SQLite, Parquet) failed to write ``rows`` it had accepted."""
        for row in rows:
            try:
                self._dead_letter.record(row, error=error, stage="output", name=name, url=None)
            except Exception:
                self._stats.items_lost += 1
                self._stats.items_written[name] -= 1
            else:
                self._stats.output_failed(name)
