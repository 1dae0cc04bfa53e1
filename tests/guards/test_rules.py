"""Guards of docs/rules.md: ``same-host`` (the default strategy) follows the page's host on any port,
and each link goes to the first rule that matches it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from eclaw import Response, Settings, Spider
from eclaw.discovery import Rule
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted


def museum(other: str) -> web.Application:
    """The hall links its own rooms, the shop on ``other`` (the same host, another port) and a
    page on another host; every page is a room with its name in ``<h1>``."""

    async def hall(request: web.Request) -> web.Response:
        links = f"<a href='/room/1'>1</a><a href='/room/2/ticket'>2</a><a href='{other}/room/shop'>shop</a>"
        links += "<a href='http://127.0.0.2:9/room/away'>away</a>"
        return web.Response(text=links, content_type="text/html")

    async def room(request: web.Request) -> web.Response:
        return web.Response(text=f"<h1>{request.match_info['name']}</h1>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/", hall)
    app.router.add_get("/room/{name:.+}", room)
    return app


@asynccontextmanager
async def two_ports() -> AsyncIterator[str]:
    """The museum on one port of 127.0.0.1, its shop on another; yields the museum's URL."""
    async with serve(museum("")) as shop, serve(museum(shop)) as base:
        yield base


class Visit(Spider):
    name = "visit"
    rules = [
        Rule(r"/ticket", callback="parse_ticket"),  # first: a ticket page goes here, though /room/ matches it too
        Rule(r"/room/", callback="parse_room"),
    ]

    def parse_room(self, response: Response) -> Any:
        yield {"room": response.css("h1::text").get(), "port": response.url.split(":")[2].split("/")[0]}

    def parse_ticket(self, response: Response) -> Any:
        yield {"ticket": response.css("h1::text").get()}


async def test_same_host_follows_the_host_on_another_port_and_first_rule_wins() -> None:
    async with two_ports() as base:
        items, stats = await collect(Visit, settings=Settings(store=""), start_urls=[base + "/"])
    assert_accounted(stats)
    rooms = sorted(item["room"] for item in items if "room" in item)
    assert rooms == ["1", "shop"]  # the shop on the other port of 127.0.0.1 is the same host; 127.0.0.2 is not
    assert [item["ticket"] for item in items if "ticket" in item] == ["2/ticket"]
    assert stats.requests_failed == 0 and stats.requests_parsed == 4
    assert stats.requests_dropped == 0  # the ticket, taken by the first rule, was never offered to the second


def test_same_host_any_port_and_the_reason_for_another_host() -> None:
    rule = Rule()
    assert rule.skips("http://127.0.0.1:8081/a", page="http://127.0.0.1:8080/") is None
    assert rule.skips("https://shop.test/a", page="http://shop.test:8080/") is None
    assert rule.skips("http://127.0.0.2:8080/a", page="http://127.0.0.1:8080/") == "other host"
    assert rule.skips("http://www.shop.test/a", page="http://shop.test/") == "other host"
