"""A long list of start URLs is fed lazily, but the links its first pages find do not hold the rest back:
the feed runs a bounded number of requests ahead of the crawl, not of the frontier."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from eclaw import Request, Response, Settings, Spider
from eclaw.testing import collect, serve

SEEDS = 1200  # past the feed's lead at concurrency 1 (1,000 requests)
LEAVES = 2  # new links on each seed's page


def catalogue() -> tuple[web.Application, list[str]]:
    """Seed pages in windows-1251 (Cyrillic text), each linking to two leaves; the paths in the order asked."""
    asked: list[str] = []

    async def seed(request: web.Request) -> web.Response:
        asked.append(request.path)
        n = request.match_info["n"]
        links = "".join(f'<a href="/leaf/{n}/{k}">лист {k}</a>' for k in range(LEAVES))
        body = f"<html><head><title>Семя {n}</title></head><body>{links}</body></html>"
        return web.Response(body=body.encode("cp1251"), content_type="text/html", charset="windows-1251")

    async def leaf(request: web.Request) -> web.Response:
        asked.append(request.path)
        return web.Response(text="leaf", content_type="text/plain")

    app = web.Application()
    app.router.add_get("/seed/{n}", seed)
    app.router.add_get("/leaf/{n}/{k}", leaf)
    return app, asked


class Seeds(Spider):
    name = "seeds"
    base = ""

    async def start_requests(self) -> Any:
        for n in range(SEEDS):
            yield Request(f"{self.base}/seed/{n}")

    def parse(self, response: Response) -> Any:
        if "/seed/" in response.url:
            yield {"title": response.css("title::text").get()}
            yield from response.follow_all(css="a")


async def test_start_urls_are_not_starved_by_the_links_of_the_first_pages() -> None:
    app, asked = catalogue()
    async with serve(app) as base:
        items, stats = await collect(Seeds, settings=Settings(concurrency=1, concurrency_per_domain=1), base=base)
    assert stats.requests_parsed == SEEDS * (1 + LEAVES)
    assert sorted(int(item["title"].split()[1]) for item in items) == list(range(SEEDS))
    assert items[0]["title"] == "Семя 0"
    seeds = [i for i, path in enumerate(asked) if path.startswith("/seed/")]
    # Held back until the frontier was half empty, the last 200 seeds came after most leaves (the last
    # one 3,204th of 3,600); fed as the crawl goes, they come after the leaves found by then (2,204th).
    assert seeds[-1] < 0.8 * len(asked), (seeds[-1], len(asked))
