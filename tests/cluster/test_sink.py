"""Items into Redis without holding up the worker: a busy worker's items keep up with its pages and
its leases stay bounded; a request's lease ends only once its items are in Redis (written again if
the pipeline they went in was lost, dead-lettered if Redis refuses them)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

from aiohttp import web
from redis.asyncio import Redis

from eclaw import Request, Settings, Spider
from eclaw.cluster.frontier import RedisFrontier
from eclaw.security.redact import Redactor
from eclaw.stats import Stats
from eclaw.testing import serve
from tests.cluster.servers import RedisServer, redis_server

PAGES, FANOUT = 600, 12  # ten times what the worker may hold at once (see the bound below)
CONCURRENCY = 8
NAMES = ["Αθήνα", "Θεσσαλονίκη", "Πάτρα", "Ηράκλειο", "Λάρισα", "Βόλος"]

# A catalogue unlike the demo shop: wide (each page links to twelve), in ISO-8859-7, pages from
# a few hundred bytes to ~60 KB, answered at once (so parsing, not the site, is the limit).
CATALOGUE_SPIDER = """
from eclaw import Spider

class Catalogue(Spider):
    name = "catalogue"

    def __init__(self, base_url="", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [base_url + "/c/0"]

    def parse(self, response):
        yield {"n": int(response.css("dt::text").get()), "town": response.css("dd::text").get()}
        yield from response.follow_all(css="nav a")
"""


def catalogue() -> web.Application:
    async def page(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        links = "".join(f'<a href="/c/{m}">{m}</a>' for m in range(n * FANOUT + 1, min(n * FANOUT + 13, PAGES)))
        padding = "<p>" + "λ" * (n % 7) * 8000 + "</p>"
        html = f'<html><head><meta charset="iso-8859-7"></head><body><dl><dt>{n}</dt>'
        html += f"<dd>{NAMES[n % len(NAMES)]}</dd></dl>{padding}<nav>{links}</nav></body></html>"
        return web.Response(body=html.encode("iso-8859-7"), content_type="text/html", charset="iso-8859-7")

    app = web.Application()
    app.router.add_get("/c/{n}", page)
    return app


async def test_a_busy_worker_leases_no_more_than_it_can_finish_and_stores_each_item(tmp_path: Path) -> None:
    (tmp_path / "catalogue.py").write_text(CATALOGUE_SPIDER)
    async with serve(catalogue()) as base:
        with redis_server(tmp_path) as server:
            spider = [str(tmp_path / "catalogue.py"), "-a", f"base_url={base}", "--redis", server.url]
            seed = await asyncio.create_subprocess_exec(sys.executable, "-m", "eclaw", "seed", *spider, cwd=tmp_path)
            assert await seed.wait() == 0
            worker = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "eclaw", "worker", *spider, "--name", "busy",
                "-s", f"concurrency={CONCURRENCY}", "-s", "log_level=WARNING",
                cwd=tmp_path, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            redis = Redis.from_url(server.url, decode_responses=True)
            most, running = 0, asyncio.ensure_future(worker.wait())
            try:
                while not running.done():  # the worker's leases, as often as Redis can say
                    most = max(most, await redis.zcard("eclaw:catalogue:leases:busy"))
                    await asyncio.sleep(0.005)
                items = [json.loads(text) for text in (await redis.hgetall("eclaw:catalogue:items")).values()]
            finally:
                await redis.aclose()
            _, err = await worker.communicate()
    assert worker.returncode == 0, err.decode()[-2000:]
    assert sorted(item["n"] for item in items) == list(range(PAGES))  # each page's item, once
    assert all(item["town"] == NAMES[item["n"] % len(NAMES)] for item in items)  # decoded from ISO-8859-7
    # downloading (8) and then being parsed and stored (4 x 8, and the 8 downloads that ended since the
    # last lease), waiting for a slot (8, and one lease's batch): far from the whole crawl's pages
    assert 0 < most <= 6 * CONCURRENCY + 16, most


class Town(Spider):
    name = "towns"


class Crawl(SimpleNamespace):
    """What the sink uses of a crawl: its spider, stats, redactor, and where it dead-letters."""

    def __init__(self, spider: Spider) -> None:
        super().__init__(spider=spider, stats=Stats(spider="towns"), dead=[], redactor=Redactor())

    def dead_letter(self, output: object, items: list[Any], error: BaseException) -> None:
        self.dead.append((items, type(error).__name__))


class Leased(NamedTuple):
    server: RedisServer
    frontier: RedisFrontier
    redis: Any  # the frontier's client
    request: Request
    sink: Any  # its ClusterSink
    crawl: Crawl


@asynccontextmanager
async def leased(tmp: Path, spider: Spider, settings: Settings) -> AsyncIterator[Leased]:
    """A real redis-server, a worker ``w`` on it, a request it leased, and its sink opened on a
    stand-in crawl."""
    with redis_server(tmp) as server:
        frontier = RedisFrontier(server.url, worker="w")
        await frontier.open(spider, settings, lambda: None)
        try:
            crawl = Crawl(spider)
            sink = frontier.outputs()["redis"]
            await sink.open(crawl)  # type: ignore[attr-defined]
            await frontier.enqueue([Request("http://127.0.0.1:1/town")])
            request = await frontier.next_request()
            assert request is not None and frontier.redis is not None
            yield Leased(server, frontier, frontier.redis, request, sink, crawl)
        finally:
            await frontier.close()


async def test_an_item_written_while_redis_was_away_is_written_again_before_its_lease_ends(tmp_path: Path) -> None:
    spider = Town()
    async with leased(tmp_path, spider, Settings(lease_timeout=10)) as worker:
        worker.server.stop()
        await worker.sink.process_item({"town": "Πάτρα"}, spider)  # its pipeline fails: Redis is down
        await asyncio.sleep(0.1)
        worker.server.start()
        await worker.frontier.done(worker.request)
        items = list((await worker.redis.hgetall("eclaw:towns:items")).values())
        leases = await worker.redis.zcard("eclaw:towns:leases:w")
    assert [json.loads(text) for text in items] == [{"town": "Πάτρα"}]
    assert leases == 0 and worker.crawl.dead == []


async def test_an_item_redis_refuses_is_dead_lettered_and_its_request_still_ends(tmp_path: Path) -> None:
    spider = Town()
    async with leased(tmp_path, spider, Settings()) as worker:
        await worker.redis.set("eclaw:towns:items", "not a hash")  # every HSETNX: WRONGTYPE
        await worker.sink.process_item({"town": "Βόλος"}, spider)
        await worker.frontier.done(worker.request)
        leases = await worker.redis.zcard("eclaw:towns:leases:w")
    assert worker.crawl.dead == [([{"town": "Βόλος"}], "ResponseError")]
    assert leases == 0


async def test_a_lease_waits_for_its_own_items_not_for_those_still_coming(tmp_path: Path) -> None:
    """Items keep coming (a busy worker): confirming the first one's write returns at once, it
    does not wait for the writes made after it."""
    spider = Town()
    async with leased(tmp_path, spider, Settings()) as worker:
        sink = worker.sink
        await sink.process_item({"town": "Λάρισα", "n": 0}, spider)
        confirmed = asyncio.ensure_future(sink.confirm())
        loop = asyncio.get_running_loop()
        started, n = loop.time(), 0
        while not confirmed.done() and loop.time() - started < 10:
            n += 1
            await sink.process_item({"town": "Λάρισα", "n": n}, spider)  # one more write each turn
            await asyncio.sleep(0)
        waited = loop.time() - started
        await sink.confirm()
        await worker.frontier.done(worker.request)
        stored = await worker.redis.hlen("eclaw:towns:items")
    assert waited < 5, waited  # not the 10 s the items would keep coming (an fsync'd write takes ms)
    assert stored == n + 1
