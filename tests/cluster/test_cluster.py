"""One crawl on several worker processes sharing a real redis-server: every item once, a killed
worker's requests redone, per-host limits held cluster-wide, Redis restarted mid-crawl."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

from aiohttp import web
from redis.asyncio import Redis

from eclaw.demo.site import expected_products
from eclaw.testing import serve
from tests.cluster.servers import SPIDER, CountingSite, RedisServer, redis_server
from tests.state.site import expected, make_app

ROOT = Path(__file__).resolve().parents[2]
STATE_SPIDER = str(ROOT / "tests/state/site.py") + ":StateSpider"


async def eclaw(tmp: Path, *args: str) -> asyncio.subprocess.Process:
    quiet = ["-s", "log_level=WARNING"] if args[0] in ("worker", "seed") else []
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "eclaw", *args, *quiet,
        cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


async def ended(process: asyncio.subprocess.Process) -> str:
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


async def test_three_workers_crawl_the_demo_shop_once(tmp_path: Path, demo_url: str) -> None:
    with redis_server(tmp_path) as server:
        spider = ["spiders/shop.py", "-a", f"base_url={demo_url}", "--redis", server.url]
        spider[0] = str(ROOT / spider[0])
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


async def test_per_host_limit_holds_across_three_workers(tmp_path: Path) -> None:
    site = CountingSite(pages=60, delay=0.05)
    (tmp_path / "pages.py").write_text(SPIDER)
    async with serve(site.app()) as base:
        with redis_server(tmp_path) as server:
            spider = [str(tmp_path / "pages.py"), "-a", f"base_url={base}", "--redis", server.url]
            limits = ["-s", "concurrency=8", "-s", "concurrency_per_domain=2"]
            await ended(await eclaw(tmp_path, "seed", *spider))
            workers = [await eclaw(tmp_path, "worker", *spider, *limits) for _ in range(3)]
            for worker in workers:
                await ended(worker)
            items = await stored_items(server, "pages")
    assert sorted(item["page"] for item in items) == list(range(60))  # type: ignore[type-var]
    assert site.hits == 60  # each page fetched once, cluster-wide
    assert site.peak == 2  # three workers of concurrency 8, and the host never saw more than 2 at once


async def test_a_per_host_override_holds_across_two_workers(tmp_path: Path) -> None:
    site = CountingSite(pages=30, delay=0.05)
    (tmp_path / "pages.py").write_text(SPIDER)
    async with serve(site.app()) as base:
        with redis_server(tmp_path) as server:
            spider = [str(tmp_path / "pages.py"), "-a", f"base_url={base}", "--redis", server.url]
            limits = ["-s", "concurrency_per_domain=4", "-s", "host_concurrency=127.0.0.1=1"]
            await ended(await eclaw(tmp_path, "seed", *spider))
            for worker in [await eclaw(tmp_path, "worker", *spider, *limits) for _ in range(2)]:
                await ended(worker)
    assert site.hits == 30 and site.peak == 1  # the host's own limit, cluster-wide


async def seeded_workers(
    tmp: Path, base: str, server: RedisServer, count: int, lease_timeout: float
) -> list[asyncio.subprocess.Process]:
    """Seed the state site's crawl, start ``count`` workers, return once 100 items are stored."""
    spider = [STATE_SPIDER, "-a", f"base_url={base}", "--redis", server.url]
    await ended(await eclaw(tmp, "seed", *spider))
    workers = [await eclaw(tmp, "worker", *spider, "-s", f"lease_timeout={lease_timeout}") for _ in range(count)]
    await wait_for_items(server, "state-site", 100)
    return workers


async def test_a_worker_killed_mid_crawl_loses_nothing(tmp_path: Path) -> None:
    parsed, _ = expected()
    async with serve(make_app(delay=0.03)) as base:
        with redis_server(tmp_path) as server:
            workers = await seeded_workers(tmp_path, base, server, 3, 2)
            workers[0].send_signal(signal.SIGKILL)
            await workers[0].wait()
            for worker in workers[1:]:
                await ended(worker)
            items = await stored_items(server, "state-site")
    pages = [item["page"] for item in items]
    assert len(pages) == len(set(pages)) and set(pages) == parsed


async def test_redis_restarted_mid_crawl_the_workers_carry_on(tmp_path: Path) -> None:
    parsed, _ = expected()
    async with serve(make_app(delay=0.03)) as base:
        with redis_server(tmp_path) as server:
            workers = await seeded_workers(tmp_path, base, server, 2, 20)
            server.stop()  # its append-only file keeps the frontier
            await asyncio.sleep(1.0)
            server.start()
            outputs = [await ended(worker) for worker in workers]
            items = await stored_items(server, "state-site")
    assert set(item["page"] for item in items) == parsed and len(items) == len(parsed)
    assert all("merged stats of every worker" in out for out in outputs)
    assert any("Redis unreachable" in out for out in outputs)  # they did wait for it


async def test_unreachable_redis_is_one_line_and_exit_2(tmp_path: Path) -> None:
    process = await eclaw(tmp_path, "worker", STATE_SPIDER, "--redis", "redis://127.0.0.1:1/0")
    _, err = await asyncio.wait_for(process.communicate(), 60)
    lines = err.decode().strip().splitlines()
    assert process.returncode == 2 and len(lines) == 1 and "cannot reach Redis at redis://127.0.0.1:1/0" in lines[0]


