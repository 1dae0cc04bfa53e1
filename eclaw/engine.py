"""The Engine: event subscriptions, configuration, and running crawls."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from eclaw._deprecated import renamed_arguments
from eclaw.contracts import Middleware
from eclaw.core.bus import Handler
from eclaw.core.callbacks import CallbackParser, Parser
from eclaw.core.components import ComponentFactory
from eclaw.core.crawl import Crawl
from eclaw.events import Event
from eclaw.exceptions import ConfigError
from eclaw.fetchers.base import Fetcher
from eclaw.fetchers.router import Fetchers
from eclaw.frontier.base import Frontier
from eclaw.frontier.default import DefaultFrontier
from eclaw.settings import Settings
from eclaw.spider import Spider, make_spider
from eclaw.stats import Stats

__all__ = ["Engine", "ItemStream"]

logger = logging.getLogger(__name__)

E = TypeVar("E", bound=Event)
SpiderArg = type[Spider] | Spider
EventHandler = Callable[[E], Awaitable[None] | None]


class Engine:
    """Runs crawls and dispatches their events to subscribed handlers.

    Args:
        settings: base settings (defaults if omitted); a spider's
            ``custom_settings`` apply on top, then ``overrides``.
        overrides: settings that win over the spider's (CLI ``-s``).
        middlewares: download middlewares, outermost first; ``None`` means
            :func:`eclaw.middlewares.defaults` for each crawl's settings.
        pipelines: item pipelines (objects or async functions), in order.
        outputs: output files (``.jsonl``, ``.json``, ``.csv``, ``.parquet``,
            ``.sqlite``) or pipelines, run after ``pipelines``; a fresh exporter
            per crawl, its path's placeholders filled from the spider and settings.
        store: a SQLite store path (``{spider}`` filled in) where each crawl records
            a run row with its data-quality profile and warnings (``eclaw runs``
            lists them); ``None`` records nothing.
        frontier: factory of a :class:`~eclaw.frontier.base.Frontier` per crawl.
        fetcher: factory of a :class:`~eclaw.fetchers.base.Fetcher` per crawl.
        parser: the :class:`~eclaw.core.callbacks.Parser`.
        state_dir: where each crawl saves its state to resume after a pause or
            a crash (the ``state_dir`` setting; see :mod:`eclaw.core.state`).
        **renamed: the old names of ``frontier`` and ``fetcher`` (deprecated: docs/architecture.md).

    Use it inside a running event loop::

        async with Engine() as engine:
            stats = await engine.crawl(MySpider)
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        overrides: Mapping[str, Any] | None = None,
        middlewares: Iterable[Middleware] | None = None,
        pipelines: Iterable[Any] = (),
        outputs: Iterable[str | Path] = (),
        store: str | Path | None = None,
        frontier: Callable[[], Frontier] = DefaultFrontier,
        fetcher: Callable[[], Fetcher] = Fetchers,
        parser: Parser | None = None,
        state_dir: str | Path | None = None,
        **renamed: Any,
    ) -> None:
        frontier, fetcher = renamed_arguments("Engine", renamed, frontier=frontier, fetcher=fetcher)
        self.settings = settings if settings is not None else Settings()
        self._overrides = dict(overrides or {})
        if state_dir is not None:
            self._overrides["state_dir"] = str(state_dir)
        self.settings.replace(self._overrides)  # fail now on a bad override
        self._components = ComponentFactory(
            middlewares=None if middlewares is None else list(middlewares),
            pipelines=list(pipelines),
            outputs=list(outputs),
            store=store,
            frontier=frontier,
            fetcher=fetcher,
            parser=parser if parser is not None else CallbackParser(),
        )
        self._components.check(self.settings.replace(self._overrides))
        self._subs: dict[type[Event], list[tuple[int, int, Handler]]] = {}
        self._seq = itertools.count()
        self._frozen = False
        self._crawls: set[Crawl] = set()
        self._streams: set[asyncio.Task[Stats]] = set()

    # -- subscriptions --------------------------------------------------------------

    def subscribe(self, kind: type[E], handler: EventHandler[E], *, priority: int = 0) -> Callable[[], None]:
        """Call ``handler(event)`` for every event of type ``kind`` (or a subclass).

        ``handler`` is an async function (awaited), or a plain one for quick bookkeeping
        (called; it must not block). Handlers run in ``priority`` order (lower first), then
        in order of subscription, before the component that owns the event, in the task
        that published it. A handler that raises is logged and counted
        (``stats.handler_errors``); the crawl goes on. Returns a function that
        unsubscribes. Subscribing after the engine started raises ``RuntimeError``.
        """
        if self._frozen:
            raise RuntimeError("cannot subscribe after the engine started")
        if not (isinstance(kind, type) and issubclass(kind, Event)):
            raise TypeError(f"subscribe() needs an Event class, got {kind!r}")
        if not callable(handler):
            raise TypeError(f"handler {handler!r} is not callable")
        entry = (priority, next(self._seq), handler)
        self._subs.setdefault(kind, []).append(entry)

        def unsubscribe() -> None:
            if self._frozen:
                raise RuntimeError("cannot unsubscribe after the engine started")
            self._subs[kind].remove(entry)

        return unsubscribe

    def on(self, kind: type[E], *, priority: int = 0) -> Callable[[EventHandler[E]], EventHandler[E]]:
        """Decorator form of :meth:`subscribe`: ``@engine.on(ItemParsed)``."""

        def register(handler: EventHandler[E]) -> EventHandler[E]:
            self.subscribe(kind, handler, priority=priority)
            return handler

        return register

    def _handlers_for(self, kind: type[Event]) -> tuple[Handler, ...]:
        entries = [e for base in kind.__mro__ for e in self._subs.get(base, ())]
        return tuple(handler for _, _, handler in sorted(entries, key=lambda e: (e[0], e[1])))

    # -- lifecycle ------------------------------------------------------------------

    async def __aenter__(self) -> Engine:
        self._frozen = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for task in list(self._streams):
            task.cancel()
        if self._streams:
            await asyncio.gather(*self._streams, return_exceptions=True)

    def stop(self, reason: str = "shutdown") -> None:
        """Gracefully stop every running crawl: no new downloads, in-flight ones
        finish (within ``shutdown_timeout``), items are flushed."""
        for crawl in list(self._crawls):
            crawl.stop(reason)

    # -- crawling -------------------------------------------------------------------

    def prepare(self, spider: SpiderArg, **spider_args: Any) -> Crawl:
        """Build (but do not start) a crawl of ``spider``; validates everything first."""
        return self._prepare(spider, spider_args, {})

    def _prepare(self, spider: SpiderArg, spider_args: dict[str, Any], extra: dict[str, Any]) -> Crawl:
        self._frozen = True
        instance = _instantiate(spider, spider_args)
        try:
            settings = self.settings.replace(instance.custom_settings).replace(self._overrides)
        except ConfigError as exc:
            raise ConfigError(f"spider {instance.name!r}: {exc}") from None
        return Crawl(self._components.build(instance, settings, extra), self._handlers_for)

    async def crawl(self, spider: SpiderArg, **spider_args: Any) -> Stats:
        """Run a crawl of ``spider`` to the end and return its :class:`Stats`.

        Keyword arguments are passed to the spider's constructor. Cancelling
        the awaiting task closes the session, pipelines and files cleanly.
        """
        return await self.run_crawl(self.prepare(spider, **spider_args))

    async def run_crawl(self, crawl: Crawl) -> Stats:
        """Run a crawl made by :meth:`prepare`."""
        self._crawls.add(crawl)
        try:
            stats = await crawl.run()
        finally:
            self._crawls.discard(crawl)
        return stats

    def items(self, spider: SpiderArg, *, buffer: int = 100, **spider_args: Any) -> ItemStream:
        """Run a crawl in the background and yield its stored items as they arrive.

        ``buffer`` bounds the items waiting for the consumer: a slow consumer
        slows the crawl instead of growing memory. Leaving the ``async for``
        early stops the crawl.
        """
        return ItemStream(self, spider, buffer, spider_args)


