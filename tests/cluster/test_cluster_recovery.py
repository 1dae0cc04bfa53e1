"""Worker processes of one crawl (``eclaw worker``) on a real redis-server through what goes wrong:
a worker killed mid-crawl loses nothing, Redis restarted mid-crawl is waited for, Redis gone for
good pauses the crawl with its frontier kept, an unreachable Redis is one line and exit 2.

Each crawl is seeded in this process (``eclaw seed`` itself is run in test_cluster); the workers are
real processes, since what is tested is a process killed or waiting."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from eclaw import Settings
from eclaw.cluster.seed import seed
from eclaw.spider import make_spider
from eclaw.testing import serve
from tests.cluster.servers import RedisServer, redis_server
from tests.cluster.test_cluster import eclaw, ended, stored_items, wait_for_items
from tests.conftest import until
from tests.forkserver import STDOUT, Child, spawn
from tests.state.site import StateSpider, expected, make_app

ROOT = Path(__file__).resolve().parents[2]
STATE_SPIDER = str(ROOT / "tests/state/site.py") + ":StateSpider"


async def seeded(server: RedisServer, base: str) -> list[str]:
    """The state site's crawl seeded (as ``eclaw seed`` does): the command line of its workers."""
    settings = Settings().replace(frontier_url=server.url, store="")
    await seed(make_spider(StateSpider, {"base_url": base}), settings)
    return [STATE_SPIDER, "-a", f"base_url={base}", "--redis", server.url]


async def logged_worker(tmp: Path, log: Path, *args: str) -> Child:
    """``eclaw worker ...`` writing what it says to ``log`` (read while it runs)."""
    with log.open("wb") as file:  # the child has its own copy of the descriptor
        return await spawn("worker", *args, "-s", "log_level=WARNING", cwd=tmp, stdout=file, stderr=STDOUT)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path) as running:
        yield running


async def test_a_worker_killed_mid_crawl_loses_nothing(tmp_path: Path, server: RedisServer) -> None:
    parsed, _ = expected()
    async with serve(make_app(delay=0.03)) as base:
        spider = await seeded(server, base)
        workers = [await eclaw(tmp_path, "worker", *spider, "-s", "lease_timeout=2") for _ in range(3)]
        await wait_for_items(server, "state-site", 100)
        workers[0].send_signal(signal.SIGKILL)
        await workers[0].wait()
        for worker in workers[1:]:
            await ended(worker)
        items = await stored_items(server, "state-site")
    pages = [item["page"] for item in items]
    assert len(pages) == len(set(pages)) and set(pages) == parsed


async def test_redis_restarted_mid_crawl_the_workers_carry_on(tmp_path: Path, server: RedisServer) -> None:
    parsed, _ = expected()
    logs = [tmp_path / f"worker{n}.log" for n in range(2)]
    async with serve(make_app(delay=0.03)) as base:
        spider = await seeded(server, base)
        workers = [await logged_worker(tmp_path, log, *spider, "-s", "lease_timeout=20") for log in logs]
        await wait_for_items(server, "state-site", 100)
        server.stop()  # its append-only file keeps the frontier
        await until(lambda: any("Redis unreachable" in log.read_text() for log in logs))  # they wait for it
        server.start()
        try:
            for worker in workers:
                await asyncio.wait_for(worker.wait(), 120)
        except TimeoutError:
            for worker in workers:
                if worker.returncode is None:
                    worker.send_signal(signal.SIGKILL)
            held = await _leases(server)
            raise AssertionError(
                f"workers running 120 s after Redis came back, holding {held}: {_tails(logs)}"
            ) from None
        items = await stored_items(server, "state-site")
    said = [log.read_text() for log in logs]
    assert [worker.returncode for worker in workers] == [0, 0], said
    assert set(item["page"] for item in items) == parsed and len(items) == len(parsed)
    assert all("merged stats of every worker" in out for out in said)


async def _leases(server: RedisServer) -> dict[str, int]:
    """How many requests each worker holds in Redis, and how many are queued."""
    async with Redis.from_url(server.url) as client:
        keys = [key async for key in client.scan_iter("*leases:*")] + [key async for key in client.scan_iter("*queue")]
        return {key.decode(): await client.zcard(key) for key in keys}


def _tails(logs: list[Path]) -> str:
    return "\n".join(f"{log.name}: ...{log.read_text()[-3000:]}" for log in logs)


async def test_unreachable_redis_is_one_line_and_exit_2(tmp_path: Path) -> None:
    process = await eclaw(tmp_path, "worker", STATE_SPIDER, "--redis", "redis://127.0.0.1:1/0")
    _, err = await asyncio.wait_for(process.communicate(), 60)
    lines = err.decode().strip().splitlines()
    assert process.returncode == 2 and len(lines) == 1 and "cannot reach Redis at redis://127.0.0.1:1/0" in lines[0]


async def test_redis_gone_for_good_pauses_the_worker_and_keeps_the_frontier(
    tmp_path: Path, server: RedisServer
) -> None:
    async with serve(make_app(delay=0.03)) as base:
        spider = await seeded(server, base)
        worker = await eclaw(tmp_path, "worker", *spider, "-s", "lease_timeout=1")
        await wait_for_items(server, "state-site", 50)
        server.stop()
        out, err = await asyncio.wait_for(worker.communicate(), 60)
        assert worker.returncode == 1
        assert "Redis at redis://127.0.0.1" in err.decode() and "lost" in err.decode()
        assert "worker stopped (frontier error)" in out.decode()
        server.start()  # the frontier is still there: a new worker finishes the crawl
        await ended(await eclaw(tmp_path, "worker", *spider))
        items = await stored_items(server, "state-site")
    assert set(item["page"] for item in items) == expected()[0]
