"""Callbacks slower than the downloads: a crawl stops starting downloads while 4 x concurrency of
them still wait for their callback, so the responses it holds stay bounded, and every page is
still parsed once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from eclaw import Response, Settings, Spider
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted

PAGES, FANOUT, CONCURRENCY = 400, 9, 4


def feed() -> web.Application:
    """A JSON API unlike the demo shop: each record names its children by id, answered at once."""

    async def record(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        children = list(range(n * FANOUT + 1, min(n * FANOUT + FANOUT + 1, PAGES)))
        body = {"id": n, "title": f"Eintrag Nr. {n} — Größe {n % 17}", "children": children}
        return web.Response(text=json.dumps(body, ensure_ascii=False), content_type="application/json")

    app = web.Application()
    app.router.add_get("/api/records/{n}", record)
    return app


class Enriching(Spider):
    """Each record waits 0.1 s on a slow service (an awaited call) before its item is yielded."""

    name = "enriching"
    running = peak = 0

    async def parse(self, response: Response) -> Any:
        record = response.json()
        cls = type(self)
        cls.running += 1
        cls.peak = max(cls.peak, cls.running)
        try:
            await asyncio.sleep(0.1)
        finally:
            cls.running -= 1
        yield {"id": record["id"], "title": record["title"]}
        for child in record["children"]:
            yield response.follow(f"/api/records/{child}")


async def test_slow_callbacks_hold_back_the_downloads() -> None:
    async with serve(feed()) as base:
        settings = Settings(concurrency=CONCURRENCY, concurrency_per_domain=CONCURRENCY)
        items, stats = await collect(Enriching, settings=settings, start_urls=[base + "/api/records/0"])
    assert sorted(item["id"] for item in items) == list(range(PAGES))
    assert {item["title"] for item in items if item["id"] == 5} == {"Eintrag Nr. 5 — Größe 5"}
    assert_accounted(stats)
    # downloads end at once and callbacks take 0.1 s: without a bound every page downloaded would
    # wait for its callback at the same time; with it, at most 4 x concurrency wait (the rest download)
    assert CONCURRENCY < Enriching.peak <= 5 * CONCURRENCY, Enriching.peak
