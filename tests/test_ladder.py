"""The escalation ladder on a town of three hosts (tests/laddersite.py): the walled library moves to
the impersonating client, the script-built agenda to the browser, the plain news site stays plain;
moves are events in the trace and the report, costs per fetcher in the stats; hosts drift back down
when quiet; rungs are saved with --state and shared through a real Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eclaw import ConfigError, Engine, Request, Response, Settings, Spider
from eclaw.fetchers.browser import find_chromium
from eclaw.fetchers.rungs import Rungs
from eclaw.middlewares import Ladder
from eclaw.observe.report import read_trace, render_report
from eclaw.testing import collect, serve
from tests.cluster.servers import redis_server
from tests.conftest import assert_accounted
from tests.laddersite import BOOKS, EVENTS, NEWS, Town

FULL = "plain,impersonate,browser"


@asynccontextmanager
async def town(site: Town) -> AsyncIterator[dict[str, str]]:
    async with AsyncExitStack() as stack:
        yield {
            "library": await stack.enter_async_context(serve(site.library(), host="127.0.0.2")),
            "events": await stack.enter_async_context(serve(site.events(), host="127.0.0.3")),
            "news": await stack.enter_async_context(serve(site.news(), host="127.0.0.4")),
        }


class TownSpider(Spider):
    name = "town"
    expect_items = ("parse_book", "parse_event", "parse_story", "parse_agenda")

    def __init__(self, sites: dict[str, str] | None = None, only: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sites, self.only = sites or {}, only

    async def start_requests(self) -> AsyncIterator[Request]:
        starts = [("library", "/", self.parse), ("events", "/events", self.parse_agenda), ("news", "/", self.parse)]
        for name, path, callback in starts:
            if not self.only or name == self.only:
                yield Request(self.sites[name] + path, callback=callback)

    def parse(self, response: Response) -> Iterator[Any]:
        yield from response.follow_all(css="a.book", callback=self.parse_book)
        yield from response.follow_all(css="a.story", callback=self.parse_story)

    def parse_agenda(self, response: Response) -> Iterator[Any]:
        links = response.css("a.event")
        if links:
            yield {"kind": "agenda", "events": len(links)}
        yield from response.follow_all(links, callback=self.parse_event)

    def parse_book(self, response: Response) -> Iterator[dict[str, str]]:
        yield {"kind": "book", "title": response.css(".title::text").get("")}

    def parse_event(self, response: Response) -> Iterator[dict[str, str]]:
        title = response.css(".title::text").get()
        if title:
            yield {"kind": "event", "title": title, "when": response.css(".when::text").get("")}

    def parse_story(self, response: Response) -> Iterator[dict[str, str]]:
        title = response.css(".title::text").get()
        if title:
            yield {"kind": "story", "title": title}


def kinds(items: list[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item["kind"]] = counts.get(item["kind"], 0) + 1
    return counts


@pytest.fixture(scope="module", autouse=True)
def _chromium() -> None:
    find_chromium("")  # a clear failure when the system Chromium is missing (make test installs it)


async def test_each_host_climbs_to_the_fetcher_it_needs_and_no_higher(tmp_path: Path) -> None:
    site = Town()
    trace = tmp_path / "trace.jsonl"
    async with town(site) as sites:
        settings = Settings(ladder=FULL, trace=str(trace), retries=0)
        items, stats = await collect(TownSpider, engine=Engine(settings), sites=sites)
    assert kinds(items) == {"book": BOOKS, "agenda": 1, "event": EVENTS, "story": NEWS}
    assert {i["title"] for i in items if i["kind"] == "book"} >= {"Livre n°3 — café crème"}  # cp1252 through curl
    assert stats.requests_failed == 0
    assert_accounted(stats)
    # the library: one challenge, then the impersonating client for the whole host
    assert site.hits["library plain"] == 1 and site.hits["library chrome"] == BOOKS + 1
    # the agenda's script-built pages: each rendered by the browser once (its script calls the API once),
    # and the host climbed plain -> impersonate -> browser as its pages kept coming empty
    assert site.hits["events api"] == EVENTS + 1
    assert site.hits["events plain"] <= EVENTS + 1
    # the news: the one script-written story climbed alone (plain, impersonate, browser); the host stayed plain
    assert site.hits["news plain"] == NEWS + 1 and site.hits["news chrome"] == 2
    counters = stats.counters
    assert counters["fetcher browser pages"] == EVENTS + 1 + 1
    assert counters["fetcher plain banned"] == 1 and counters["fetcher plain empty"] >= 2
    assert counters["fetcher browser cpu ms"] > counters["fetcher plain cpu ms"] > 0  # Chromium's CPU counted
    records = read_trace(trace)
    moves = [(r["host"], r["previous"], r["fetcher"], r["reason"]) for r in records if r["event"] == "FetcherChanged"]
    assert [m[:3] for m in sorted(moves)] == [
        ("127.0.0.2", "plain", "impersonate"),
        ("127.0.0.3", "impersonate", "browser"),
        ("127.0.0.3", "plain", "impersonate"),
    ]
    assert moves[0][3] == "http 403 with a challenge" or "http 403 with a challenge" in {m[3] for m in moves}
    assert all(m[3].startswith("no items on ") for m in moves if m[0] == "127.0.0.3")
    fetched = {(r["url"].split("/")[2], r.get("fetcher")) for r in records if r["event"] == "ResponseDownloaded"}
    assert ("127.0.0.4:" in str(fetched)) and {f for h, f in fetched if h.startswith("127.0.0.4")} == {
        "plain",
        "impersonate",
        "browser",
    }
    html = render_report(records)
    assert "Pages per fetcher" in html and "127.0.0.3" in html and "plain &rarr; impersonate" in html
    assert "CPU seconds per fetcher" in html and ">browser<" in html
    closed = next(r for r in records if r["event"] == "SpiderClosed")
    assert closed["fetchers"]["fetcher browser pages"] == EVENTS + 2  # the stats, in the trace for the report


def walled(status: int, marker: bool) -> web.Application:
    """Any client but Chrome gets ``status``, with a challenge page or a plain notice; Chrome gets the page."""

    async def page(request: web.Request) -> web.Response:
        if "sec-ch-ua" in request.headers:
            return web.Response(text="<html><h2 class='title'>Brève 1</h2></html>", content_type="text/html")
        text = "<title>Attention Required!</title><div>captcha</div>" if marker else "<p>Forbidden for everyone</p>"
        return web.Response(text=text, status=status, content_type="text/html")

    app = web.Application()
    app.router.add_get("/story/1", page)
    return app


@pytest.mark.parametrize(("status", "marker", "moved"), [(403, True, True), (429, True, True), (503, True, True),
                                                         (403, False, False), (404, True, False)])  # fmt: skip
async def test_a_ban_status_with_a_challenge_moves_the_host_and_a_plain_error_does_not(
    status: int, marker: bool, moved: bool
) -> None:
    class One(TownSpider):
        async def start_requests(self) -> AsyncIterator[Request]:
            yield Request(self.sites["news"] + "/story/1", callback=self.parse_story)

    async with serve(walled(status, marker), host="127.0.0.5") as base:
        settings = Settings(ladder="plain,impersonate", retries=0)
        items, stats = await collect(One, engine=Engine(settings), sites={"news": base})
    assert (kinds(items) == {"story": 1}) is moved
    assert stats.counters["fetcher changes"] == int(moved)
    assert stats.failed_by_reason == ({} if moved else {f"http {status}": 1})


async def test_a_quiet_host_drifts_down_and_one_banned_again_stays_up_longer() -> None:
    now = [1000.0]
    rungs = Rungs(("plain", "impersonate", "browser"), 60, lambda host: 0, clock=lambda: now[0])
    assert rungs.escalate("a.test", 0, "http 403")[0] == 1
    assert rungs.escalate("a.test", 0, "a request sent before the move")[1] is None  # moved once, not twice
    assert rungs.escalate("a.test", 1, "no items")[0] == 2
    now[0] += 59
    assert rungs.current("a.test") == (2, None)
    now[0] += 1
    rung, change = rungs.current("a.test")
    assert rung == 1 and change is not None and change.reason == "quiet for 60 s"
    assert rungs.escalate("a.test", 1, "http 403")[0] == 2  # banned on the rung it came down to
    now[0] += 60
    assert rungs.current("a.test")[0] == 2  # its quiet period doubled
    now[0] += 60
    assert rungs.current("a.test")[0] == 1
    assert rungs.escalate("b.test", 2, "top")[0] == 2  # nowhere higher: stays
    now[0] += 10_000
    assert rungs.current("a.test")[0] == 0 and len(rungs) == 1  # down on its base rung, still remembered
    now[0] += 121
    assert rungs.current("a.test") == (0, None) and len(rungs) == 0  # quiet there too: forgotten


async def test_the_wall_lifted_the_library_comes_back_to_the_plain_client(tmp_path: Path) -> None:
    site = Town(wall_until=1)
    async with town(site) as sites:
        settings = Settings(ladder="plain,impersonate", ladder_quiet=0.2, concurrency=1, download_delay=0.05)
        items, stats = await collect(TownSpider, engine=Engine(settings), sites=sites, only="library")
    assert kinds(items) == {"book": BOOKS}
    assert site.hits["library plain"] > 1  # back on the plain client once the quiet period passed
    assert stats.counters["fetcher changes"] >= 2


async def test_rungs_are_saved_with_the_crawl_and_come_back_on_resume(tmp_path: Path) -> None:
    site = Town()
    state = tmp_path / "state"
    async with town(site) as sites:
        first = Settings(ladder="plain,impersonate", state_dir=str(state), max_pages=3, concurrency=1)
        before, _ = await collect(TownSpider, engine=Engine(first), sites=sites, only="library")
        plain_before = site.hits["library plain"]
        second = Settings(ladder="plain,impersonate", state_dir=str(state), concurrency=1)
        items, stats = await collect(TownSpider, engine=Engine(second), sites=sites, only="library")
    assert plain_before == 1 and site.hits["library plain"] == 1  # the resumed crawl started on its rung
    # the stats come back with the crawl: the first run's one move, the resumed run's none
    assert stats.counters["fetcher changes"] == 1 and stats.counters["fetcher plain pages"] == 1
    titles = sorted(item["title"] for item in [*before, *items])
    assert len(before) > 0 and len(items) > 0 and len(titles) == len(set(titles)) == BOOKS  # each book once


async def test_rungs_are_shared_by_the_workers_of_a_redis_crawl(tmp_path: Path) -> None:
    from eclaw.cluster.rungs import SharedRungs

    one = Rungs(("plain", "impersonate"), 300, lambda host: 0)
    two = Rungs(("plain", "impersonate"), 300, lambda host: 0)
    with redis_server(tmp_path) as redis:
        first, second = SharedRungs(redis.url, "town", one), SharedRungs(redis.url, "town", two)
        await first.open()
        await second.open()
        try:
            one.escalate("127.0.0.2", 0, "http 403")
            await first.sync()
            await second.sync()
            assert two.current("127.0.0.2")[0] == 1  # the other worker fetches it with curl now
        finally:
            await first.close()
            await second.close()


async def test_a_host_one_worker_moved_is_fetched_higher_by_the_next_worker(tmp_path: Path) -> None:
    site = Town()
    async with town(site) as sites:
        with redis_server(tmp_path) as redis:
            shared = {"ladder": "plain,impersonate", "frontier_url": redis.url, "concurrency": 1, "store": ""}
            first = Engine(Settings(**shared, max_pages=3))  # type: ignore[arg-type]
            _, one = await collect(TownSpider, engine=first, sites=sites, only="library")
            _, two = await collect(TownSpider, engine=Engine(Settings(**shared)), sites=sites, only="library")  # type: ignore[arg-type]
    assert one.counters["fetcher changes"] == 1 and one.counters["fetcher plain pages"] == 1
    # the second worker took the library's rung from Redis: no challenge, not one plain fetch
    assert two.counters["fetcher changes"] == 0 and two.counters["fetcher plain pages"] == 0
    assert two.counters["fetcher impersonate pages"] > 0 and site.hits["library plain"] == 1
    assert site.challenges == 1


async def test_requests_that_name_their_fetcher_and_bad_ladders(tmp_path: Path) -> None:
    site = Town()
    async with town(site) as sites:

        class Named(TownSpider):
            async def start_requests(self) -> AsyncIterator[Request]:
                yield Request(sites["library"] + "/", meta={"fetcher": "plain"})

        _, stats = await collect(Named, engine=Engine(Settings(ladder=FULL, retries=0)))
    assert stats.failed_by_reason == {"http 403": 1} and site.hits["library chrome"] == 0
    for ladder, message in [
        ("plain", "two fetchers or more"),
        ("plain,warp", "no fetcher 'warp'"),
        ("plain,plain", "twice"),
    ]:
        with pytest.raises(ConfigError, match=message):
            Ladder(ladder.split(","))
    with pytest.raises(ConfigError, match="ladder_ban_pattern"):
        Settings(ladder_ban_pattern="(")


async def test_the_spiders_own_ban_check_moves_the_host(tmp_path: Path) -> None:
    site = Town()

    class Picky(TownSpider):
        def is_banned(self, response: Response) -> bool:
            return "Brève" in response.text and response.meta.get("rung") == "plain"

    async with town(site) as sites:
        items, stats = await collect(
            Picky, engine=Engine(Settings(ladder="plain,impersonate")), sites=sites, only="news"
        )
    assert kinds(items) == {"story": NEWS - 1} and site.hits["news plain"] == 1
    assert stats.counters["fetcher plain banned"] == 1
    # the script-written story is empty on the top rung too: it fails, named, instead of looping
    assert stats.failed_by_reason == {"no items": 1} and stats.counters["fetcher impersonate empty"] == 1
