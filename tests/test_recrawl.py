"""Incremental recrawls: a re-run asks the server what changed (conditional GETs), downloads only
that, and reports per run which items are new, updated, unchanged and gone, as events too."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import web

from eclaw import Engine, Response, Settings, Spider
from eclaw.events import ItemDelta, ItemGone
from eclaw.testing import serve
from tests.conftest import assert_accounted

SHOP_SITEMAP = str(Path(__file__).resolve().parents[1] / "spiders" / "shop_sitemap.py")


class Calendar:
    """A town's events calendar: ``/`` lists the events, ``/event/N`` one event. Pages carry an
    ETag and a Last-Modified and answer conditional requests with 304; the test edits ``events``
    between two runs. ``answers[path]`` counts each status sent."""

    def __init__(self) -> None:
        self.events = {n: f"Concert n°{n} — salle des fêtes" for n in range(1, 13)}
        self.answers: Counter[tuple[str, int]] = Counter()

    def _page(self, request: web.Request, html: str) -> web.Response:
        body = html.encode("utf-8")
        etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
        status = 304 if request.headers.get("If-None-Match") == etag else 200
        self.answers[(request.path, status)] += 1
        headers = {"ETag": etag, "Last-Modified": "Mon, 30 Nov 2026 08:00:00 GMT"}
        if status == 304:
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, headers=headers, content_type="text/html", charset="utf-8")

    def app(self) -> web.Application:
        async def index(request: web.Request) -> web.Response:
            links = "".join(f'<a href="/event/{n}">{n}</a>' for n in sorted(self.events))
            return self._page(request, f"<ul>{links}</ul>")

        async def event(request: web.Request) -> web.Response:
            n = int(request.match_info["n"])
            if n not in self.events:
                raise web.HTTPNotFound()
            return self._page(request, f"<h1 data-id='{n}'>{self.events[n]}</h1>")

        app = web.Application()
        app.router.add_get("/", index)
        app.router.add_get("/event/{n}", event)
        return app


class Events(Spider):
    name = "events"
    item_key = ("id",)

    def parse(self, response: Response) -> Any:
        yield from response.follow_all(css="a", callback=self.parse_event)

    def parse_event(self, response: Response) -> Any:
        yield {"id": response.css("h1::attr(data-id)").get(), "title": response.css("h1::text").get()}


async def recrawl(base: str, store: Path) -> tuple[Any, Counter[str], list[ItemGone]]:
    engine = Engine(Settings(incremental=True, store=""), outputs=[str(store)])
    deltas: Counter[str] = Counter()
    gone: list[ItemGone] = []

    @engine.on(ItemDelta)
    async def delta(event: ItemDelta) -> None:
        deltas[type(event).__name__] += 1

    engine.subscribe(ItemGone, gone.append)  # a plain function: quick bookkeeping
    async with engine:
        stats = await engine.crawl(Events, start_urls=[base + "/"])
    assert_accounted(stats)
    return stats, deltas, gone


async def test_a_rerun_downloads_only_what_moved_and_says_what_changed(tmp_path: Path) -> None:
    site = Calendar()
    store = tmp_path / "events.sqlite"
    async with serve(site.app()) as base:
        first, deltas, _ = await recrawl(base, store)
        assert deltas == {"ItemNew": 12} and first.counters["store inserted"] == 12
        site.answers.clear()
        site.events[3] = "Concert n°3 — annulé"  # changed
        del site.events[5]  # gone
        site.events[13] = "Bal du 14 juillet"  # new
        second, deltas, gone = await recrawl(base, store)
    sent_in_full = sorted(path for (path, status), n in site.answers.items() if status == 200)
    assert sent_in_full == ["/", "/event/13", "/event/3"]  # the rest answered 304: nothing to download
    assert sum(n for (_, status), n in site.answers.items() if status == 304) == 10
    assert deltas == {"ItemNew": 1, "ItemUpdated": 1, "ItemUnchanged": 10}
    assert [(g.key, g.item["title"]) for g in gone] == [("5", "Concert n°5 — salle des fêtes")]
    counters = {name: second.counters[f"store {name}"] for name in ("inserted", "updated", "unchanged", "gone")}
    assert counters == {"inserted": 1, "updated": 1, "unchanged": 10, "gone": 1}
    assert second.counters["cache revalidated"] == 10 and second.items_stored == 12


async def test_an_incremental_sitemap_crawl_skips_what_did_not_move_since_the_last_run(tmp_path: Path) -> None:
    from eclaw.demo.site import make_app
    from eclaw.spider import load_spider

    spider = load_spider(SHOP_SITEMAP)
    fetched: Counter[str] = Counter()

    @web.middleware
    async def count(request: web.Request, handler: Any) -> Any:
        fetched[request.path.split("/")[1]] += 1
        return await handler(request)

    app = make_app()
    app.middlewares.append(count)
    settings = Settings(incremental=True, store=str(tmp_path / "{spider}.sqlite"))
    products = []
    async with serve(app) as base:
        for _ in range(2):
            fetched.clear()
            async with Engine(settings, store=settings.store, outputs=[settings.store]) as engine:
                stats = await engine.crawl(spider, base_url=base)
            assert_accounted(stats)
            products.append(fetched["product"])
    assert products == [500, 0]  # every product's lastmod is older than the first run: none fetched again
    assert stats.finish_reason == "finished"
