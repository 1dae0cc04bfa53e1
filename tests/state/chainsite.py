"""A site unlike the shop for ``--processes``: one long chain of small Latin-1 pages, each linking to
the next and, through a redirect, to the one after it (so every page is also reached by a redirect
that may lead into another process's part). The server counts the requests in flight at once."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from eclaw import Response, Spider

PAGES = 240


class Counter:
    def __init__(self) -> None:
        self.now = self.most = 0


def make_app(delay: float = 0.0) -> web.Application:
    counter = Counter()

    async def page(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        counter.now += 1
        counter.most = max(counter.most, counter.now)
        try:
            await asyncio.sleep(delay)
        finally:
            counter.now -= 1
        hrefs = [f"/c/{n + 1}"] * (n + 1 < PAGES) + [f"/go/{n + 2}"] * (n + 2 < PAGES)
        links = "".join(f'<a href="{href}">suite</a>' for href in hrefs)
        body = f"<html><head><title>Café n°{n}</title></head><body><h1>{n}</h1>{links}</body></html>"
        return web.Response(body=body.encode("latin-1"), content_type="text/html", charset="iso-8859-1")

    async def go(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"/c/{request.match_info['n']}")

    async def most(request: web.Request) -> web.Response:
        return web.Response(text=str(counter.most))

    app = web.Application()
    app.router.add_get("/c/{n}", page)
    app.router.add_get("/go/{n}", go)
    app.router.add_get("/most", most)
    return app


class ChainSpider(Spider):
    name = "chain"

    def __init__(self, base_url: str = "http://127.0.0.1:1", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{base_url}/c/0"]

    def parse(self, response: Response) -> Any:
        yield {"n": int(response.css("h1::text").get()), "title": response.css("title::text").get()}
        yield from response.follow_all(css="a")
