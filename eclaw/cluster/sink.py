"""The Redis side of a distributed crawl that is not the frontier: items stored once, merged stats, status.

Every worker's items go to one Redis hash keyed by the item's key (``Item.key``
or the spider's ``item_key``), else by a hash of its content, so a request
redone after a worker died cannot store an item twice. Each worker writes its
stats to Redis as it goes; the merged stats are their sum.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from eclaw.items import item_key, item_to_dict, item_type
from eclaw.stats import Stats, merge_stats

if TYPE_CHECKING:
    from eclaw.contracts import CrawlContext
    from eclaw.spider import Spider

__all__ = ["ClusterSink", "SharedRedis", "cluster_status", "export_items", "merged_stats"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


class SharedRedis(Protocol):
    """What the sink needs of the Redis frontier: its connection, key prefix, worker name, retried calls."""

    redis: Any
    prefix: str
    worker: str

    async def call(self, make: Callable[[], Awaitable[T]]) -> T: ...

    async def command(self, *args: Any) -> Any: ...


class ClusterSink:
    """The last pipeline of a distributed crawl: items into Redis (once each), stats alongside."""

    def __init__(self, scheduler: SharedRedis) -> None:
        self._scheduler = scheduler
        self._crawl: CrawlContext | None = None
        self._keys: tuple[str, ...] = ()
        self._pushed = 0.0

    def __repr__(self) -> str:
        return "ClusterSink"

    async def open(self, crawl: CrawlContext) -> None:
        self._crawl = crawl
        self._keys = tuple(crawl.spider.item_key)

    async def process_item(self, item: Any, spider: Spider) -> Any:
        data = item_to_dict(item)
        text = json.dumps(data, ensure_ascii=False, default=str, sort_keys=True)
        key = item_key(item, data, self._keys)
        ident = f"{item_type(item)}:{key}" if key is not None else hashlib.sha1(text.encode()).hexdigest()
        items = self._scheduler.prefix + "items"
        await self._scheduler.call(lambda: self._scheduler.command("HSETNX", items, ident, text))
        loop = asyncio.get_running_loop()
        if loop.time() - self._pushed > 1.0:
            self._pushed = loop.time()
            await self.push_stats()
        return item

    async def push_stats(self) -> None:
        redis = self._scheduler.redis
        if self._crawl is None or redis is None:
            return
        text = json.dumps(self._crawl.stats.as_dict(), default=str)
        await self._scheduler.call(lambda: redis.hset(self._scheduler.prefix + "stats", self._scheduler.worker, text))

    async def close(self) -> None:
        await self.push_stats()


async def merged_stats(redis: Any, prefix: str) -> Stats:
    """The sum of every worker's stats."""
    return merge_stats(json.loads(text) for text in (await redis.hgetall(prefix + "stats")).values())


async def export_items(redis: Any, prefix: str, path: Path) -> int:
    """Write the crawl's items (each once) to a JSONL file; returns how many."""
    count = 0
    with path.open("w", encoding="utf-8") as file:
        async for _, text in redis.hscan_iter(prefix + "items"):
            file.write(text + "\n")
            count += 1
    return count


async def cluster_status(redis: Any) -> str:
    """Every crawl in this Redis: queue, leases, workers and their heartbeats, items, merged totals."""
    lines = []
    async for key in redis.scan_iter(match="eclaw:*:seq"):
        prefix = key[: -len("seq")]
        spider = prefix.split(":", 2)[1]
        queued = await redis.zcard(prefix + "queue")
        now_s, now_us = await redis.time()
        now_ms = now_s * 1000 + now_us // 1000
        workers = await redis.zrange(prefix + "workers", 0, -1, withscores=True)
        leased = [await redis.zcard(f"{prefix}leases:{w}") for w, _ in workers]
        items = await redis.hlen(prefix + "items")
        stats = await merged_stats(redis, prefix)
        lines.append(
            f"crawl {spider}: {queued} queued, {sum(leased)} in flight (leased), {items} items, "
            f"{stats.requests_parsed} parsed, {stats.requests_failed} failed, {stats.requests_dropped} dropped"
        )
        for (worker, deadline), held in zip(workers, leased, strict=True):
            state = "alive" if deadline > now_ms else "late (its leases go back to the queue)"
            lines.append(
                f"  worker {worker}: {held} leased, heartbeat due in {(deadline - now_ms) / 1000:.1f}s, {state}"
            )
    return "\n".join(lines) or "no crawls in this Redis"
