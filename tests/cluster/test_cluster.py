"""One crawl on several workers sharing a real redis-server: every item once, per-host limits held
cluster-wide, hundreds of slot releases at once, few Redis calls, a retry Redis cannot hold.

The demo shop runs as ``eclaw seed`` / ``eclaw worker`` / ``eclaw status`` commands; the other
crawls run their workers in this process (as ``eclaw worker`` runs each: a ``RedisFrontier`` of
its own, its own Redis client, leases and heartbeat), which spares the start of a Python process
for each. What a worker process does (killed, Redis restarted or gone) is in test_cluster_recovery.
One redis-server serves the module, emptied before each test."""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from redis.asyncio import Redis

from eclaw import Engine, Request, Response, Settings, Spider
from eclaw.cluster.frontier import RedisFrontier
from eclaw.cluster.seed import seed
from eclaw.demo.site import expected_products
from eclaw.exceptions import RetryRequest
from eclaw.spider import make_spider
from eclaw.stats import Stats
from eclaw.testing import serve
from tests.cluster.servers import CountingSite, RedisServer, redis_server
from tests.forkserver import PIPE, Child, Process, spawn

ROOT = Path(__file__).resolve().parents[2]


async def eclaw(tmp: Path, *args: str) -> Child:
    """``eclaw ARGS`` in ``tmp`` (forked from the fork server: a process of its own)."""
    quiet = ["-s", "log_level=WARNING"] if args[0] in ("worker", "seed") else []
    return await spawn(*args, *quiet, cwd=tmp, stdout=PIPE, stderr=PIPE)


async def ended(process: Process) -> str:
    try:
        out, err = await asyncio.wait_for(process.communicate(), 120)
    except TimeoutError:  # killed and reaped here: nothing of it is left to fail a later test
        process.kill()
        out, err = await process.communicate()
        raise AssertionError(f"still running after 120 s:\n{err.decode()[-3000:]}") from None
    assert process.returncode == 0, err.decode()[-3000:]
    return out.decode() + err.decode()


async def stored_items(server: RedisServer, spider: str) -> list[dict[str, object]]:
    redis = Redis.from_url(server.url, decode_responses=True)
    try:
        return [json.loads(text) for text in (await redis.hgetall(f"eclaw:{spider}:items")).values()]
    finally:
        await redis.aclose()


async def wait_for_items(server: RedisServer, spider: str, count: int) -> None:
    """Wait until ``count`` items are in Redis (a generous 90 s bound: workers start late on a loaded machine)."""
    redis = Redis.from_url(server.url, decode_responses=True)
    try:
        deadline = asyncio.get_running_loop().time() + 90
        while asyncio.get_running_loop().time() < deadline:
            if await redis.hlen(f"eclaw:{spider}:items") >= count:
                return
            await asyncio.sleep(0.02)
    finally:
        await redis.aclose()
    raise AssertionError(f"fewer than {count} items after 90 s")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
async def server(shared: RedisServer) -> AsyncIterator[RedisServer]:
    """The module's redis-server, empty, its command counts at zero."""
    redis = Redis.from_url(shared.url)
    try:
        await redis.flushall()
        await redis.config_resetstat()
    finally:
        await redis.aclose()
    yield shared


async def crawl_in_process(
    server: RedisServer, spider: type[Spider], workers: int, settings: Settings, **args: Any
) -> list[Stats]:
    """Seed the crawl of ``spider`` (as ``eclaw seed``), then run ``workers`` workers of it to its end
    (each as ``eclaw worker`` runs one); their stats."""
    settings = settings.replace(frontier_url=server.url, store="")
    await seed(make_spider(spider, args), settings)

    async def work(n: int) -> Stats:
        frontier = RedisFrontier(server.url, seed=False, worker=f"worker-{n}")
        async with Engine(settings, frontier=lambda: frontier) as engine:
            return await engine.crawl(spider, **args)

    return list(await asyncio.gather(*(work(n) for n in range(workers))))


async def test_three_workers_crawl_the_demo_shop_once(tmp_path: Path, demo_url: str, server: RedisServer) -> None:
    spider = [str(ROOT / "spiders/shop.py"), "-a", f"base_url={demo_url}", "--redis", server.url]
    seeded = await ended(await eclaw(tmp_path, "seed", *spider))
    assert "seeded 1 start requests for 'shop'" in seeded
    workers = [await eclaw(tmp_path, "worker", *spider, "-o", f"items{n}.jsonl") for n in range(3)]
    outputs = [await ended(worker) for worker in workers]
    status = await ended(await eclaw(tmp_path, "status", "--redis", server.url))
    expected_skus = sorted(p["sku"] for p in expected_products())
    for n in range(3):  # each worker wrote the whole crawl's items, each once
        rows = [json.loads(line) for line in (tmp_path / f"items{n}.jsonl").read_text().splitlines()]
        assert sorted(row["sku"] for row in rows) == expected_skus
    merged = outputs[0].split("merged stats of every worker")[1]
    numbers = {
        name: int(merged.split(name)[1].split()[0])
        for name in ("requests generated", "parsed", "failed", "dropped", "stored")
    }
    assert numbers["requests generated"] == numbers["parsed"] + numbers["failed"] + numbers["dropped"]
    assert numbers["stored"] >= 500
    assert "crawl shop: 0 queued, 0 in flight (leased), 500 items" in status


