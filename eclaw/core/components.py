"""What one crawl is made of, assembled from the engine's configuration, the spider and the crawl's
settings: the frontier, the fetcher, middlewares, pipelines, outputs, the saved state, watchers."""

from __future__ import annotations

import copy
import datetime as dt
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eclaw.cluster.frontier import RedisFrontier
from eclaw.contracts import ItemPipeline, Middleware, Resumable, Shared, Watcher
from eclaw.core.budgets import Budgets
from eclaw.core.callbacks import Parser
from eclaw.core.pipeline import as_pipeline
from eclaw.core.state import CrawlState
from eclaw.exceptions import ConfigError
from eclaw.fetchers.base import Fetcher
from eclaw.frontier.base import Frontier
from eclaw.frontier.default import DefaultFrontier
from eclaw.middlewares import Defaults, defaults
from eclaw.observe.metrics import Metrics
from eclaw.observe.quality import RunRecorder
from eclaw.observe.trace import Tracer
from eclaw.outputs.build import output_for, output_name
from eclaw.sessions.jars import CookieJars
from eclaw.settings import Settings
from eclaw.spider import Spider
from eclaw.storage.paths import resolve_path
from eclaw.storage.store import RunLog, last_finished_start

__all__ = ["ComponentFactory", "CrawlComponents", "per_crawl"]


@dataclass
class CrawlComponents:
    """One crawl's components; ``outputs`` by name (a path's, or the object's ``repr``)."""

    spider: Spider
    settings: Settings
    frontier: Frontier
    fetcher: Fetcher
    parser: Parser
    middlewares: list[Middleware]
    pipelines: list[ItemPipeline]
    outputs: dict[str, ItemPipeline]
    state: CrawlState | None = None
    watchers: list[Watcher] = field(default_factory=list)
    cookies: CookieJars | None = None

    def resumables(self, records: Mapping[str, Resumable]) -> dict[str, Resumable]:
        """What a checkpoint saves the position of, by name: resumable pipelines, the outputs, the files of
        record; and what it saves the contents of: the cookie jars, resumable middlewares (the session pool)."""
        named: dict[str, Resumable] = {"cookies": self.cookies} if self.cookies is not None else {}
        if isinstance(self.frontier, Resumable):  # a process of a crawl on several: its files to the others
            named["frontier"] = self.frontier
        for index, middleware in enumerate(self.middlewares):
            if isinstance(middleware, Resumable):  # declared by the middleware
                named[f"middleware {index}: {middleware!r}"] = middleware
        for index, pipeline in enumerate(self.pipelines):
            if isinstance(pipeline, Resumable):  # declared by the pipeline
                named[f"pipeline {index}: {pipeline!r}"] = pipeline
        for name, output in self.outputs.items():
            if isinstance(output, Resumable):
                named[f"output {name}"] = output
        return named | dict(records)


