"""The default fetcher routes each request to the fetcher it asks for."""

from __future__ import annotations

from typing import Any

import pytest

from eclaw import ConfigError, Engine, Request, Response, Settings, Spider
from eclaw.fetchers.router import Fetchers
from eclaw.testing import MockFetcher, collect


class Two(Spider):
    name = "two"

    def start_requests(self) -> Any:
        yield Request("https://a.test/plain")
        yield Request("https://a.test/other", meta={"fetcher": "other"})
        yield Request("https://a.test/rendered", render=True)

    def parse(self, response: Response) -> Any:
        yield {"url": response.url, "by": response.text}


async def test_each_request_goes_to_the_fetcher_it_names() -> None:
    plain, other = MockFetcher(lambda r: "plain"), MockFetcher(lambda r: "other")
    fetchers = {"plain": lambda: plain, "other": lambda: other}
    engine = Engine(Settings(store=""), fetcher=lambda: Fetchers(fetchers))
    items, stats = await collect(Two, engine=engine)
    assert sorted((i["url"].rsplit("/", 1)[1], i["by"]) for i in items) == [("other", "other"), ("plain", "plain")]
    assert stats.failed_by_reason == {"error: ConfigError": 1}  # render=True, and no browser fetcher here
    assert [r.url for r in other.requests] == ["https://a.test/other"]


async def test_a_spider_naming_an_unknown_fetcher_is_a_clear_error() -> None:
    class Odd(Two):
        name = "odd"
        fetcher = "telepathy"

    engine = Engine(Settings(store=""), fetcher=lambda: Fetchers({"plain": MockFetcher({})}))
    with pytest.raises(ConfigError, match="no fetcher 'telepathy'"):
        await collect(Odd, engine=engine)