class Pages(Spider):
    """The pages of the counting sites at ``bases`` (each page links to the next three)."""

    name = "pages"

    def __init__(self, bases: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [base + "/p/0" for base in bases]

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"page": int(response.css("h1::text").get() or "-1"), "host": response.url.split("/")[2].split(":")[0]}
        yield from response.follow_all(css="a")


async def test_per_host_limits_hold_across_three_workers(server: RedisServer) -> None:
    """Two hosts, one crawl of three workers of concurrency 8: the host with the default limit (2) and
    the one with a limit of its own (1) never see more at once, cluster-wide."""
    common, own = CountingSite(pages=40, delay=0.05), CountingSite(pages=20, delay=0.05)
    settings = Settings(concurrency=8, concurrency_per_domain=2, host_concurrency="127.0.0.2=1")
    async with serve(common.app()) as first, serve(own.app(), host="127.0.0.2") as second:
        await crawl_in_process(server, Pages, 3, settings, bases=(first, second))
    items = await stored_items(server, "pages")
    for host, site in (("127.0.0.1", common), ("127.0.0.2", own)):
        assert sorted(item["page"] for item in items if item["host"] == host) == list(range(site.pages))  # type: ignore[type-var]
        assert site.hits == site.pages  # each page fetched once, cluster-wide
    assert common.peak == 2  # three workers of concurrency 8, and the host never saw more than 2 at once
    assert own.peak == 1  # the host's own limit, cluster-wide


class Wide(Spider):
    name = "wide"

    def __init__(self, base_url: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [base_url + "/"]

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"page": response.url.rsplit("/", 1)[-1]}
        yield from response.follow_all(css="a")


def wide_site(pages: int, delay: float) -> web.Application:
    """A home page linking ``pages`` leaves on the same host, each answering after ``delay`` seconds."""

    async def home(request: web.Request) -> web.Response:
        links = "".join(f'<a href="/w/{n}">{n}</a>' for n in range(pages))
        return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")

    async def page(request: web.Request) -> web.Response:
        await asyncio.sleep(delay)
        return web.Response(text="<html><p>leaf</p></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/", home)
    app.router.add_get("/w/{n}", page)
    return app


async def crawl_wide(server: RedisServer, app: web.Application, settings: Settings) -> tuple[Stats, int, int]:
    """One worker on ``app``: its stats, the items in Redis, the scripts Redis ran."""
    async with serve(app) as base:
        [stats] = await crawl_in_process(server, Wide, 1, settings, base_url=base)
    redis = Redis.from_url(server.url, decode_responses=True)
    try:
        scripts = (await redis.info("commandstats"))["cmdstat_evalsha"]["calls"]
    finally:
        await redis.aclose()
    return stats, len(await stored_items(server, "wide")), int(scripts)


async def test_hundreds_of_downloads_ending_at_once_wait_for_redis_connections(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """300 slow pages in flight in one worker end together: each returns its host slot to Redis at
    the same moment, more calls at once than a client has connections. They queue for one."""
    pages = 300
    with caplog.at_level(logging.WARNING):
        stats, items, _ = await crawl_wide(
            server, wide_site(pages, 0.3), Settings(concurrency=pages, concurrency_per_domain=pages)
        )
    said = caplog.text
    assert "Too many connections" not in said and "unreachable" not in said, said[-2000:]
    assert items == pages + 1 and stats.requests_failed == 0


async def test_requests_waiting_for_a_full_host_do_not_poll_redis(server: RedisServer) -> None:
    """60 links to one host that takes 2 at a time: the worker leases many of them while the host is
    full; they wait for a slot it frees (or a slow poll), not each asking Redis every few ms."""
    pages = 60
    _, items, scripts = await crawl_wide(
        server, wide_site(pages, 0.05), Settings(concurrency=32, concurrency_per_domain=2)
    )
    assert items == pages + 1
    assert scripts < 8 * (pages + 1), scripts  # a lease, a slot, a completion, links: a handful a page


async def stamp_page_3(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """A retry Redis cannot hold: a datetime in its meta."""
    if request.url.endswith("/p/3") and "since" not in request.meta:
        again = request.replace(meta={**request.meta, "since": datetime.datetime.now()})
        raise RetryRequest(again, delay=0.05, reason="stamped")
    return await call_next(request)


class Stamping(Pages):
    middlewares = [stamp_page_3]

    def parse(self, response: Response) -> Iterator[Any]:
        for got in super().parse(response):
            yield {**got, "stamped": "since" in response.meta} if isinstance(got, dict) else got


async def test_a_retry_redis_cannot_hold_is_tried_again_by_its_worker(server: RedisServer) -> None:
    """A leased request's retry that cannot be written to Redis (a datetime in its meta) stays with
    its worker, under its lease: it is downloaded again there and the crawl ends (it used to hold its
    lease for ever, so no worker ever saw the end)."""
    site = CountingSite(pages=30, delay=0.01)
    async with serve(site.app()) as base:
        await crawl_in_process(server, Stamping, 1, Settings(), bases=(base,))
    items = await stored_items(server, "pages")
    assert sorted(item["page"] for item in items) == list(range(30))  # type: ignore[type-var]
    assert [item["page"] for item in items if item["stamped"]] == [3]
    assert site.hits == 30  # page 3's first attempt never reached the site
    redis = Redis.from_url(server.url, decode_responses=True)
    try:  # nothing queued, nothing leased: what `eclaw status` reads
        assert await redis.zcard("eclaw:pages:queue") == 0
        assert [key async for key in redis.scan_iter("eclaw:pages:leases:*")] == []
    finally:
        await redis.aclose()
