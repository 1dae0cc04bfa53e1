"""Embedding: several crawls in one loop, cancellation, item streams, run()."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp

import eclaw
from eclaw import Engine, Request, Response, Settings, Spider
from eclaw.demo.shop import ShopSpider
from eclaw.demo.site import CATEGORIES, PRODUCTS_PER_CATEGORY, make_app
from eclaw.events import ItemStored
from eclaw.fetchers.plain import PlainFetcher
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, until
from tests.sites import SlowSite

ROOT = Path(__file__).resolve().parent.parent
SHELF = PRODUCTS_PER_CATEGORY  # the products OneShelf finds


class OneShelf(ShopSpider):
    """The demo shop's spider on one category of the shop (50 products, not 500): enough for crawls
    that run side by side to overlap, at a tenth of the pages."""

    async def start_requests(self) -> AsyncIterator[Request]:
        yield Request(f"{self.base_url}/category/{CATEGORIES[0]}", callback=self.parse_category)

    def parse_product(self, response: Response) -> Iterator[dict[str, Any] | Request]:
        """The product, not its related ones (in other categories)."""
        yield from (found for found in super().parse_product(response) if not isinstance(found, Request))


async def test_two_crawls_run_concurrently_in_one_loop(demo_url: str) -> None:
    (items_a, stats_a), (items_b, stats_b) = await asyncio.gather(
        collect(OneShelf, base_url=demo_url), collect(OneShelf, base_url=demo_url)
    )
    assert len(items_a) == len(items_b) == SHELF
    assert stats_a is not stats_b
    assert_accounted(stats_a)
    assert_accounted(stats_b)


async def test_two_crawls_share_one_engine(demo_url: str) -> None:
    engine = Engine()
    stored = 0

    @engine.on(ItemStored)
    async def count(event: ItemStored) -> None:
        nonlocal stored
        stored += 1

    async with engine:
        results = await asyncio.gather(
            engine.crawl(OneShelf, base_url=demo_url), engine.crawl(OneShelf, base_url=demo_url)
        )
    assert stored == 2 * SHELF
    assert [s.items_stored for s in results] == [SHELF, SHELF]


class ItemsFromSlowPages(Spider):
    name = "slow-items"

    def parse(self, response: Response) -> Any:
        if "/slow/" in response.url:
            yield {"url": response.url}
        yield from response.follow_all(css="a")


async def test_cancelling_the_caller_closes_session_and_files(tmp_path: Path) -> None:
    site = SlowSite(delay=0.3)
    fetchers: list[PlainFetcher] = []

    def make_fetcher() -> PlainFetcher:
        fetchers.append(PlainFetcher())
        return fetchers[-1]

    out = tmp_path / "items.jsonl"
    engine = Engine(Settings(concurrency=4), outputs=[out], fetcher=make_fetcher)
    stored = asyncio.Event()

    @engine.on(ItemStored)
    async def first(event: ItemStored) -> None:
        stored.set()

    async with serve(site.app()) as base:
        async with engine:
            task = asyncio.create_task(engine.crawl(ItemsFromSlowPages, start_urls=[base + "/?count=40"]))
            await asyncio.wait_for(stored.wait(), 10)
            task.cancel()
            done, _ = await asyncio.wait([task], timeout=5)
            assert done, "crawl did not stop after cancellation"
            assert task.cancelled()
        await until(lambda: site.active == 0)  # in-flight handlers on the server side finish
    assert fetchers[0]._session is None  # session closed
    lines = out.read_text().splitlines()
    assert lines and all(json.loads(line)["url"] for line in lines)  # complete lines, file flushed
    assert site.hits < 41
    leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert leftover == []


async def test_item_stream_yields_items_as_they_arrive(demo_url: str) -> None:
    async with Engine() as engine:
        stream = engine.items(OneShelf, base_url=demo_url, buffer=5)
        skus = [item["sku"] async for item in stream]
    assert len(skus) == len(set(skus)) == SHELF
    assert stream.stats is not None and stream.stats.items_stored == SHELF


async def test_leaving_an_item_stream_early_stops_the_crawl(demo_url: str) -> None:
    async with Engine() as engine:
        got = []
        async for item in engine.items(ShopSpider, base_url=demo_url, buffer=1):
            got.append(item)
            if len(got) == 3:
                break
    assert len(got) == 3
    await asyncio.sleep(0)
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []


async def test_webapp_example_streams_items(demo_url: str) -> None:
    spec = importlib.util.spec_from_file_location("webapp_example", ROOT / "spiders" / "webapp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    async with (
        serve(module.make_app()) as app_url,
        aiohttp.ClientSession() as session,
        session.get(f"{app_url}/crawl", params={"site": demo_url}) as response,
    ):
        assert response.status == 200
        lines = [line async for line in response.content if line.strip()]
    items = [json.loads(line) for line in lines]
    assert len(items) == len({item["sku"] for item in items}) == 500


def test_run_is_the_sync_entry_point(tmp_path: Path) -> None:
    ready = threading.Event()
    state: dict[str, Any] = {}

    def serve_demo() -> None:
        async def main() -> None:
            async with serve(make_app()) as base:
                state["base"] = base
                state["stop"] = asyncio.Event()
                state["loop"] = asyncio.get_running_loop()
                ready.set()
                await state["stop"].wait()

        asyncio.run(main())

    thread = threading.Thread(target=serve_demo)
    thread.start()
    try:
        assert ready.wait(10)

        out = tmp_path / "run.jsonl"
        stats = eclaw.run(OneShelf, outputs=[out], args={"base_url": state["base"]}, concurrency=4)
        assert stats.items_stored == SHELF
        assert len(out.read_text().splitlines()) == SHELF
    finally:
        state["loop"].call_soon_threadsafe(state["stop"].set)
        thread.join(10)
