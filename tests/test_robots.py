"""Robots: one robots.txt fetch per host, Allow/Disallow for our UA, Crawl-delay, unreachable robots.txt."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from eclaw import Engine, Request, Response, Settings, Spider
from eclaw.events import RequestDropped
from eclaw.middlewares import Robots, UserAgent, defaults
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, assert_spaced_as_sent, recorder

ROBOTS = """\
User-agent: eclaw
Disallow: /private
Allow: /private/ok
Crawl-delay: 0.3

User-agent: *
Disallow: /
"""


def robots_site(robots: str | int | None, stall: float = 0) -> tuple[web.Application, dict[str, list[float]]]:
    """A site whose /robots.txt is ``robots`` (a text, a status, or a stall of ``stall`` seconds)."""
    hits: dict[str, list[float]] = {}

    async def handler(request: web.Request) -> web.Response:
        hits.setdefault(request.path, []).append(asyncio.get_running_loop().time())
        if request.path == "/robots.txt":
            if stall:
                await asyncio.sleep(stall)
            if isinstance(robots, int):
                return web.Response(status=robots, text="no robots here")
            return web.Response(text=robots or "", content_type="text/plain")
        return web.Response(text=f"<title>{request.path}</title>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    return app, hits


PATHS = ["/public/a", "/public/b", "/private/x", "/private/ok/y", "/private/z"]


class Paths(Spider):
    name = "paths"

    def start_requests(self) -> Any:
        for path in PATHS:
            yield Request(self.base + path)

    def parse(self, response: Response) -> Any:
        yield {"path": response.css("title::text").get()}


class Sends:
    """The innermost middleware: the moment each request leaves the middlewares for the fetcher (past
    Robots' Crawl-delay), on the loop's clock, as the site's arrivals are."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}

    async def __call__(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if not request.url.endswith("/robots.txt"):
            self.at[request.url.split("/", 3)[3]] = asyncio.get_running_loop().time()
        return await call_next(request)


async def crawl(
    app: web.Application, robots: Robots, sends: Sends | None = None, **settings: Any
) -> tuple[list[str], Any, list[RequestDropped]]:
    inner = [sends] if sends is not None else []
    engine = Engine(Settings(**settings), middlewares=[robots, UserAgent(), *inner])
    dropped: list[RequestDropped] = []
    engine.subscribe(RequestDropped, recorder(dropped))
    async with serve(app) as base:
        items, stats = await collect(Paths, engine=engine, base=base)
    assert_accounted(stats)
    return sorted(i["path"] for i in items), stats, dropped


async def test_rules_for_our_agent_fetched_once_with_crawl_delay() -> None:
    app, hits = robots_site(ROBOTS)
    sends = Sends()
    paths, stats, dropped = await crawl(app, Robots(), sends)
    assert paths == ["/private/ok/y", "/public/a", "/public/b"]
    assert sorted(d.request.url.rsplit("/", 2)[-2] + "/" + d.request.url.rsplit("/", 1)[-1] for d in dropped) == [
        "private/x",
        "private/z",
    ]
    assert stats.dropped_by_reason == {"robots": 2}
    assert len(hits["/robots.txt"]) == 1  # five requests at once, one fetch
    arrived = {path.lstrip("/"): times for path, times in hits.items() if path != "/robots.txt"}
    assert all(len(times) == 1 for times in arrived.values()), arrived
    # Crawl-delay: 0.3, between the sends (where Robots decides) and, but for a stall, at the site
    assert_spaced_as_sent(sends.at, {path: times[0] for path, times in arrived.items()}, 0.3)


SENT = {"a": 0.0, "b": 0.3, "c": 0.6}


@pytest.mark.parametrize(
    ("arrived", "sent", "polite"),
    [
        ({"a": 0.06, "b": 0.323, "c": 0.607}, SENT, True),  # the first arrival late: gaps 0.263 and 0.284
        ({"a": 0.001, "b": 0.301, "c": 0.601}, SENT, True),
        ({"a": 0.001, "b": 0.002, "c": 0.003}, {"a": 0.0, "b": 0.0, "c": 0.0}, False),  # a delay per worker
        ({"a": 0.001, "b": 0.15, "c": 0.3}, {"a": 0.0, "b": 0.15, "c": 0.3}, False),  # from the wrong moment
        ({"a": 0.001, "b": 0.002, "c": 0.003}, SENT, False),  # sent spaced, yet not what the site saw
        ({"a": 0.301, "b": 0.001, "c": 0.601}, SENT, False),  # not in the order sent
    ],
)
def test_spacing_is_judged_as_sent_and_as_seen(arrived: dict[str, float], sent: dict[str, float], polite: bool) -> None:
    """The check above on its own: the failure seen on a loaded machine passes, politeness bugs do not."""
    try:
        assert_spaced_as_sent(sent, arrived, 0.3)
    except AssertionError:
        assert not polite
    else:
        assert polite


async def test_other_agents_match_the_star_group() -> None:
    app, _ = robots_site(ROBOTS)
    paths, stats, _ = await crawl(app, Robots(user_agent="otherbot"))
    assert paths == [] and stats.dropped_by_reason == {"robots": len(PATHS)}


async def test_missing_robots_allows_everything() -> None:
    app, hits = robots_site(404)
    paths, _, _ = await crawl(app, Robots())
    assert len(paths) == len(PATHS) and len(hits["/robots.txt"]) == 1


async def test_unreachable_robots_disallows_everything_unless_configured() -> None:
    app, _ = robots_site(503)
    paths, stats, _ = await crawl(app, Robots())
    assert paths == [] and stats.dropped_by_reason == {"robots": len(PATHS)}
    app, _ = robots_site(503)
    paths, _, _ = await crawl(app, Robots(unreachable="allow"))
    assert len(paths) == len(PATHS)
    app, _ = robots_site(ROBOTS, stall=3)
    paths, stats, _ = await crawl(app, Robots(), timeout=0.5)
    assert paths == [] and stats.dropped_by_reason == {"robots": len(PATHS)}


async def test_obey_robots_setting_uses_the_spider_user_agent() -> None:
    assert any(isinstance(m, Robots) for m in defaults(Settings(obey_robots=True)))
    assert not any(isinstance(m, Robots) for m in defaults(Settings()))

    class Polite(Paths):
        user_agent = "otherbot/1.0"

    app, _ = robots_site(ROBOTS)
    async with serve(app) as base:
        items, stats = await collect(Polite, settings=Settings(obey_robots=True), base=base)
    assert items == [] and stats.dropped_by_reason == {"robots": len(PATHS)}