@dataclass
class ComponentFactory:
    """The engine's configuration of its crawls (see :class:`eclaw.Engine` for each field)."""

    middlewares: list[Any] | None
    pipelines: list[Any]
    outputs: list[Any]
    store: str | Path | None
    frontier: Callable[[], Frontier]
    fetcher: Callable[[], Fetcher]
    parser: Parser

    def check(self, settings: Settings) -> None:
        """Fail before any crawl on a middleware that is not callable, a bad output format or one given twice."""
        for middleware in self.middlewares or ():
            if not callable(middleware):
                raise ConfigError(f"middleware {middleware!r} is not callable (expected mw(request, call_next))")
        names = set()
        for output in self._given(settings):
            if isinstance(output, str | Path):
                output_for(output, **output_options(settings))
                if str(output) in names:
                    raise ConfigError(f"output {output} is given twice")
                names.add(str(output))

    def build(self, spider: Spider, settings: Settings, extra: dict[str, ItemPipeline]) -> CrawlComponents:
        self._recrawl_sitemaps(spider, settings)
        frontier = self._frontier(settings)
        shared = frontier.outputs() if isinstance(frontier, Shared) else {}
        outputs = self._outputs(spider, settings) | shared | extra
        pipelines = [*per_crawl(spider.pipelines, "pipeline"), *per_crawl(self.pipelines, "pipeline", copy=False)]
        return CrawlComponents(
            spider=spider,
            settings=settings,
            frontier=frontier,
            fetcher=self.fetcher(),
            parser=self.parser,
            middlewares=[*self._middlewares(settings), *per_crawl(spider.middlewares, "middleware")],
            pipelines=[as_pipeline(p) for p in pipelines],
            outputs=outputs,
            state=_state(spider, settings, frontier, outputs),
            watchers=self._watchers(settings),
            cookies=CookieJars() if settings.cookies else None,
        )

    def _recrawl_sitemaps(self, spider: Spider, settings: Settings) -> None:
        """An incremental recrawl's sitemaps skip what has not moved since the last finished run began."""
        if not (settings.incremental and spider.sitemap_urls and spider.sitemap_since is None and self.store):
            return
        started = last_finished_start(resolve_path(self.store, spider.name, settings.run_key), spider.name)
        if started is not None:
            spider.sitemap_since = dt.datetime.fromtimestamp(started, dt.UTC)

    def _frontier(self, settings: Settings) -> Frontier:
        if settings.frontier_url and self.frontier is DefaultFrontier:
            return RedisFrontier(settings.frontier_url)
        return self.frontier()

    def _outputs(self, spider: Spider, settings: Settings) -> dict[str, ItemPipeline]:
        """A fresh exporter per path (checked writable for this spider), the objects given."""
        options = output_options(settings)
        outputs: dict[str, ItemPipeline] = {}
        for output in self._given(settings):
            if isinstance(output, str | Path):
                outputs[output_name(output, spider.name, settings.run_key)] = output_for(output, spider.name, **options)
            else:
                outputs[repr(output)] = as_pipeline(output)
        return outputs

    def _given(self, settings: Settings) -> list[Any]:
        """The engine's outputs, else the ``outputs`` setting's specs."""
        return self.outputs or settings.outputs.split()

    def _middlewares(self, settings: Settings) -> list[Middleware]:
        """``defaults()`` in the list (or no list) stands for the defaults of this crawl's settings."""
        given = self.middlewares if self.middlewares is not None else [Defaults()]
        chain: list[Middleware] = []
        for middleware in given:
            if not isinstance(middleware, Defaults):
                chain += per_crawl([middleware], "middleware", copy=False)
                continue
            try:
                chain += defaults(settings)  # fresh per crawl: proxy health, robots rules...
            except (ConfigError, OSError, ValueError) as exc:
                raise ConfigError(f"middleware settings: {exc}") from None
        return chain

    def _watchers(self, settings: Settings) -> list[Watcher]:
        watchers: list[Watcher] = []
        if settings.trace:
            watchers.append(Tracer(settings.trace))
        if settings.metrics_port:
            watchers.append(Metrics(settings.metrics_port))
        if self.store:
            watchers.append(RunRecorder(RunLog(self.store)))
        if Budgets.wanted(settings):
            watchers.append(Budgets(settings))
        return watchers


def output_options(settings: Settings) -> dict[str, Any]:
    return {
        "run_key": settings.run_key,
        "batch_items": settings.output_batch_items,
        "batch_bytes": settings.output_batch_bytes,
        "partition_by": tuple(f.strip() for f in settings.output_partition_by.split(",") if f.strip()),
    }


def _state(
    spider: Spider, settings: Settings, frontier: Frontier, outputs: dict[str, ItemPipeline]
) -> CrawlState | None:
    if not settings.state_dir:
        return None
    if isinstance(frontier, Shared):
        raise ConfigError(f"state_dir does not apply to {frontier!r}: a shared frontier keeps the crawl's state")
    for output in outputs.values():
        if not isinstance(output, Resumable):
            raise ConfigError(
                f"{output!r} cannot be resumed; with --state write .jsonl, .json, .csv (compressed or not)"
                " or .sqlite (and convert once the crawl is done)"
            )
    return CrawlState(
        resolve_path(settings.state_dir, spider.name, settings.run_key),
        spider,
        interval=settings.checkpoint_interval,
        max_new=settings.checkpoint_requests,
    )


def per_crawl(objects: Iterable[Any], kind: str, *, copy: bool = True) -> list[Any]:
    """Each crawl's own middlewares or pipelines: a class is instantiated; an object is deep-copied
    when ``copy`` (a spider's lists are class attributes, shared by every crawl of the spider)."""
    own = []
    for obj in objects:
        if isinstance(obj, type):
            own.append(obj())
        elif not copy or inspect.isfunction(obj) or inspect.ismethod(obj):
            own.append(obj)
        else:
            own.append(_copied(obj, kind))
    return own


def _copied(obj: Any, kind: str) -> Any:
    try:
        return copy.deepcopy(obj)
    except Exception as exc:
        raise ConfigError(
            f"{kind} {obj!r} cannot be copied for each crawl ({type(exc).__name__}: {exc}):"
            " list its class instead (one instance per crawl)"
        ) from None
