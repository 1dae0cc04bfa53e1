"""Guards of docs/impersonate.md, "Choosing it": a request is fetched by the first of its own fetcher,
its host's (the ``fetchers`` setting, a host covering its subdomains), the spider's ``fetcher``, else
the plain one."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from eclaw import Request, Response, Settings, Spider
from eclaw.fetchers.router import fetcher_of, host_fetchers
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted


def echo(seen: dict[str, str]) -> web.Application:
    """Records, per path, whether the client sent a real Chrome's ``sec-ch-ua`` (``chrome``) or not."""

    async def page(request: web.Request) -> web.Response:
        seen[request.path] = "chrome" if "sec-ch-ua" in request.headers else "plain"
        return web.Response(text=f"<h1>{request.path}</h1>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{word}", page)
    return app


class Chooser(Spider):
    name = "chooser"
    fetcher = "impersonate"

    def __init__(self, base: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base = base

    async def start_requests(self) -> Any:
        other = self.base.replace("127.0.0.1", "localhost")
        yield Request(self.base + "/spiders")  # no fetcher of its own, no host's: the spider's
        yield Request(other + "/hosts")  # localhost=plain wins over the spider's
        yield Request(other + "/requests", meta={"fetcher": "impersonate"})  # the request's wins over its host's
        yield Request(self.base + "/plainly", meta={"fetcher": "plain"})

    def parse(self, response: Response) -> Any:
        yield {"path": response.css("h1::text").get()}


async def test_the_requests_fetcher_then_its_hosts_then_the_spiders() -> None:
    seen: dict[str, str] = {}
    async with serve(echo(seen)) as base:
        items, stats = await collect(Chooser, settings=Settings(store="", fetchers="localhost=plain"), base=base)
    assert_accounted(stats)
    assert len(items) == 4 and stats.requests_failed == 0
    assert seen == {"/spiders": "chrome", "/hosts": "plain", "/requests": "chrome", "/plainly": "plain"}


def test_a_host_in_the_fetchers_setting_covers_its_subdomains_only() -> None:
    # the subdomains do not resolve on this machine: the choice itself, as the router makes it
    hosts = host_fetchers("shop.test=impersonate, news.shop.test=plain")
    assert fetcher_of(hosts, "shop.test", "plain") == "impersonate"
    assert fetcher_of(hosts, "eu.cdn.shop.test", "plain") == "impersonate"
    assert fetcher_of(hosts, "news.shop.test", "impersonate") == "plain"  # the nearest domain above wins
    assert fetcher_of(hosts, "myshop.test", "browser") == "browser"  # not a subdomain: the spider's
