"""The :class:`MonitorWatcher`: counts what monitors need from the crawl's events, checks the early
monitors every ``interval`` seconds and all of them when the spider closes, then writes the results
(JSON), counts the failures in the stats and sends one alert per failure."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eclaw.alerts import Alert, Alerter
from eclaw.events import ItemStored, SpiderClosed, SpiderOpened
from eclaw.exceptions import ConfigError
from eclaw.items import item_to_dict
from eclaw.monitors.checks import Monitor, Result, RunView
from eclaw.storage.paths import resolve_path
from eclaw.storage.store import list_runs

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext
    from eclaw.engine import Engine
    from eclaw.settings import Settings

__all__ = ["MONITORS_FAILED_EXIT", "MonitorWatcher", "previous_run"]

logger = logging.getLogger(__name__)

MONITORS_FAILED_EXIT = 3  # eclaw crawl's exit code when the crawl ran but a monitor failed
_MAX_FIELDS = 1000  # field names counted per run (an item's keys come from the site)


class MonitorWatcher:
    """Checks ``monitors`` on the crawls of the engine it is attached to.

    Args:
        monitors: the checks.
        alerter: where failures go (``None``: logged only).
        results: the JSON file of the results (``{spider}``/``{run_key}`` filled in); empty: none. The
            crawl's ``monitors_results`` setting, when set, is used instead.
        interval: seconds between the checks of the early monitors during the run.
    """

    def __init__(
        self, monitors: Sequence[Monitor], *, alerter: Alerter | None = None, results: str = "", interval: float = 5.0
    ) -> None:
        self.monitors = list(monitors)
        self.alerter = alerter
        self.results_path = results
        self.interval = interval
        self.results: list[Result] = []
        self.view: RunView | None = None
        self._alerted: set[str] = set()
        self._ticker: asyncio.Task[None] | None = None
        self._crawl: CrawlContext | None = None

    def __repr__(self) -> str:
        return f"MonitorWatcher({[m.name for m in self.monitors]})"

    @property
    def failed(self) -> list[Result]:
        """The failed results of the last check."""
        return [r for r in self.results if not r.ok]

    def attach(self, engine: Engine) -> None:
        """Subscribe to the engine's events (before it runs)."""
        engine.subscribe(SpiderOpened, self._opened)
        engine.subscribe(ItemStored, self._stored)
        engine.subscribe(SpiderClosed, self._closed)

    async def _opened(self, event: SpiderOpened) -> None:
        crawl = event.crawl
        if crawl is None:
            return
        self._crawl, self.results, self._alerted = crawl, [], set()
        try:
            previous = await asyncio.to_thread(previous_run, crawl.settings, crawl.spider.name)
        except ConfigError as exc:  # the store is not one: the comparison has nothing to compare with
            logger.warning("monitors: no previous run to compare with: %s", exc)
            previous = None
        self.view = RunView(stats=crawl.stats, previous=previous)
        if any(m.early for m in self.monitors):
            self._ticker = asyncio.get_running_loop().create_task(self._tick(), name="eclaw-monitors")

    def _stored(self, event: ItemStored) -> None:
        view = self.view
        if view is None:
            return
        view.items += 1
        try:
            record = item_to_dict(event.item)
        except (TypeError, ValueError):
            return
        for key, value in record.items():
            if value not in (None, "", [], {}) and (key in view.fields or len(view.fields) < _MAX_FIELDS):
                view.fields[key] += 1

    async def _tick(self) -> None:
        """Check the early monitors until the crawl ends (a cancelled crawl has no SpiderClosed)."""
        while self.view is not None and self.view.stats.finished_at is None:
            self._evaluate(self.view, early=True)
            await asyncio.sleep(self.interval)

    async def _closed(self, event: SpiderClosed) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        view = self.view
        if view is None:
            return
        view.final = True
        self._evaluate(view, early=False)
        view.stats.counters["monitors failed"] = len(self.failed)
        view.stats.counters["monitors passed"] = len(self.results) - len(self.failed)
        self._write(view)
        if self.alerter is not None:
            await self.alerter.close()

    def _evaluate(self, view: RunView, *, early: bool) -> None:
        """Check the monitors (only the early ones during the run); alert each new failure once."""
        results = [r for m in self.monitors if (m.early or not early) for r in [m.check(view)] if r is not None]
        if not early:
            self.results = results
        for result in results:
            if not result.ok and result.name not in self._alerted:
                self._alerted.add(result.name)
                self._alert(result, view)

    def _alert(self, result: Result, view: RunView) -> None:
        crawl = self._crawl
        spider = crawl.spider.name if crawl else view.stats.spider
        redact = crawl.redactor.text if crawl else str
        logger.warning("monitor %s failed: %s", result.name, redact(result.message))
        if self.alerter is None:
            return
        run = crawl.run_id if crawl else ""
        fields = {"spider": spider, "monitor": result.name, "value": str(result.value), "run": run}
        title = f"eclaw: monitor {result.name} failed for {spider}" + ("" if view.final else " (during the run)")
        self.alerter.notify(Alert("monitor_failed", redact(title), redact(result.message), fields))

    def _write(self, view: RunView) -> None:
        """Write the results file: the ``monitors_results`` setting's (each job of ``eclaw serve`` its
        own), else ``results``; whole or not at all (a reader never sees half of it)."""
        crawl = self._crawl
        template = crawl.settings.monitors_results or self.results_path if crawl is not None else ""
        if not template or crawl is None:
            return
        path = resolve_path(template, crawl.spider.name, crawl.settings.run_key)
        record = {
            "spider": crawl.spider.name,
            "run_id": crawl.run_id,
            "run_key": crawl.settings.run_key,
            "finish_reason": view.stats.finish_reason,
            "checked_at": time.time(),
            "ok": not self.failed,
            "results": [r.record() for r in self.results],
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f".{path.name}.{os.getpid()}.part")
        part.write_text(crawl.redactor.text(json.dumps(record, indent=1)) + "\n", encoding="utf-8")
        part.replace(path)


def previous_run(settings: Settings, spider: str) -> dict[str, Any] | None:
    """The stats of the last finished run of ``spider`` with the same run key, from the store's run log."""
    if not settings.store:
        return None
    path = resolve_path(settings.store, spider, settings.run_key)
    if not Path(path).is_file():
        return None
    for run in list_runs(path):  # newest first
        if run["spider"] == spider and run["run_key"] == settings.run_key and run["finish_reason"] == "finished":
            stats: dict[str, Any] = run["stats"]
            return stats
    return None
