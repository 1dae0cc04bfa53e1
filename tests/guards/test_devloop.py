"""Guards of docs/devloop.md, record and replay: a replay is offline (a request the recording lacks
fails as ``cache miss``, counted, and shows as a request added, not as the spider's failure); it names
a field whose type changed, a callback that now raises, and an item changed by key, not removed and added."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web

from eclaw import Engine, Response, Settings, Spider
from eclaw.devloop import Recorder, replay
from eclaw.testing import serve

SHELF = '<a class="b" href="/b/1">Candide</a><a class="b" href="/b/2">Zadig</a>'
BOOKS = {"1": ("Candide", "7.50"), "2": ("Zadig", "6.00")}


def bookshop() -> web.Application:
    async def shelf(request: web.Request) -> web.Response:
        return web.Response(text=SHELF, content_type="text/html")

    async def book(request: web.Request) -> web.Response:
        title, price = BOOKS[request.match_info["n"]]
        return web.Response(text=f'<h1>{title}</h1><p class="price">{price}</p>', content_type="text/html")

    app = web.Application()
    app.router.add_get("/", shelf)
    app.router.add_get("/b/{n}", book)
    return app


class Books(Spider):
    name = "books"
    item_key = ("title",)

    def parse(self, response: Response) -> Any:
        yield from response.follow_all(css="a.b", callback=self.parse_book)

    def parse_book(self, response: Response) -> Any:
        yield {"title": response.css("h1::text").get(), "price": float(response.css(".price::text").get(""))}


class Changed(Books):
    def parse(self, response: Response) -> Any:
        yield from super().parse(response)
        yield response.follow("/b/3", callback=self.parse_book)  # never recorded

    def parse_book(self, response: Response) -> Any:
        title = response.css("h1::text").get()
        if title == "Zadig":
            raise ValueError("no price today")
        yield {"title": title, "price": response.css(".price::text").get()}  # a str now


async def test_a_replay_is_offline_and_names_each_kind_of_change(tmp_path: Path) -> None:
    async with serve(bookshop()) as base:
        recorder = Recorder(tmp_path / "rec")
        engine = Engine(Settings(store="", snapshots=""), middlewares=recorder.middlewares())
        recorder.attach(engine)
        async with engine:
            stats = await engine.crawl(Books, start_urls=[base + "/"])
        recorder.save("books", stats, args={"start_urls": [base + "/"]})
    # the site is gone
    same = await replay(Books, tmp_path / "rec", settings=Settings(snapshots=""))
    assert same.diff.empty and same.diff.same == 2 and same.stats.requests_failed == 0
    outcome = await replay(Changed, tmp_path / "rec", settings=Settings(snapshots=""))
    diff = outcome.diff
    assert diff.changed == [("dict[Candide]", [("price", 7.5, "7.50")])]  # by key: changed, not removed + added
    assert [identity for identity, _ in diff.removed] == ["dict[Zadig]"] and diff.added == []
    assert [(method, url) for _, method, url in diff.requests_added] == [("GET", base + "/b/3")]
    assert any("field 'price' type" in line for line in diff.quality), diff.quality
    assert [line.split(":")[0] for line in diff.failures] == ["callback error"], diff.failures
    assert outcome.stats.failed_by_reason.get("cache miss") == 1 and outcome.stats.counters["cache miss"] == 1
