"""``eclaw worker|seed|status --redis URL``: one crawl on many worker processes sharing a Redis frontier."""

from __future__ import annotations

import argparse
import asyncio
import functools
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from eclaw.cli.common import pairs, setup_logging
from eclaw.cli.crawl import crawl_with_signals
from eclaw.cluster.frontier import RedisFrontier
from eclaw.cluster.link import connect, crawl_prefix
from eclaw.cluster.seed import seed
from eclaw.cluster.sink import cluster_status, export_items, merged_stats
from eclaw.engine import Engine
from eclaw.exceptions import ConfigError, EclawError
from eclaw.processes.crawl import processes_wanted
from eclaw.processes.fork import SIGNALS, fork, wait_for
from eclaw.processes.outputs import RECORDS, gather_records
from eclaw.settings import Settings
from eclaw.spider import Spider, load_spider, make_spider
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
    worker.add_argument(
        "--processes",
        default="1",
        metavar="N",
        help="start N workers on this machine (auto: one per core), forked once the spider is loaded",
    )
    seed.add_argument("--reset", action="store_true", help="forget the spider's earlier crawl in this Redis first")


def run(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    overrides: dict[str, Any] = pairs(getattr(args, "set", []), "-s")
    setup_logging(str(settings.replace(overrides).log_level))
    if args.command == "status":
        return asyncio.run(_status(args.redis))
    args.arg = pairs(args.arg, "-a")
    spider = load_spider(args.spider)
    overrides = {**overrides, "frontier_url": args.redis, "store": ""}
    spider_args = dict(args.arg)
    if args.command == "seed":
        return asyncio.run(_seed(spider, settings, overrides, spider_args, args.reset))
    count = processes_wanted(args.processes)
    if count > 1:
        return _workers(args, spider, settings.replace(overrides), spider_args, count)
    stats, frontier = asyncio.run(_work(args.redis, spider, settings, overrides, spider_args, args.name, quiet=False))
    if stats.finish_reason != "finished":
        print(stats.summary())
        print(f"worker stopped ({stats.finish_reason}): what it held is back in the queue; start it again to go on")
        return 1
    merged, items = asyncio.run(_finish(args.redis, frontier.prefix, args.output))
    print(f"this worker ({frontier.worker}):")
    print(stats.summary())
    _print_merged(merged, items, args.output)
    return 0


async def _work(
    url: str, spider: type[Spider], settings: Settings, overrides: dict[str, Any], spider_args: dict[str, Any],
    name: str | None, *, quiet: bool,
) -> tuple[Stats, RedisFrontier]:  # fmt: skip
    """One worker's crawl: its stats, and its frontier (its name, the crawl's keys)."""
    frontier = RedisFrontier(url, seed=False, worker=name)
    engine = Engine(settings, overrides=overrides, frontier=lambda: frontier)
    return await crawl_with_signals(engine, spider, spider_args, quiet=quiet), frontier


def _workers(
    args: argparse.Namespace, spider: type[Spider], effective: Settings, spider_args: dict[str, Any], count: int
) -> int:
    """``count`` workers forked from this process (each quiet: this one prints the merged stats), each with
    files of record of its own, gathered into the crawl's when they are done."""
    if effective.trace or effective.metrics_port:
        raise ConfigError("eclaw worker --processes: not with trace or metrics_port (one worker a command for those)")
    instance = make_spider(spider, spider_args)  # bad spider arguments: one error here, not one per worker
    asyncio.run(_reachable(args.redis))  # and an unreachable Redis; redis-py is imported once, here
    names = [f"{args.name}-{k + 1}" if args.name else None for k in range(count)]
    scratch = Path(tempfile.mkdtemp(prefix="eclaw-workers-"))
    parts = [scratch / f"worker-{k + 1}" for k in range(count)]
    try:
        settings = [effective.replace({n: str(part / f"{n}.jsonl") for n in RECORDS if getattr(effective, n)})
                    for part in parts]  # fmt: skip
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # a Ctrl-C from here waits for wait_for's handler
        try:
            pids = [fork(functools.partial(_forked, args.redis, spider, mine, spider_args, name))
                    for mine, name in zip(settings, names, strict=True)]  # fmt: skip
            codes = asyncio.run(wait_for(pids))
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
        gather_records(parts, effective, instance.name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return _ended(args, codes, crawl_prefix(instance.name))


def _ended(args: argparse.Namespace, codes: list[int], prefix: str) -> int:
    """What the forked workers' exit codes come to: the merged stats once all finished the crawl."""
    if 130 in codes:
        print("eclaw: interrupted", file=sys.stderr)
        return 130
    if 2 in codes:
        print(f"{codes.count(2)} of {len(codes)} workers failed (the error is above)", file=sys.stderr)
        return 2
    if any(codes):
        stopped = sum(1 for code in codes if code)
        print(f"{stopped} of {len(codes)} workers stopped: what they held is back in the queue; start them again")
        return 1
    merged, items = asyncio.run(_finish(args.redis, prefix, args.output))
    print(f"{len(codes)} workers on this machine")
    _print_merged(merged, items, args.output)
    return 0


def _forked(url: str, spider: type[Spider], effective: Settings, spider_args: dict[str, Any], name: str | None) -> int:
    """A forked worker: 0 once the crawl is over, 1 if it stopped before, 2 on an error (said in one line),
    130 on a second Ctrl-C."""
    try:
        stats, frontier = asyncio.run(_work(url, spider, effective, {}, spider_args, name, quiet=True))
    except EclawError as exc:
        print(f"eclaw: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    if stats.finish_reason != "finished":
        print(f"worker {frontier.worker} stopped ({stats.finish_reason})", file=sys.stderr)
        return 1
    return 0


async def _reachable(url: str) -> None:
    """Redis answers at ``url`` (a one-line :class:`ConfigError` if not)."""
    redis = await connect(url)
    await redis.aclose()


def _print_merged(merged: Stats, items: int, output: str | None) -> None:
    print(f"\nmerged stats of every worker ({items} items in Redis):")
    print(merged.summary())
    if output:
        print(f"items written to {output}")


async def _finish(url: str, prefix: str, output: str | None) -> tuple[Stats, int]:
    redis = await connect(url)
    try:
        for _ in range(250):  # other workers are finishing too (told at once): wait up to 5 s for their last stats
            workers = await redis.zcard(prefix + "workers")
            if not workers:
                break
            await asyncio.sleep(0.02)
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
    instance = make_spider(spider, spider_args)
    pushed, seen = await seed(instance, settings.replace(overrides), reset=reset)
    print(f"seeded {pushed} start requests for {instance.name!r} ({seen} already seen or filtered)")
    return 0


async def _status(url: str) -> int:
    redis = await connect(url)
    try:
        print(await cluster_status(redis))
    finally:
        await redis.aclose()
    return 0
