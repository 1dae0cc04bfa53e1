"""Seeding a shared frontier: a spider's start requests pushed to Redis once, for the workers."""

from __future__ import annotations

import json
import uuid

from eclaw.cluster.frontier import RedisFrontier
from eclaw.cluster.link import connect, crawl_prefix
from eclaw.http import Request
from eclaw.settings import Settings
from eclaw.spider import Spider, iterate_start_requests
from eclaw.stats import Stats

__all__ = ["seed", "seeded"]


async def seeded(url: str, spider: str) -> bool:
    """Whether the crawl of ``spider`` in this Redis was seeded already (a resumed crawl is)."""
    redis = await connect(url)
    try:
        return bool(await redis.exists(crawl_prefix(spider) + "seeded"))
    finally:
        await redis.aclose()


async def seed(instance: Spider, settings: Settings, *, reset: bool = False) -> tuple[int, int]:
    """Push ``instance``'s start requests to the Redis frontier of ``settings.frontier_url``;
    returns (pushed, already seen or filtered)."""
    frontier = RedisFrontier(settings.frontier_url, seed=True, worker="seed")
    if reset:
        redis = await connect(settings.frontier_url)
        try:
            keys = [key async for key in redis.scan_iter(match=crawl_prefix(instance.name) + "*")]
            if keys:
                await redis.delete(*keys)
        finally:
            await redis.aclose()
    await frontier.open(instance, settings, lambda: None)
    try:
        batch: list[Request] = []
        reasons: list[str | None] = []
        async for request in iterate_start_requests(instance.start_requests()):
            batch.append(request)
            if len(batch) >= 500:
                reasons += await frontier.enqueue(batch)
                batch = []
        reasons += await frontier.enqueue(batch)
        pushed = reasons.count(None)
        seen = len(reasons) - pushed
        stats = Stats(spider=instance.name, requests_generated=pushed + seen, requests_dropped=seen)
        stats.dropped_by_reason["already seen or filtered"] = seen
        stats.finish_reason = "finished"
        text = json.dumps(stats.as_dict(), default=str)
        link = frontier.link
        await link.call(lambda: link.command("HSET", link.prefix + "stats", f"seed {uuid.uuid4().hex[:6]}", text))
    finally:
        await frontier.close()
    return pushed, seen
