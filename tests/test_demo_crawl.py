"""Integration: crawl the bundled demo shop end to end."""

from __future__ import annotations

from eclaw import Engine
from eclaw.demo.shop import ShopSpider
from eclaw.demo.site import expected_products
from eclaw.events import RequestScheduled
from eclaw.testing import collect
from tests.conftest import assert_accounted


async def test_every_product_arrives_exactly_once_with_correct_fields(demo_url: str) -> None:
    items, stats = await collect(ShopSpider, base_url=demo_url)
    got = sorted(items, key=lambda item: item["sku"])
    assert len(got) == 500
    assert len({item["sku"] for item in got}) == 500
    expected = expected_products()
    assert [{k: v for k, v in item.items() if k != "url"} for item in got] == expected
    assert all(item["url"].startswith(demo_url + "/product/") for item in got)
    assert_accounted(stats)
    assert stats.finish_reason == "finished"
    assert stats.requests_pending == 0
    assert stats.requests_failed == 0
    assert stats.dropped_by_reason["duplicate"] > 0
    assert stats.dropped_by_reason["offsite"] > 0
    assert stats.dropped_by_reason["unsupported scheme"] > 0


async def test_no_offsite_or_non_http_request_is_fetched(demo_url: str) -> None:
    engine = Engine()
    fetched: list[str] = []

    async def record(event: RequestScheduled) -> None:
        fetched.append(event.request.url)

    engine.subscribe(RequestScheduled, record)
    _, stats = await collect(ShopSpider, engine=engine, base_url=demo_url)
    assert fetched and all(url.startswith(demo_url + "/") for url in fetched)
    assert len(fetched) == len(set(fetched)) == stats.requests_parsed
    assert_accounted(stats)
