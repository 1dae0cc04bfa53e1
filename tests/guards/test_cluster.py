"""Guards of docs/cluster.md, "politeness for the whole cluster": a host's delay (``download_delay``,
or its own ``host_delay``) is held across the workers of a Redis crawl, not per worker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp import web

from eclaw.testing import serve
from tests.cluster.servers import SPIDER, redis_server
from tests.cluster.test_cluster import eclaw, ended, stored_items
from tests.conftest import assert_spaced

PAGES = 20
# the cluster tests' spider, each item naming the worker process that parsed it
SPIDER_PID = SPIDER.replace("from eclaw import Spider", "import os\nfrom eclaw import Spider").replace(
    '"page": int(response.css("h1::text").get())', '"page": int(response.css("h1::text").get()), "pid": os.getpid()'
)


def timed_site(hits: list[float]) -> web.Application:
    """Pages 0..PAGES-1 (page 0 links every other one, so each worker has some to take); ``hits`` gets
    the loop time each page was asked for."""

    async def page(request: web.Request) -> web.Response:
        hits.append(asyncio.get_running_loop().time())
        n = int(request.match_info["n"])
        links = "".join(f'<a href="/p/{m}">{m}</a>' for m in range(1, PAGES)) if n == 0 else ""
        return web.Response(text=f"<html><h1>{n}</h1>{links}</html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/p/{n}", page)
    return app


@pytest.mark.parametrize("delay", ["download_delay=0.2", "host_delay=127.0.0.1=0.2"])
async def test_a_hosts_delay_holds_across_two_redis_workers(tmp_path: Path, delay: str) -> None:
    hits: list[float] = []
    (tmp_path / "pages.py").write_text(SPIDER_PID)
    async with serve(timed_site(hits)) as base:
        with redis_server(tmp_path) as server:
            spider = [str(tmp_path / "pages.py"), "-a", f"base_url={base}", "--redis", server.url]
            settings = ["-s", "concurrency=4", "-s", "concurrency_per_domain=4", "-s", delay]
            await ended(await eclaw(tmp_path, "seed", *spider))
            workers = [await eclaw(tmp_path, "worker", *spider, *settings) for _ in range(2)]
            for worker in workers:
                await ended(worker)
            items = await stored_items(server, "pages")
    assert sorted(item["page"] for item in items) == list(range(PAGES))  # type: ignore[type-var]
    assert len(hits) == PAGES
    assert len({item["pid"] for item in items}) == 2  # both workers crawled: the delay is the cluster's
    assert_spaced(sorted(hits), 0.2)  # one download start per 0.2 s, whichever worker made it
