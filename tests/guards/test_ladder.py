"""Guards of docs/ladder.md: an empty page climbs alone, and its host follows only once its empty pages
are 3 or more *and* at least half of what it fetched on that rung since the first of them."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiohttp import web

from eclaw import Engine, Request, Response, Settings, Spider
from eclaw.events import FetcherChanged
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted

STORIES = 30
SCRIPTED = frozenset({4, 14, 24})  # written by a script: empty for any client that does not run it


def gazette(hits: Counter[str], scripted: frozenset[int]) -> web.Application:
    """A listing of ``STORIES`` stories; those in ``scripted`` are written by a script. ``hits`` counts the
    stories asked for by kind of client (``plain``, or ``chrome`` for the impersonating one)."""

    async def listing(request: web.Request) -> web.Response:
        links = "".join(f"<a class='story' href='/story/{n}'>{n}</a>" for n in range(STORIES))
        return web.Response(text=links, content_type="text/html")

    async def story(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        hits["chrome" if "sec-ch-ua" in request.headers else "plain"] += 1
        title = f"<h2 class='title'>Story {n}</h2>"
        if n in scripted:
            title = f"<script>document.write({json.dumps(title)})</script>"
        return web.Response(text=f"<html><body>{title}</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/", listing)
    app.router.add_get("/story/{n}", story)
    return app


class Gazette(Spider):
    name = "gazette"
    expect_items = ("parse_story",)

    def parse(self, response: Response) -> Iterator[Any]:
        yield from response.follow_all(css="a.story", callback=self.parse_story)

    def parse_story(self, response: Response) -> Iterator[Any]:
        title = response.css(".title::text").get()
        if title:
            yield {"title": title, "fetcher": response.meta["fetcher"]}


async def test_three_empty_pages_among_many_move_the_pages_not_the_host() -> None:
    hits: Counter[str] = Counter()
    moves: list[FetcherChanged] = []
    async with serve(gazette(hits, SCRIPTED)) as base:
        engine = Engine(Settings(ladder="plain,impersonate", retries=0, store="", concurrency=1))
        engine.subscribe(FetcherChanged, moves.append)
        items, stats = await collect(Gazette, engine=engine, start_urls=[base + "/"])
    assert_accounted(stats)
    # 3 empty pages, each among ten fetched on the plain rung: a few pages' business, not the host's
    assert moves == [] and stats.counters["fetcher changes"] == 0
    assert len(items) == STORIES - len(SCRIPTED) and {item["fetcher"] for item in items} == {"plain"}
    assert hits == {"plain": STORIES, "chrome": len(SCRIPTED)}  # each empty page fetched once more, a rung up
    assert stats.counters["fetcher plain empty"] == len(SCRIPTED)


async def test_a_host_whose_pages_all_come_empty_moves_after_three() -> None:
    hits: Counter[str] = Counter()
    async with serve(gazette(hits, frozenset(range(STORIES)))) as base:
        engine = Engine(Settings(ladder="plain,impersonate", retries=0, store="", concurrency=1))
        _, stats = await collect(Gazette, engine=engine, start_urls=[base + "/"])
    assert stats.counters["fetcher changes"] == 1
    assert hits["plain"] == 3 and hits["chrome"] == STORIES  # the third empty page moved the host


def chain(hits: list[tuple[int, str]], pattern: str) -> web.Application:
    """``/page/N`` links ``/page/N+1`` only (one page queued at a time, so the pages fetched again a
    rung up come between the others); ``pattern[N]`` is ``E`` for a page written by a script, ``G``
    for a plain one. ``hits`` gets (N, kind of client) for each page asked for."""

    async def page(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        hits.append((n, "chrome" if "sec-ch-ua" in request.headers else "plain"))
        title = f"<h2 class='title'>Page {n}</h2>"
        if pattern[n] == "E":
            title = f"<script>document.write({json.dumps(title)})</script>"
        link = f"<a class='story' href='/page/{n + 1}'>next</a>" if n + 1 < len(pattern) else ""
        return web.Response(text=f"<html><body>{title}{link}</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/page/{n}", page)
    return app


class Chain(Gazette):
    name = "chain"

    def __init__(self, base: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base = base

    async def start_requests(self) -> AsyncIterator[Request]:
        yield Request(self.base + "/page/0", callback=self.parse_story)

    def parse_story(self, response: Response) -> Iterator[Any]:
        yield from super().parse_story(response)
        yield from response.follow_all(css="a.story", callback=self.parse_story)


@pytest.mark.parametrize(
    ("pattern", "moved_at"),
    [
        ("EGEGEGG", 5),  # the third empty page is 3 of the 5 plain pages since the first: at least half
        ("EGGEGGEGG", None),  # 3 of 7: fewer than half, the host stays
    ],
)
async def test_the_host_follows_once_half_its_pages_since_the_first_empty_one_came_empty(
    pattern: str, moved_at: int | None
) -> None:
    hits: list[tuple[int, str]] = []
    async with serve(chain(hits, pattern)) as base:
        engine = Engine(Settings(ladder="plain,impersonate", retries=0, store="", concurrency=1))
        items, stats = await collect(Chain, engine=engine, base=base)
    assert_accounted(stats)
    assert len(items) == pattern.count("G")  # the script-built pages are empty on both rungs
    plain = [n for n, kind in hits if kind == "plain"]
    if moved_at is None:
        assert stats.counters["fetcher changes"] == 0 and plain == list(range(len(pattern)))
    else:  # the pages after the move are fetched a rung up at once
        assert stats.counters["fetcher changes"] == 1 and plain == list(range(moved_at))