async def test_redis_gone_for_good_pauses_the_worker_and_keeps_the_frontier(tmp_path: Path) -> None:
    async with serve(make_app(delay=0.03)) as base:
        with redis_server(tmp_path) as server:
            spider = [STATE_SPIDER, "-a", f"base_url={base}", "--redis", server.url]
            await ended(await eclaw(tmp_path, "seed", *spider))
            worker = await eclaw(tmp_path, "worker", *spider, "-s", "lease_timeout=1")
            await wait_for_items(server, "state-site", 50)
            server.stop()
            out, err = await asyncio.wait_for(worker.communicate(), 60)
            assert worker.returncode == 1
            assert "Redis at redis://127.0.0.1" in err.decode() and "lost" in err.decode()
            assert "worker stopped (scheduler error)" in out.decode()
            server.start()  # the frontier is still there: a new worker finishes the crawl
            await ended(await eclaw(tmp_path, "worker", *spider))
            items = await stored_items(server, "state-site")
    assert set(item["page"] for item in items) == expected()[0]


WIDE_SPIDER = """
from eclaw import Spider

class Wide(Spider):
    name = "wide"

    def __init__(self, base_url="", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [base_url + "/"]

    def parse(self, response):
        yield {"page": response.url.rsplit("/", 1)[-1]}
        yield from response.follow_all(css="a")
"""


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


async def crawl_wide(tmp_path: Path, app: web.Application, *limits: str) -> tuple[str, int, int]:
    """Seed and run one worker on ``app``: its output, the items in Redis, the scripts Redis ran."""
    (tmp_path / "wide.py").write_text(WIDE_SPIDER)
    async with serve(app) as base:
        with redis_server(tmp_path) as server:
            spider = [str(tmp_path / "wide.py"), "-a", f"base_url={base}", "--redis", server.url]
            await ended(await eclaw(tmp_path, "seed", *spider))
            output = await ended(await eclaw(tmp_path, "worker", *spider, *limits))
            items = await stored_items(server, "wide")
            redis = Redis.from_url(server.url, decode_responses=True)
            try:
                scripts = (await redis.info("commandstats"))["cmdstat_evalsha"]["calls"]
            finally:
                await redis.aclose()
    return output, len(items), int(scripts)


async def test_hundreds_of_downloads_ending_at_once_wait_for_redis_connections(tmp_path: Path) -> None:
    """300 slow pages in flight in one worker end together: each returns its host slot to Redis at
    the same moment, more calls at once than a client has connections. They queue for one."""
    pages = 300
    limits = ["-s", f"concurrency={pages}", "-s", f"concurrency_per_domain={pages}"]
    output, items, _ = await crawl_wide(tmp_path, wide_site(pages, 0.3), *limits)
    assert "Too many connections" not in output and "unreachable" not in output, output[-2000:]
    assert items == pages + 1


async def test_requests_waiting_for_a_full_host_do_not_poll_redis(tmp_path: Path) -> None:
    """100 links to one host that takes 2 at a time: the worker leases many of them while the host is
    full; they wait for a slot it frees (or a slow poll), not each asking Redis every few ms."""
    pages = 100
    limits = ["-s", "concurrency=32", "-s", "concurrency_per_domain=2"]
    _, items, scripts = await crawl_wide(tmp_path, wide_site(pages, 0.05), *limits)
    assert items == pages + 1
    assert scripts < 8 * (pages + 1), scripts  # a lease, a slot, a completion, links: a handful a page


STAMPING_SPIDER = (
    SPIDER.replace(
        "from eclaw import Spider\n",
        """import datetime
from eclaw import Spider
from eclaw.exceptions import RetryRequest


async def stamp_page_3(request, call_next):
    if request.url.endswith("/p/3") and "since" not in request.meta:  # a retry Redis cannot hold: a datetime
        again = request.replace(meta={**request.meta, "since": datetime.datetime.now()})
        raise RetryRequest(again, delay=0.05, reason="stamped")
    return await call_next(request)
""",
    )
    .replace("    start_urls = []\n", "    start_urls = []\n    middlewares = [stamp_page_3]\n")
    .replace(
        'yield {"page": int(response.css("h1::text").get())}',
        'yield {"page": int(response.css("h1::text").get()), "stamped": "since" in response.meta}',
    )
)


async def test_a_retry_redis_cannot_hold_is_tried_again_by_its_worker(tmp_path: Path) -> None:
    """A leased request's retry that cannot be written to Redis (a datetime in its meta) stays with
    its worker, under its lease: it is downloaded again there and the crawl ends (it used to hold its
    lease for ever, so no worker ever saw the end)."""
    site = CountingSite(pages=30, delay=0.01)
    (tmp_path / "pages.py").write_text(STAMPING_SPIDER)
    async with serve(site.app()) as base:
        with redis_server(tmp_path) as server:
            spider = [str(tmp_path / "pages.py"), "-a", f"base_url={base}", "--redis", server.url]
            await ended(await eclaw(tmp_path, "seed", *spider))
            await ended(await eclaw(tmp_path, "worker", *spider))
            items = await stored_items(server, "pages")
            status = await ended(await eclaw(tmp_path, "status", "--redis", server.url))
    assert sorted(item["page"] for item in items) == list(range(30))  # type: ignore[type-var]
    assert [item["page"] for item in items if item["stamped"]] == [3]
    assert site.hits == 30  # page 3's first attempt never reached the site
    assert "0 queued, 0 in flight (leased), 30 items" in status
