"""The Redis side of a distributed crawl that is not the frontier: items stored once, merged stats, status.

Every worker's items go to one Redis hash keyed by the item's key (``Item.key``
or the spider's ``item_key``), else by a hash of its content, so a request
redone after a worker died cannot store an item twice. Each worker writes its
stats to Redis as it goes; the merged stats are their sum.

An item's write joins the worker's next pipeline and the item goes on at once:
waiting for each write in turn, the items of a busy worker fell behind its
downloads (a thousand pages behind within seconds, each holding its lease).
Before a request's lease is dropped, :meth:`ClusterSink.confirm` waits for the
writes made so far, so a request is done only once its items are in Redis.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eclaw.exceptions import RedisLost
from eclaw.items import item_key, item_to_dict, item_type
from eclaw.stats import Stats, merge_stats

if TYPE_CHECKING:
    from eclaw.cluster.link import RedisLink
    from eclaw.contracts import CrawlContext
    from eclaw.spider import Spider

__all__ = ["ClusterSink", "cluster_status", "export_items", "merged_stats"]

logger = logging.getLogger(__name__)


class ClusterSink:
    """The last pipeline of a distributed crawl: items into Redis (once each), stats alongside."""

    def __init__(self, link: RedisLink) -> None:
        self._link = link
        self._crawl: CrawlContext | None = None
        self._keys: tuple[str, ...] = ()
        self._pushed = 0.0
        self._writes: deque[tuple[asyncio.Future[list[Any]] | None, Any, tuple[Any, ...]]] = deque()
        self._confirming: asyncio.Task[None] | None = None
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()  # (writes to wait for, its caller)
        self._made = 0  # writes made so far ...
        self._confirmed = 0  # ... and known to be in Redis (or dead-lettered)

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
        link = self._link
        command = ("HSETNX", link.prefix + "items", ident, text)
        self._writes.append((link.queue(*command), item, command))  # confirm() waits for it
        self._made += 1
        loop = asyncio.get_running_loop()
        if loop.time() - self._pushed > 1.0 and self._crawl is not None:  # the stats, with the same pipeline
            self._pushed = loop.time()
            pushed = link.queue("HSET", link.prefix + "stats", link.worker, self._stats_text())
            pushed.add_done_callback(_lost_is_fine)  # not sent again: the next push (or the last) has them
        return item

    async def confirm(self) -> None:
        """Every item handed in so far is in Redis (or dead-lettered, if Redis refused it); raises
        :class:`~eclaw.exceptions.RedisLost` if Redis stays away. Items handed in later are not
        waited for."""
        if self._confirmed >= self._made:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append((self._made, waiter))
        if self._confirming is None or self._confirming.done():
            self._confirming = asyncio.ensure_future(self._confirm_all())
        await waiter

    async def _confirm_all(self) -> None:
        """The writes, oldest first, each waiter told once its writes are in; a write sent with a
        pipeline that failed is sent again (retried while Redis is away: if it stays away, the
        waiters are told so and it stays first for the next call)."""
        link, writes, waiters = self._link, self._writes, self._waiters
        try:
            while writes:
                future, item, command = writes[0]
                try:
                    if future is None:
                        await link.call(lambda command=command: link.command(*command))  # type: ignore[misc]
                    else:
                        await future
                except RedisLost:
                    raise
                except Exception as exc:
                    if future is not None and link.unreachable(exc):
                        writes[0] = (None, item, command)  # sent again, with retries
                        continue
                    self._refused(item, exc)
                writes.popleft()
                self._confirmed += 1
                while waiters and waiters[0][0] <= self._confirmed:
                    done = waiters.popleft()[1]
                    if not done.done():
                        done.set_result(None)
        except (RedisLost, asyncio.CancelledError) as exc:
            while waiters:
                failed = waiters.popleft()[1]
                if failed.done():
                    continue
                if isinstance(exc, RedisLost):
                    failed.set_exception(exc)
                else:
                    failed.cancel()
            if isinstance(exc, asyncio.CancelledError):
                raise

    def _refused(self, item: Any, error: BaseException) -> None:
        """Redis refused the write (not a lost connection): the item is dead-lettered for this output."""
        logger.error("Redis refused an item (%s): dead-lettered", error)
        if self._crawl is not None:
            self._crawl.dead_letter(self, [item], error)

    async def push_stats(self) -> None:
        link = self._link
        if self._crawl is None or link.redis is None:
            return
        text = self._stats_text()
        await link.call(lambda: link.command("HSET", link.prefix + "stats", link.worker, text))

    def _stats_text(self) -> str:
        """This worker's stats as Redis keeps them: redacted, like every record the crawl writes."""
        assert self._crawl is not None
        return json.dumps(self._crawl.redactor.record(self._crawl.stats.as_dict()), default=str)

    async def close(self) -> None:
        try:
            await self.confirm()
            await self.push_stats()
        except RedisLost as exc:  # the requests of the unconfirmed items keep their leases: they are done again
            unsent = len(self._writes)
            logger.warning("%d items not confirmed in Redis (%s): their requests go back to the queue", unsent, exc)


def _lost_is_fine(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved: a lost stats push is not an error


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
