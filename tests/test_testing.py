"""eclaw.testing.MockFetcher: spiders and middlewares tested with no sockets at all."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from eclaw import Engine, Request, Response, Settings, Spider
from eclaw.exceptions import ConnectError
from eclaw.middlewares import Retry
from eclaw.testing import MockFetcher, collect
from tests.conftest import assert_accounted


class Recipes(Spider):
    name = "recipes"
    start_urls = ["https://cook.test/"]

    def parse(self, response: Response) -> Any:
        yield from response.follow_all(css="a.recipe", callback=self.parse_recipe)
        yield Request("https://cook.test/api/ratings", callback=self.parse_ratings)

    def parse_recipe(self, response: Response) -> Any:
        yield {"name": response.css("h1::text").get(), "minutes": int(response.css("time::text").get() or 0)}

    def parse_ratings(self, response: Response) -> Any:
        yield from ({"name": name, "stars": stars} for name, stars in response.json().items())


PAGES = {
    "https://cook.test/": '<a class="recipe" href="/r/soup">Soup</a><a class="recipe" href="/r/tart">Tart</a>',
    "https://cook.test/r/soup": "<h1>Soupe à l'oignon</h1><time>45</time>",
    "https://cook.test/r/tart": (200, "<h1>Tarte Tatin</h1><time>80</time>"),
    "https://cook.test/api/ratings": {"Soupe à l'oignon": 5},
}


@pytest.fixture
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a socket was opened")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


async def test_a_spider_runs_on_answers_from_a_mapping(no_sockets: None) -> None:
    mock = MockFetcher(PAGES)
    items, stats = await collect(Recipes, engine=Engine(Settings(store=""), fetcher=lambda: mock))
    assert sorted(items, key=str) == sorted(
        [
            {"name": "Soupe à l'oignon", "minutes": 45},
            {"name": "Tarte Tatin", "minutes": 80},
            {"name": "Soupe à l'oignon", "stars": 5},
        ],
        key=str,
    )
    assert mock.requests[0].url == "https://cook.test/"
    assert mock.requests[0].headers["User-Agent"].startswith("Mozilla/5.0")  # the default middlewares ran
    assert_accounted(stats)


async def test_a_middleware_is_tested_against_a_function(no_sockets: None) -> None:
    calls: list[str] = []

    def flaky(request: Request) -> Any:
        calls.append(request.url)
        if request.url.endswith("/down"):
            return ConnectError("cannot connect")
        return (503, "busy") if len(calls) < 3 else "<h1>ok</h1>"

    class Two(Spider):
        name = "two"
        start_urls = ["https://cook.test/", "https://cook.test/down"]

        def parse(self, response: Response) -> Any:
            yield {"title": response.css("h1::text").get()}

    mock = MockFetcher(flaky)
    engine = Engine(Settings(store=""), middlewares=[Retry(2, base=0.0)], fetcher=lambda: mock)
    items, stats = await collect(Two, engine=engine)
    assert items == [{"title": "ok"}]
    assert stats.failed_by_reason == {"connect error": 1} and stats.retries >= 2
    assert_accounted(stats)


async def test_a_url_the_mapping_lacks_is_a_404() -> None:
    items, stats = await collect(
        Recipes,
        engine=Engine(Settings(store=""), fetcher=lambda: MockFetcher({})),
        start_urls=["https://x.test/"],
    )
    assert items == [] and stats.failed_by_reason == {"http 404": 1}
