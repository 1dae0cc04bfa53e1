"""``max_pages`` is a promise: a crawl of a site of hundreds of pages, 16 downloads at a time, makes at
most ``max_pages`` page requests to the server (retries included), stops with ``max pages`` and keeps
every request it did not start, for a resume with a fresh budget; on two processes the budget is the
whole crawl's."""

from __future__ import annotations

import asyncio
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import web

from eclaw import Engine, Response, Settings, Spider
from eclaw.middlewares import Retry
from eclaw.testing import serve
from tests.conftest import assert_accounted
from tests.forkserver import PIPE, spawn
from tests.inprocess import eclaw_inprocess

ROOT = Path(__file__).resolve().parents[1]
SPIDER = f"{Path(__file__).resolve()}:Maze"


class Warren:
    """``/p/N`` (N < ``pages``) links ``/p/3N+1`` .. ``/p/3N+3`` and answers after ``delay`` seconds; pages
    with N % 5 == ``broken`` answer 503 every time. Every request is counted by path, robots.txt apart."""

    def __init__(self, pages: int = 400, delay: float = 0.02, broken: int = -1) -> None:
        self.pages, self.delay, self.broken = pages, delay, broken
        self.hits: Counter[str] = Counter()
        self.robots = 0

    def app(self) -> web.Application:
        async def page(request: web.Request) -> web.Response:
            n = int(request.match_info["n"])
            self.hits[request.path] += 1
            await asyncio.sleep(self.delay)
            if n % 5 == self.broken:
                return web.Response(status=503, text="busy")
            links = "".join(f"<a href='/p/{m}'>{m}</a>" for m in range(3 * n + 1, 3 * n + 4) if m < self.pages)
            return web.Response(text=f"<h1>{n}</h1>{links}", content_type="text/html")

        async def robots(request: web.Request) -> web.Response:
            self.robots += 1
            return web.Response(text="User-agent: *\nAllow: /\n")

        app = web.Application()
        app.router.add_get("/p/{n}", page)
        app.router.add_get("/robots.txt", robots)
        return app

    @property
    def fetched(self) -> int:
        return sum(self.hits.values())


class Maze(Spider):
    name = "maze"

    def parse(self, response: Response) -> Any:
        yield {"page": response.css("h1::text").get()}
        yield from response.follow_all(css="a")


async def test_max_pages_starts_no_download_past_the_budget() -> None:
    site = Warren()
    settings = Settings(store="", concurrency=16, max_pages=25, obey_robots=True)
    async with serve(site.app()) as base, Engine(settings) as engine:
        stats = await engine.crawl(Maze, start_urls=[base + "/p/0"])
    assert_accounted(stats)
    assert site.fetched <= 25 and max(site.hits.values()) == 1  # before: 25 parsed, 16 more in flight
    assert stats.finish_reason == "max pages" and stats.requests_pending > 0  # the rest kept, not lost
    assert stats.requests_parsed == site.fetched  # what was under way at the stop was finished and parsed


async def test_a_retry_is_a_download_of_the_budget() -> None:
    site = Warren(broken=1)  # /p/1, /p/6, ... answer 503: each attempt reaches the server
    settings = Settings(store="", concurrency=16, max_pages=25)
    async with serve(site.app()) as base, Engine(settings, middlewares=[Retry(2, base=0)]) as engine:
        stats = await engine.crawl(Maze, start_urls=[base + "/p/0"])
    assert_accounted(stats)
    assert stats.retries > 0 and max(site.hits.values()) > 1  # retried within the budget
    assert site.fetched <= 25 and stats.finish_reason == "max pages"


def crawl_args(base: str, *extra: str) -> list[str]:
    """The arguments of ``eclaw crawl`` of the maze at ``base``, 16 downloads at a time, 25 pages at most."""
    return ["crawl", SPIDER, "-a", f"start_urls={base}/p/0", "-s", "store=",
            "-s", "concurrency=16", "-s", "max_pages=25", "--log-level", "WARNING", *extra]  # fmt: skip


async def cli_crawl(base: str, tmp: Path, *extra: str) -> tuple[int, str, str]:
    """``eclaw crawl`` of the maze as a user runs it, a process of its own (for a crawl that forks its
    processes), forked from the fork server (tests/forkserver.py) rather than a new Python: exit code,
    stdout, stderr."""
    process = await spawn(
        *crawl_args(base, *extra), cwd=tmp, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=PIPE, stderr=PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(process.communicate(), 180)
    finally:
        process.close()  # still running (it timed out): killed with its session by the fork server
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_budget_with_state_pauses_and_the_resume_fetches_the_next_pages(tmp_path: Path) -> None:
    site = Warren()
    async with serve(site.app()) as base:
        # the command run in this process (in tmp_path, the test's working directory)
        first = await eclaw_inprocess(*crawl_args(base, "--state", "saved", "-o", "first.jsonl"))
        before = Counter(site.hits)
        second = await eclaw_inprocess(*crawl_args(base, "--state", "saved", "-o", "second.jsonl"))
    for code, out, err in (first, second):
        assert code == 0 and re.search(r"finish reason\s+max pages", out), out + err
    again = site.hits - before
    assert sum(before.values()) <= 25 and 0 < sum(again.values()) <= 25  # a fresh budget for the resume
    assert not before.keys() & again.keys() and max(site.hits.values()) == 1  # nothing fetched twice


async def test_on_two_processes_the_budget_is_the_whole_crawls(tmp_path: Path) -> None:
    site = Warren()
    async with serve(site.app()) as base:
        code, out, err = await cli_crawl(base, tmp_path, "--processes", "2", "-o", "items.jsonl")
        small = await eclaw_inprocess(*crawl_args(base, "--processes", "2", "-s", "max_pages=1"))  # forks nothing
    assert code == 0 and re.search(r"finish reason\s+max pages", out), out + err
    assert site.fetched <= 25 and max(site.hits.values()) == 1  # before: 13 a process, up to 41 in all
    assert small[0] == 2 and small[2].strip().splitlines() == [
        "eclaw: error: max_pages=1 is less than --processes 2: each process needs a page"
    ]