def _instantiate(spider: SpiderArg, args: dict[str, Any]) -> Spider:
    if isinstance(spider, type) and issubclass(spider, Spider):
        return make_spider(spider, args)
    if isinstance(spider, Spider):
        if args:
            raise TypeError("spider arguments need a Spider class, not an instance")
        return spider
    raise ConfigError(f"not a Spider subclass: {spider!r}")


class ItemStream:
    """``async for item in engine.items(MySpider)``; ``stats`` once finished."""

    def __init__(self, engine: Engine, spider: SpiderArg, buffer: int, spider_args: dict[str, Any]) -> None:
        self._engine = engine
        self._queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=max(1, buffer))
        self._crawl = engine._prepare(spider, spider_args, {"stream": _QueueSink(self._queue)})
        self.stats: Stats | None = None

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        done = object()
        task = asyncio.create_task(self._engine.run_crawl(self._crawl))
        self._engine._streams.add(task)
        task.add_done_callback(lambda _: self._queue.put_nowait(done) if not self._queue.full() else None)
        try:
            while True:
                if task.done() and self._queue.empty():
                    break
                item = await self._queue.get()
                if item is done:
                    if self._queue.empty():
                        break
                    continue
                yield item
            self.stats = await task
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            self._engine._streams.discard(task)


class _QueueSink:
    def __init__(self, queue: asyncio.Queue[Any]) -> None:
        self._queue = queue

    def __repr__(self) -> str:
        return "ItemStream"

    async def process_item(self, item: Any, spider: Spider) -> Any:
        await self._queue.put(item)
        return item
