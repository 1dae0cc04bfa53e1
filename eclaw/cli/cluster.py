"""``eclaw worker|seed|status --redis URL``: one crawl on many worker processes sharing a Redis frontier."""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

from eclaw.cli.common import pairs, setup_logging
from eclaw.cli.crawl import crawl_with_signals
from eclaw.cluster.frontier import RedisScheduler, connect
from eclaw.cluster.sink import cluster_status, export_items, merged_stats
from eclaw.core.lifecycle import iterate
from eclaw.engine import Engine
from eclaw.http import Request
from eclaw.settings import Settings
from eclaw.spider import Spider, load_spider
from eclaw.stats import Stats

__all__ = ["add_parsers", "run"]


def add_parsers(sub: Any) -> None:
    worker = sub.add_parser("worker", help="crawl a spider's shared Redis frontier (start N of them)")
    seed = sub.add_parser("seed", help="push a spider's start requests to its Redis frontier, once")
    status = sub.add_parser("status", help="queues, leases, workers and totals of the crawls in a Redis")
    for parser in (worker, seed):
        parser.add_argument("spider", help="PATH.py or PATH.py:SpiderClass")
        parser.add_argument("-a", "--arg", action="append", default=[], metavar="NAME=VALUE", help="spider argument")
        parser.add_argument("-s", "--set", action="append", default=[], metavar="KEY=VALUE", help="a setting")
    for parser in (worker, seed, status):
        parser.add_argument("--redis", required=True, metavar="URL", help="redis://HOST:PORT/DB")
    worker.add_argument("-o", "--output", default=None, help="when the crawl is done, write all its items (JSONL)")
    worker.add_argument("--name", default=None, help="this worker's name (default: host:pid:random)")
    seed.add_argument("--reset", action="store_true", help="forget the spider's earlier crawl in this Redis first")


def run(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    overrides: dict[str, Any] = pairs(getattr(args, "set", []), "-s")
    setup_logging(str(settings.replace(overrides).log_level))
    if args.command == "status":
        return asyncio.run(_status(args.redis))
    args.arg = pairs(args.arg, "-a")
    spider = load_spider(args.spider)
    overrides = {**overrides, "scheduler_url": args.redis, "store": ""}
    spider_args = dict(args.arg)
    if args.command == "seed":
        return asyncio.run(_seed(spider, settings, overrides, spider_args, args.reset))
    scheduler = RedisScheduler(args.redis, seed=False, worker=args.name)
    engine = Engine(settings, overrides=overrides, scheduler=lambda: scheduler)
    stats = asyncio.run(crawl_with_signals(engine, spider, spider_args))
    if stats.finish_reason != "finished":
        print(stats.summary())
        print(f"worker stopped ({stats.finish_reason}): what it held is back in the queue; start it again to go on")
        return 1
    merged, items = asyncio.run(_finish(args.redis, scheduler.prefix, args.output))
    print(f"this worker ({scheduler.worker}):")
    print(stats.summary())
    print(f"\nmerged stats of every worker ({items} items in Redis):")
    print(merged.summary())
    if args.output:
        print(f"items written to {args.output}")
    return 0


async def _finish(url: str, prefix: str, output: str | None) -> tuple[Stats, int]:
    redis = await connect(url)
    try:
        for _ in range(50):  # other workers are finishing too: wait (a little) for their last stats
            workers = await redis.zcard(prefix + "workers")
            if not workers:
                break
            await asyncio.sleep(0.1)
        items = await redis.hlen(prefix + "items")
        if output:
            Path(output).parent.mkdir(parents=True, exist_ok=True)
            await export_items(redis, prefix, Path(output))
        return await merged_stats(redis, prefix), items
    finally:
        await redis.aclose()


async def _seed(
    spider: type[Spider], settings: Settings, overrides: dict[str, Any], spider_args: dict[str, Any], reset: bool
) -> int:
    effective = settings.replace(overrides)
    scheduler = RedisScheduler(effective.scheduler_url, seed=True, worker="seed")
    instance = spider(**spider_args)
    if reset:
        redis = await connect(effective.scheduler_url)
        try:
            keys = [key async for key in redis.scan_iter(match=f"eclaw:{instance.name}:*")]
            if keys:
                await redis.delete(*keys)
        finally:
            await redis.aclose()
    await scheduler.open(instance, effective, lambda: None)
    try:
        batch: list[Request] = []
        reasons: list[str | None] = []
        async for request in iterate(instance.start_requests()):
            batch.append(request)
            if len(batch) >= 500:
                reasons += await scheduler.enqueue(batch)
                batch = []
        reasons += await scheduler.enqueue(batch)
        pushed = reasons.count(None)
        seen = len(reasons) - pushed
        stats = Stats(spider=instance.name, requests_generated=pushed + seen, requests_dropped=seen)
        stats.dropped_by_reason["already seen or filtered"] = seen
        stats.finish_reason = "finished"
        await scheduler.call(
            lambda: scheduler.redis.hset(  # type: ignore[union-attr]
                scheduler.prefix + "stats", f"seed {uuid.uuid4().hex[:6]}", json.dumps(stats.as_dict(), default=str)
            )
        )
    finally:
        await scheduler.close()
    print(f"seeded {pushed} start requests for {instance.name!r} ({seen} already seen or filtered)")
    return 0


async def _status(url: str) -> int:
    redis = await connect(url)
    try:
        print(await cluster_status(redis))
    finally:
        await redis.aclose()
    return 0
