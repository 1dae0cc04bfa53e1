"""A site and a spider for the pause / resume / crash tests (the spider also runs from the CLI).

The site: pages 0..PAGES-1, each linking to six others (so every page is
reachable from page 0, most several times), and every 37th page missing (404:
it must end as a final failure, recorded once in the failures file).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from aiohttp import web

from eclaw import Request, Response, Spider

PAGES = 600


def missing(n: int) -> bool:
    return n % 37 == 5


def expected() -> tuple[set[int], set[int]]:
    """Pages that must be parsed, pages that must finally fail."""
    pages = set(range(PAGES))
    failed = {n for n in pages if missing(n)}
    return pages - failed, failed


def make_app(delay: float = 0.02) -> web.Application:
    async def page(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        await asyncio.sleep(delay)
        if missing(n) or n >= PAGES:
            raise web.HTTPNotFound()
        targets = [(n + 1) % PAGES, (n * 7 + 3) % PAGES, (n * 13 + 5) % PAGES, (n + 2) % PAGES, n, 0]
        links = "".join(f'<a href="/p/{t}#s{k}">page {t}</a>' for k, t in enumerate(targets))
        body = f"<html><head><title>page {n}</title></head><body><h1>{n}</h1>{links}</body></html>"
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/p/{n}", page)
    return app


class MarkedPipeline:
    """Writes a marker file when it begins storing the item of page ``MARK_AT`` (env
    ``STATE_TEST_MARK``), then stalls a little: a test kills the crawl in the middle of it."""

    def __init__(self) -> None:
        self.marker = os.environ.get("STATE_TEST_MARK", "")
        self.mark_at = int(os.environ.get("STATE_TEST_MARK_AT", "-1"))

    async def open(self, crawl: Any) -> None:
        return None

    async def process_item(self, item: dict[str, Any], spider: Spider) -> dict[str, Any]:
        if self.marker and item["page"] == self.mark_at:
            Path(self.marker).write_text("writing")  # noqa: ASYNC240 - a test marker, before a stall
            await asyncio.sleep(2.0)
        return item

    async def close(self) -> None:
        return None


class StateSpider(Spider):
    name = "state-site"
    allowed_domains = ["127.0.0.1"]
    custom_settings = {"retries": 0, "concurrency": 8}

    def __init__(self, base_url: str = "http://127.0.0.1:1", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url = base_url
        self.pipelines = [MarkedPipeline()]

    def start_requests(self) -> Any:
        yield Request(f"{self.base_url}/p/0", callback=self.parse_page, cb_kwargs={"origin": "start"})

    def parse_page(self, response: Response, origin: str = "link") -> Any:
        n = int(response.css("h1::text").get())
        yield {"page": n, "title": response.css("title::text").get(), "origin": origin}
        yield from response.follow_all(css="a", callback=self.parse_page)
