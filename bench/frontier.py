"""How much memory a crawl needs to discover N URLs: the frontier past its window waits on disk.

    python -m bench.frontier [--urls 1000000] [--frontier-memory 50000] [--state DIR]

A local site (in its own process) of list pages in 64 parallel chains: each
list page links to the next list page of its chain and to 20 new leaf URLs on
another host name of the same server (``localhost``), which the crawl keeps
at a politeness delay of an hour, so leaves pile up in the frontier instead
of being fetched. When every list page is parsed the crawl stops; by then it
has discovered ``--urls`` leaf URLs, all but one still pending. Reports the
crawler's peak RSS (VmHWM) and how many requests waited on disk. With
``--state`` the crawl also saves its state as it goes (every pending request
is then in the state file too).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from bench.site import app_process
from eclaw import CloseSpider, Engine, Request, Response, Settings, Spider

CHAINS, FANOUT = 64, 20


def site() -> web.Application:
    async def listing(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        leaves = f"http://localhost:{request.url.port}/leaf"
        links = "".join(f'<a class="leaf" href="{leaves}/{n * FANOUT + k}">{k}</a>' for k in range(FANOUT))
        body = f'<html><body><a class="next" href="/list/{n + CHAINS}">next</a>{links}</body></html>'
        return web.Response(text=body, content_type="text/html")

    async def leaf(request: web.Request) -> web.Response:
        return web.Response(text="<html><body>leaf</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/list/{n}", listing)
    app.router.add_get("/leaf/{n}", leaf)
    return app


class Discover(Spider):
    name = "discover"
    lists = 0
    listed = 0

    def start_requests(self) -> Any:
        for n in range(CHAINS):
            yield Request(f"{self.base}/list/{n}", self.parse_list)

    def parse_list(self, response: Response) -> Any:
        self.listed += 1
        n = int(response.url.rsplit("/", 1)[1])
        for href in response.css("a.leaf::attr(href)").getall():
            yield response.follow(href)
        if n + CHAINS < self.lists:
            yield response.follow(f"/list/{n + CHAINS}", self.parse_list)
        if self.listed >= self.lists:
            raise CloseSpider("every list page parsed")

    def parse(self, response: Response) -> Any:
        return []


class SlowLeaves:
    """A middleware that only sets a politeness delay: one leaf download an hour."""

    async def open(self, crawl: Any) -> None:
        crawl.set_delay("localhost", 3600)

    async def __call__(self, request: Request, call_next: Any) -> Response:
        return await call_next(request)  # type: ignore[no-any-return]


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def run(base: str, urls: int, frontier_memory: int, state: str = "") -> dict[str, Any]:
    settings = Settings(
        concurrency=64, concurrency_per_domain=64, frontier_memory=frontier_memory, failures="", state_dir=state
    )
    engine = Engine(settings, middlewares=[SlowLeaves()])
    started = time.perf_counter()
    async with engine:
        crawl = engine.prepare(Discover, base=base, lists=urls // FANOUT)
        stats = await engine.run_crawl(crawl)
        spilled = crawl.frontier._spill.spilled  # type: ignore[attr-defined]
    return {
        "urls_discovered": stats.requests_generated - stats.dropped_by_reason.get("duplicate", 0),
        "pages_fetched": stats.responses_downloaded,
        "pending_at_stop": stats.requests_pending,
        "spilled_to_disk": spilled,
        "seconds": round(time.perf_counter() - started, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "frontier_memory": frontier_memory,
        "state": state or "-",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--frontier-memory", type=int, default=Settings().frontier_memory)
    parser.add_argument("--state", default="", help="save the crawl's state in this (new) directory")
    parser.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        web.run_app(site(), host="127.0.0.1", port=args.serve, print=None, access_log=None)
        return
    with app_process("bench.frontier") as base:
        if args.state and Path(args.state).exists():
            raise SystemExit(f"{args.state} exists: give a new directory")
        result = asyncio.run(run(base, args.urls, args.frontier_memory, args.state))
    for key, value in result.items():
        print(f"{key:18} {value}")


if __name__ == "__main__":
    main()
