"""Writing a shared crawl's items (each once, from Redis) to the outputs of ``-o``, as one process would."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from eclaw.cluster.frontier import connect
from eclaw.contracts import Closes, Opens
from eclaw.core.parts import output_options
from eclaw.core.pipeline import PipelineRunner
from eclaw.core.records import Records
from eclaw.events import Event, ItemParsed
from eclaw.settings import Settings
from eclaw.spider import Spider
from eclaw.stats import Stats
from eclaw.storage.outputs import output_for
from eclaw.storage.paths import resolve_path

__all__ = ["export_items_to"]


class _Export:
    """What an output sees of the crawl while the items are exported (a :class:`CrawlContext`)."""

    def __init__(self, spider: Spider, settings: Settings, stats: Stats, dead_letter: Callable[..., None]) -> None:
        self.spider, self.settings, self.stats = spider, settings, stats
        self.run_id, self.queued, self.in_flight, self.cookies, self.snapshots = "export", 0, 0, None, None
        self._dead_letter = dead_letter

    def set_delay(self, host: str | None, seconds: float, *, floor: bool = False) -> None:
        return None

    def stop(self, reason: str) -> None:
        return None

    def emit(self, event: Any) -> None:
        return None

    async def publish(self, event: Any) -> None:
        return None

    def dead_letter(self, output: object, items: list[Any], error: BaseException) -> None:
        self._dead_letter(repr(output), items, error)


async def _nothing(event: Event) -> None:
    return None


async def export_items_to(outputs: list[str], url: str, spider: Spider, settings: Settings, stats: Stats) -> None:
    """Every item of the crawl in Redis to every output, each on its own (what each wrote, what was
    dead-lettered, added to ``stats``). The outputs are written afresh: an export run again gives the same files."""
    written = Stats(spider=spider.name)
    await _export(outputs, url, spider, settings, written)
    stats.items_written.update(written.items_written)
    stats.items_dead_lettered.update(written.items_dead_lettered)
    stats.items_lost += written.items_lost


async def _export(outputs: list[str], url: str, spider: Spider, settings: Settings, stats: Stats) -> None:
    options = output_options(settings)
    named = {
        str(resolve_path(o, spider.name, settings.run_key)): output_for(o, spider.name, **options) for o in outputs
    }
    records = Records(settings, spider.name, "export")
    runner = PipelineRunner([], named, spider, records.dead_letter, stats, _nothing, lambda: None)
    context = _Export(spider, settings, stats, runner.dead_letter)
    for output in named.values():
        if isinstance(output, Opens):
            await output.open(context)
    client = await connect(url)
    try:
        async for _, text in client.hscan_iter(f"eclaw:{spider.name}:items"):
            runner.submit(ItemParsed(item=json.loads(text)))
            if len(runner) >= 500:
                await runner.drain()
        await runner.drain()
    finally:
        await client.aclose()
        await _close(named.values())
        records.close()


async def _close(outputs: Any) -> None:
    for output in outputs:
        if isinstance(output, Closes):
            await output.close()
