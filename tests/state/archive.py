"""A record archive and its spiders, for the resume promises (the spiders also run from the CLI).

Unlike the shop and the state site, the archive is a two-level catalogue in
windows-1252 (declared only in ``<meta>``): shelves ``/shelf/N`` list their
records ``/record/N-K`` and link to the next shelf. Its owner can change it
between two runs, as a real site changes while a crawl is paused or dead:

- ``long``: records carry a long text (several KB); when off, a few words;
- ``withdrawn``: odd-numbered records answer 404;
- ``slow``: the last record takes this many seconds (so the store, which
  commits a batch a second, commits every record before the crawl goes on);
- ``hang``: ``/hang`` (linked from the last shelf) never answers, so a test
  kills the crawl at a known point: every record done, nothing more to come.

Every path counts its hits.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from aiohttp import web

from eclaw import Response, Spider

SHELVES = 4
PER_SHELF = 6
LOREM = "Über die Brücke, à la carte — naïve façade, déjà vu; "


def records() -> list[str]:
    return [f"{n}-{k}" for n in range(SHELVES) for k in range(PER_SHELF)]


class Archive:
    def __init__(self, *, shelves: int = SHELVES, per_shelf: int = PER_SHELF, delay: float = 0.0) -> None:
        self.shelves = shelves
        self.per_shelf = per_shelf
        self.delay = delay
        self.long = True
        self.withdrawn = False
        self.slow = 0.0
        self._released = asyncio.Event()
        self.hits: Counter[str] = Counter()

    @property
    def hang(self) -> bool:
        return not self._released.is_set()

    @hang.setter
    def hang(self, value: bool) -> None:
        if value:
            self._released.clear()
        else:
            self._released.set()

    def page(self, title: str, body: str) -> web.Response:
        text = (
            '<html><head><meta charset="windows-1252"><title>'
            f"{title}</title></head><body><h1>{title}</h1>{body}</body></html>"
        )
        return web.Response(body=text.encode("cp1252"), headers={"Content-Type": "text/html"})

    async def shelf(self, request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n >= self.shelves:
            raise web.HTTPNotFound()
        links = [f"/record/{n}-{k}" for k in range(self.per_shelf)]
        links.append(f"/shelf/{n + 1}" if n + 1 < self.shelves else "/hang")
        body = "".join(f'<a href="{href}">{href}</a> ' for href in links)
        return self.page(f"Regal {n}", body)

    async def record(self, request: web.Request) -> web.Response:
        name = request.match_info["id"]
        if self.withdrawn and int(name.split("-")[1]) % 2:
            raise web.HTTPNotFound()
        if self.slow and name == f"{self.shelves - 1}-{self.per_shelf - 1}":
            await asyncio.sleep(self.slow)
        text = LOREM * 60 if self.long else "kurz"
        return self.page(f"Akte {name}", f'<p class="text">{text}</p>')

    async def hanging(self, request: web.Request) -> web.Response:
        await self._released.wait()
        return self.page("Ende", "")

    def app(self) -> web.Application:
        @web.middleware
        async def count(request: web.Request, handler: Any) -> web.StreamResponse:
            self.hits[request.path] += 1
            if self.delay:
                await asyncio.sleep(self.delay)
            return await handler(request)  # type: ignore[no-any-return]

        app = web.Application(middlewares=[count])
        app.router.add_get("/shelf/{n}", self.shelf)
        app.router.add_get("/record/{id}", self.record)
        app.router.add_get("/hang", self.hanging)
        return app


class RecordSpider(Spider):
    """Plain generator callbacks: one item per record."""

    name = "archive"
    allowed_domains = ["127.0.0.1"]
    custom_settings = {"retries": 0, "concurrency": 4}

    def __init__(self, base_url: str = "http://127.0.0.1:1", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{base_url}/shelf/0"]

    def parse(self, response: Response) -> Any:
        for href in response.css("a::attr(href)").getall():
            callback = self.parse_record if href.startswith("/record/") else self.parse
            yield response.follow(href, callback=callback)

    def parse_record(self, response: Response) -> Any:
        yield {
            "record": response.url.rsplit("/", 1)[1],
            "title": response.css("h1::text").get(),
            "text": response.css("p.text::text").get(),
        }


class AsyncRecordSpider(RecordSpider):
    """Async generator callbacks that await between their outputs: each record is three items,
    and a checkpoint may come while a callback has yielded some of them and not the rest."""

    name = "archive-async"

    async def parse(self, response: Response) -> Any:  # type: ignore[override]
        for href in response.css("a::attr(href)").getall():
            callback = self.parse_record if href.startswith("/record/") else self.parse
            yield response.follow(href, callback=callback)
            await asyncio.sleep(0.001)

    async def parse_record(self, response: Response) -> Any:  # type: ignore[override]
        record = response.url.rsplit("/", 1)[1]
        for part in range(3):
            if part:
                await asyncio.sleep(0.01)
            yield {"record": record, "part": part, "title": response.css("h1::text").get()}
