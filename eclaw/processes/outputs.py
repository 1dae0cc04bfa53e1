"""What a crawl on several processes leaves, where one process would have left it: the items (each
once) in the outputs of ``-o``, the files of record, the stats."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from eclaw.contracts import Closes, Opens
from eclaw.core.components import output_options
from eclaw.core.pipeline import PipelineRunner
from eclaw.core.records import Records
from eclaw.events import Event, ItemParsed
from eclaw.frontier.mesh import unread
from eclaw.outputs.build import output_for, output_name
from eclaw.outputs.spec import parse_spec
from eclaw.processes.part import Job
from eclaw.security.redact import Redactor
from eclaw.settings import Settings
from eclaw.spider import Spider, make_spider
from eclaw.stats import Stats, merge_stats
from eclaw.storage.paths import resolve_path

__all__ = ["RECORDS", "export_items_to", "finish_outputs", "gather_records", "merged_stats"]

RECORDS = ("failures", "drops", "dead_letter")  # the files of record: each process keeps its own


class _Export:
    """What an output sees of the crawl while the items are exported (a :class:`CrawlContext`)."""

    def __init__(self, spider: Spider, settings: Settings, stats: Stats, dead_letter: Callable[..., None]) -> None:
        self.spider, self.settings, self.stats = spider, settings, stats
        self.run_id, self.queued, self.in_flight, self.cookies, self.snapshots = "export", 0, 0, None, None
        self._dead_letter = dead_letter
        self.redactor = Redactor()  # what an output writes passes it

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


async def export_items_to(
    outputs: list[str], items: Iterable[dict[str, Any]], spider: Spider, settings: Settings, stats: Stats
) -> None:
    """``items`` (each once) to every output, each on its own (what each wrote, what was dead-lettered,
    added to ``stats``). The outputs are written afresh: an export run again gives the same files."""
    written = Stats(spider=spider.name)
    await _export(outputs, items, spider, settings, written)
    stats.items_written.update(written.items_written)
    stats.items_dead_lettered.update(written.items_dead_lettered)
    stats.items_lost += written.items_lost


async def _export(
    outputs: list[str], items: Iterable[dict[str, Any]], spider: Spider, settings: Settings, stats: Stats
) -> None:
    options = output_options(settings)
    named = {
        output_name(o, spider.name, settings.run_key): output_for(o, spider.name, **options) for o in outputs
    }
    records = Records(settings, spider.name, "export")
    runner = PipelineRunner([], named, spider, records.dead_letter, stats, _nothing, lambda: None)
    context = _Export(spider, settings, stats, runner.dead_letter)
    for output in named.values():
        if isinstance(output, Opens):
            await output.open(context)
    try:
        for item in items:
            runner.submit(ItemParsed(item=item))
            if len(runner) >= 500:
                await runner.drain()
        await runner.drain()
    finally:
        await _close(named.values())
        records.close()


async def _close(outputs: Any) -> None:
    for output in outputs:
        if isinstance(output, Closes):
            await output.close()


def finish_outputs(
    outputs: list[str], jobs: list[Job], spider_cls: type[Spider], spider_args: dict[str, str], settings: Settings,
    stats: Stats,
) -> None:  # fmt: skip
    """The processes' items to the outputs, their files of record to the crawl's."""
    spider = make_spider(spider_cls, spider_args)
    rest = []
    for output in outputs:
        spec = parse_spec(output)
        path = resolve_path(spec.location, spider.name, settings.run_key)
        plain = not (settings.output_batch_items or settings.output_batch_bytes or spec.rotating)
        if plain and spec.scheme == "file" and spec.format == "jsonl" and not (spec.compression or spec.options):
            output_for(output, spider.name)  # checked writable, as any output is
            stats.items_written[str(path)] += _concatenate([Path(job.items) for job in jobs], path)
        else:
            rest.append(output)
    if rest:
        asyncio.run(export_items_to(rest, _items(jobs), spider, settings, stats))
    gather_records([Path(job.items).parent for job in jobs], settings, spider.name)


def _concatenate(sources: list[Path], target: Path) -> int:
    """A plain ``.jsonl`` output is the processes' item files one after the other (the same exporter
    wrote them, a line an item); how many lines."""
    lines = 0
    with target.open("wb") as out:
        for source in sources:
            if source.exists():
                with source.open("rb") as items:
                    for chunk in iter(lambda: items.read(1 << 20), b""):
                        out.write(chunk)
                        lines += chunk.count(b"\n")
    return lines


def _items(jobs: list[Job]) -> Iterator[dict[str, Any]]:
    for job in jobs:
        path = Path(job.items)
        if path.exists():
            with path.open(encoding="utf-8") as lines:
                for line in lines:
                    yield json.loads(line)


def gather_records(parts: list[Path], settings: Settings, spider: str) -> None:
    """Each process kept its own files of record (``PART/failures.jsonl``...: a resumed process cuts its
    own back); the crawl's are theirs, one after the other, in place of what an earlier run left."""
    for name in RECORDS:
        template = getattr(settings, name)
        if not template:
            continue
        target = resolve_path(template, spider, settings.run_key)
        target.unlink(missing_ok=True)
        for part in parts:
            source = part / f"{name}.jsonl"
            if source.exists() and source.stat().st_size:
                target.parent.mkdir(parents=True, exist_ok=True)
                with source.open("rb") as lines, target.open("ab") as out:
                    shutil.copyfileobj(lines, out)


def merged_stats(mesh: Path, processes: int, spider: str) -> Stats:
    """The sum of the processes' stats (their own item files left out: the outputs are written after); the
    requests one sent another that were never read are pending too."""
    parts = []
    for k in range(processes):
        with contextlib.suppress(FileNotFoundError, ValueError):
            parts.append(json.loads((mesh / f"stats-{k}.json").read_text()))
    stats = merge_stats(parts)
    stats.spider = spider
    stats.items_written.clear()
    stats.requests_pending = sum(int(part.get("requests_pending", 0)) for part in parts) + unread(mesh, processes)
    return stats
