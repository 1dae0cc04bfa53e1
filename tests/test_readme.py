"""The README's examples run as written."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from eclaw import Engine, Request, Response, Spider
from eclaw.middlewares import defaults
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted
from tests.test_example_spiders import quotes_site

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def block(containing: str) -> str:
    for code in re.findall(r"```python\n(.*?)```", README, re.S):
        if containing in code:
            return code
    raise AssertionError(f"no python block with {containing!r}")


async def test_ten_line_spider() -> None:
    code = block("class QuotesSpider")
    assert len([line for line in code.splitlines() if line.strip()]) <= 10
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    async with serve(quotes_site()) as base:
        items, stats = await collect(namespace["QuotesSpider"], start_urls=[base + "/"])
    assert len(items) == 5 and items[0]["author"] == "Albert Einstein"
    assert_accounted(stats)


async def test_middleware_example(demo_url: str) -> None:
    from eclaw.demo.shop import ShopSpider

    namespace: dict[str, Any] = {"ShopSpider": ShopSpider}
    exec(compile(block("class SignRequests"), "README.md", "exec"), namespace)

    class Admin(Spider):
        name = "admin"
        middlewares = namespace["SignedShopSpider"].middlewares

        async def start_requests(self) -> Any:
            yield Request(demo_url + "/about")
            yield Request(demo_url + "/admin/panel")

        def parse(self, response: Response) -> Any:
            yield {"seen_by": response.meta["seen_by"], "signed": len(response.request.headers["X-Signature"])}

    engine = Engine(middlewares=[*defaults(), namespace["block_admin"]])
    items, stats = await collect(Admin, engine=engine)
    assert items == [{"seen_by": "block_admin", "signed": 64}]
    assert stats.dropped_by_reason == {"blocked": 1}


def test_item_example_validates() -> None:
    from eclaw.items import item_key, validate

    namespace: dict[str, Any] = {}
    exec(compile(block("class Product(Item)"), "README.md", "exec"), namespace)
    product = namespace["Product"]
    assert validate(product("a", 1.5)) is None and validate(product("a", 2, ["x"], None)) is None
    assert validate(product("a", "12.5")) == "field 'price' must be float, got str"
    assert validate(product(None, 1.0)) == "field 'sku' is required"
    assert item_key(product("a", 1.0), {"sku": "a"}) == "a"


async def test_flows_example(demo_url: str, tmp_path: Path) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(block('Flow("shop", concurrency=2, timeout=3600)'), "README.md", "exec"), namespace)
    records = await namespace["flow"].run(
        "readme", params={"base_url": demo_url}, store=tmp_path / "flows.sqlite", data_dir=tmp_path
    )
    assert {name: r.state for name, r in records.items()} == dict.fromkeys(["categories", "lists", "report"], "success")
    assert json.loads(records["report"].result) == {"pages": 10, "products": 120}
