"""Guards of docs/control.md: each budget counts what its table says (requests failed for good, not
their attempts; time since the last item stored, not since the start), and a host's delay is a floor
the autothrottle never goes under."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from eclaw import Response, Settings, Spider
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, assert_spaced


class Ledger(Spider):
    """Follows every link; each ``/entry/N`` page is one item."""

    name = "ledger"

    def parse(self, response: Response) -> Any:
        if response.css("h1"):
            yield {"entry": response.css("h1::text").get()}
        yield from response.follow_all(css="a")


def ledger(entries: int, *, broken: bool = False, slow: float = 0.0) -> tuple[web.Application, list[float]]:
    """``/`` links ``/entry/0`` ... (503 every time when ``broken``); each entry links the next and takes
    ``slow`` seconds. The list gets the loop time of each hit."""
    hits: list[float] = []

    async def index(request: web.Request) -> web.Response:
        links = "".join(f"<a href='/entry/{n}'>{n}</a>" for n in range(entries))
        return web.Response(text=links if broken else "<a href='/entry/0'>0</a>", content_type="text/html")

    async def entry(request: web.Request) -> web.Response:
        hits.append(asyncio.get_running_loop().time())
        await asyncio.sleep(slow)
        if broken:
            return web.Response(status=503, text="down for maintenance")
        n = int(request.match_info["n"])
        follow = f"<a href='/entry/{n + 1}'>next</a>" if n + 1 < entries else ""
        return web.Response(text=f"<h1>{n}</h1>{follow}", content_type="text/html")

    app = web.Application()
    app.router.add_get("/", index)
    app.router.add_get("/entry/{n}", entry)
    return app, hits


async def test_max_errors_counts_requests_failed_for_good_not_their_retried_attempts() -> None:
    app, hits = ledger(12, broken=True)
    async with serve(app) as base:
        _, stats = await collect(
            Ledger, settings=Settings(store="", retries=2, max_errors=3, concurrency=1), start_urls=[base + "/"]
        )
    assert_accounted(stats)
    # three requests failed for good, each after its 3 attempts: 9 attempts at least, never 3
    assert stats.finish_reason == "max errors"
    assert 3 <= stats.requests_failed <= 4 and stats.failed_by_reason.get("http 503", 0) == stats.requests_failed
    assert stats.retries >= 2 * stats.requests_failed and len(hits) >= 9
    assert stats.requests_pending > 0  # stopped early: the rest counted, not lost


async def test_max_idle_items_seconds_is_reset_by_every_new_item() -> None:
    # 10 entries of 0.3 s each: the crawl lasts 3 s or more, and an item comes every 0.3 s
    app, _ = ledger(10, slow=0.3)
    async with serve(app) as base:
        items, stats = await collect(
            Ledger, settings=Settings(store="", concurrency=1, max_idle_items_seconds=1.5), start_urls=[base + "/"]
        )
    assert stats.finish_reason == "finished" and len(items) == 10
    assert_accounted(stats)


async def test_a_hosts_delay_is_a_floor_under_the_autothrottle() -> None:
    app, hits = ledger(8)
    async with serve(app) as base:
        settings = Settings(store="", autothrottle=True, host_delay="127.0.0.1=0.2", concurrency=4)
        items, stats = await collect(Ledger, settings=settings, start_urls=[base + "/"])
    assert len(items) == 8 and stats.requests_failed == 0
    assert_spaced(sorted(hits), 0.2)
