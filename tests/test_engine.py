"""Engine behaviour: concurrency, callbacks, failures, pipelines, middleware."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from typing import Any

import pytest
from aiohttp import web

from eclaw import CloseSpider, DropItem, Engine, IgnoreRequest, Request, Response, Settings, Spider
from eclaw.events import ItemDropped, RequestDropped, RequestFailed, ResponseDownloaded
from eclaw.middlewares import DefaultHeaders, defaults
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, recorder
from tests.sites import SlowSite, fault_app, page


class FollowLinks(Spider):
    name = "follow-links"

    def parse(self, response: Response) -> Any:
        yield from response.follow_all(css="a")


async def test_downloads_overlap_up_to_concurrency() -> None:
    site = SlowSite(delay=1.0)  # time for all ten to reach the site before the first answers

    async with serve(site.app()) as base:
        started = time.monotonic()
        settings = Settings(concurrency=10, concurrency_per_domain=10)
        _, stats = await collect(FollowLinks, settings=settings, start_urls=[base + "/?count=20"])
        elapsed = time.monotonic() - started
    assert stats.requests_parsed == 21
    assert site.peak == 10  # never more than the limit, and the limit was reached
    # 20 pages of 1 s in series would take 20 s; in two waves of 10 it takes ~2 s.
    assert elapsed < 10, elapsed
    assert_accounted(stats)


async def test_per_domain_limit_holds() -> None:
    site = SlowSite(delay=0.2)

    async with serve(site.app()) as base:
        settings = Settings(concurrency=16, concurrency_per_domain=3)
        _, stats = await collect(FollowLinks, settings=settings, start_urls=[base + "/?count=12"])
    assert site.peak == 3
    assert_accounted(stats)


@dataclasses.dataclass
class Thing:
    name: str
    n: int


def callback_site() -> web.Application:
    app = web.Application()

    async def index(request: web.Request) -> web.Response:
        return page("/a", "/b", "/c", "/d", "/missing", "/boom")

    async def leaf(request: web.Request) -> web.Response:
        return page(title=request.path.strip("/"))

    async def missing(request: web.Request) -> web.Response:
        raise web.HTTPNotFound()

    app.router.add_get("/", index)
    app.router.add_get("/missing", missing)
    app.router.add_get("/{name}", leaf)
    return app


class CallbackStyles(Spider):
    name = "styles"

    def parse(self, response: Response) -> Any:
        callbacks = {
            "/a": self.async_gen,
            "/b": self.sync_gen,
            "/c": self.coroutine,
            "/d": self.plain,
            "/missing": self.sync_gen,
            "/boom": self.fails,
        }
        for href, callback in callbacks.items():
            yield response.follow(href, callback=callback, errback=self.on_error, cb_kwargs={"tag": href})

    async def async_gen(self, response: Response, tag: str) -> Any:
        await asyncio.sleep(0)
        yield {"via": "async_gen", "tag": tag}

    def sync_gen(self, response: Response, tag: str) -> Any:
        yield Thing(name="sync_gen", n=1)

    async def coroutine(self, response: Response, tag: str) -> Any:
        return [{"via": "coroutine", "tag": tag}, {"via": "coroutine", "tag": tag, "second": True}]

    def plain(self, response: Response, tag: str) -> None:
        return None

    def fails(self, response: Response, tag: str) -> Any:
        yield {"via": "before-error"}
        raise ValueError("bad page")

    def on_error(self, failure: RequestFailed) -> Any:
        yield {"via": "errback", "reason": failure.reason}


async def test_callback_styles_errbacks_and_accounting() -> None:
    async with serve(callback_site()) as base:
        items, stats = await collect(CallbackStyles, start_urls=[base + "/"])
    vias = sorted(item.name if isinstance(item, Thing) else item["via"] for item in items)
    assert vias == ["async_gen", "before-error", "coroutine", "coroutine", "errback", "errback", "sync_gen"]
    reasons = sorted(item["reason"] for item in items if isinstance(item, dict) and item["via"] == "errback")
    assert reasons == ["callback error: ValueError", "http 404"]
    assert stats.requests_parsed == 5  # index, a, b, c, d
    assert stats.failed_by_reason == {"http 404": 1, "callback error: ValueError": 1}
    assert_accounted(stats)


async def test_handle_httpstatus_list_passes_status_to_callback() -> None:
    class Statuses(Spider):
        name = "statuses"
        handle_httpstatus_list = [404]

        def parse(self, response: Response) -> Any:
            yield {"status": response.status}

    async with serve(fault_app()) as base:
        items, stats = await collect(Statuses, start_urls=[base + "/status/404", base + "/status/500"])
    assert items == [{"status": 404}]
    assert stats.failed_by_reason == {"http 500": 1}
    assert_accounted(stats)


async def test_failing_user_handler_is_counted_and_crawl_goes_on(demo_url: str) -> None:
    from eclaw.demo.shop import ShopSpider

    engine = Engine()
    calls = 0

    @engine.on(ResponseDownloaded)
    async def broken(event: ResponseDownloaded) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("observer bug")

    items, stats = await collect(ShopSpider, engine=engine, base_url=demo_url)
    assert len(items) == 500
    assert stats.handler_errors == calls == stats.responses_downloaded
    assert_accounted(stats)


async def test_component_failure_becomes_request_failed() -> None:
    class Exploding:
        async def open(self, spider: Spider, settings: Settings) -> None:
            pass

        async def fetch(self, request: Request) -> Response:
            if request.url.endswith("/bad"):
                raise KeyError("fetcher bug")
            return Response(request.url, body=b'<a href="/bad">x</a><a href="/ok">y</a>', request=request)

        async def close(self) -> None:
            pass

    class Simple(Spider):
        name = "simple"

        def parse(self, response: Response) -> Any:
            yield from response.follow_all(css="a")

    _, stats = await collect(Simple, engine=Engine(fetcher=Exploding), start_urls=["http://site.test/"])
    assert stats.failed_by_reason == {"error: KeyError": 1}
    assert stats.requests_parsed == 2
    assert_accounted(stats)


async def test_pipeline_drop_and_error_go_to_dead_letter(demo_url: str, tmp_path) -> None:
    from eclaw.demo.shop import ShopSpider

    class Picky:
        async def open(self, crawl: Any) -> None:
            self.opened = True

        async def process_item(self, item: dict[str, Any], spider: Spider) -> dict[str, Any]:
            if item["rating"] == 1:
                raise DropItem("one star")
            if item["rating"] == 2:
                raise OSError("disk full")
            return {**item, "checked": True}

        async def close(self) -> None:
            self.closed = True

    picky = Picky()
    out = tmp_path / "items.jsonl"
    dead = tmp_path / "dead.jsonl"
    engine = Engine(Settings(dead_letter=str(dead)), pipelines=[picky], outputs=[out])
    dropped: list[ItemDropped] = []
    engine.subscribe(ItemDropped, recorder(dropped))
    items, stats = await collect(ShopSpider, engine=engine, base_url=demo_url)
    assert picky.opened and picky.closed
    ones = sum(1 for p in _expected() if p["rating"] == 1)
    twos = sum(1 for p in _expected() if p["rating"] == 2)
    assert stats.items_dropped_by_reason == {"one star": ones, "pipeline error: OSError": twos}
    assert stats.items_stored == len(items) == 500 - ones - twos
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(written) == len(items) and all(row["checked"] for row in written)
    dead_rows = [json.loads(line) for line in dead.read_text().splitlines()]
    assert len(dead_rows) == twos
    assert {row["error"] for row in dead_rows} == {"OSError: disk full"}
    assert all(row["item"]["rating"] == 2 and row["url"] for row in dead_rows)
    assert len(dropped) == ones + twos
    assert_accounted(stats)


def _expected() -> list[dict[str, Any]]:
    from eclaw.demo.site import expected_products

    return expected_products()


async def test_close_spider_stops_gracefully(demo_url: str) -> None:
    class Stopper(Spider):
        name = "stopper"
        seen = 0

        def parse(self, response: Response) -> Any:
            Stopper.seen += 1
            if Stopper.seen >= 5:
                raise CloseSpider("enough")
            yield from response.follow_all(css="a.category, a.product")

    _, stats = await collect(Stopper, start_urls=[demo_url + "/"], allowed_domains=["127.0.0.1"])
    assert stats.finish_reason == "closespider: enough"
    assert stats.requests_pending > 0
    assert_accounted(stats)


async def test_max_depth_drops_deeper_requests(demo_url: str) -> None:
    class Deep(Spider):
        name = "deep"
        custom_settings = {"max_depth": 1}

        def parse(self, response: Response) -> Any:
            yield {"depth": response.request.depth}
            yield from response.follow_all(css="a")

    items, stats = await collect(Deep, start_urls=[demo_url + "/"])
    assert {item["depth"] for item in items} == {0, 1}
    assert stats.dropped_by_reason["max depth"] > 0
    assert_accounted(stats)


async def test_custom_middleware_replaces_and_consumes_requests() -> None:
    seen_headers: list[dict[str, str]] = []

    async def tagger(request: Request, call_next: Any) -> Response:
        if "private" in request.url:
            raise IgnoreRequest("private area")
        response = await call_next(request.replace(headers={**request.headers, "X-Tag": "t1"}))
        response.meta["tagged"] = True
        return response

    class Echo(Spider):
        name = "echo"

        def parse(self, response: Response) -> Any:
            seen_headers.append(response.json()["headers"])
            yield {"tagged": response.meta.get("tagged")}

    engine = Engine(middlewares=[*defaults(), tagger])
    dropped: list[RequestDropped] = []
    engine.subscribe(RequestDropped, recorder(dropped))
    async with serve(fault_app()) as base:
        items, stats = await collect(Echo, engine=engine, start_urls=[base + "/echo", base + "/echo?private=1"])
    assert items == [{"tagged": True}]
    assert seen_headers[0]["X-Tag"] == "t1"
    assert seen_headers[0]["Accept-Language"] == "en-US,en;q=0.9"  # UserAgent (a default) ran too
    assert [event.reason for event in dropped] == ["private area"]
    assert_accounted(stats)


async def test_default_headers_do_not_override_request_headers() -> None:
    seen: list[Request] = []

    async def final(request: Request) -> Response:
        seen.append(request)
        return Response(request.url, request=request)

    middleware = DefaultHeaders({"Accept": "a/b", "X-Default": "1"})
    await middleware(Request("http://x.test/", headers={"accept": "mine"}), final)
    assert seen[0].headers == {"X-Default": "1", "accept": "mine"}


async def test_spider_middlewares_run_inside_engine_middlewares() -> None:
    order: list[str] = []

    def named(name: str) -> Any:
        async def middleware(request: Request, call_next: Any) -> Response:
            order.append(name)
            return await call_next(request)

        return middleware

    class Ordered(Spider):
        name = "ordered"
        middlewares = [named("spider")]

        def parse(self, response: Response) -> Any:
            return None

    async with serve(fault_app()) as base:
        engine = Engine(middlewares=[named("engine-1"), named("engine-2")])
        await collect(Ordered, engine=engine, start_urls=[base + "/echo"])
    assert order == ["engine-1", "engine-2", "spider"]


async def test_bad_start_requests_is_a_clear_error() -> None:
    class Bad(Spider):
        name = "bad"

        async def start_requests(self) -> Any:
            yield Request("not a url")

    with pytest.raises(ValueError, match="malformed URL 'not a url'"):
        await collect(Bad)


async def test_broken_frontier_stops_the_crawl_cleanly(demo_url: str) -> None:
    from eclaw.demo.shop import ShopSpider
    from eclaw.frontier.default import DefaultFrontier

    class Flaky(DefaultFrontier):
        calls = 0

        async def next_request(self) -> Request | None:
            Flaky.calls += 1
            if Flaky.calls > 20:
                raise ConnectionError("frontier store went away")
            return await super().next_request()

    _, stats = await collect(ShopSpider, engine=Engine(frontier=Flaky), base_url=demo_url)
    assert stats.finish_reason == "frontier error"
    assert stats.requests_pending > 0
    assert_accounted(stats)
