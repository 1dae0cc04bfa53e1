"""The examples of the docs do what they say: each block (all of them run in tests/test_docs.py)
has here a test of what it promises, against the local demo shop or a local site."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path
from typing import Any

from eclaw import Engine, Request, Response, Spider
from eclaw.middlewares import defaults
from eclaw.testing import collect, serve
from tests.conftest import read_jsonl
from tests.sites import fault_app

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = [page.read_text(encoding="utf-8") for page in sorted(DOCS.glob("*.md"))]
BLOCKS = [block for text in PAGES for block in re.findall(r"```python\n(.*?)```", text, re.S)]
# The blocks tested here, by a marker each: the test of that block below looks it up by it.
MARKERS = [
    "async def alert(",
    "async def tag(",
    "class SignRequests",
    "class RequirePrice",
    "class Product(Item)",
    'Flow("shop", concurrency=2, timeout=3600)',
    "class Titles(Spider)",
    "async def crawl_shop(",
    "async def test_my_spider(",
]


def block(containing: str) -> str:
    (code,) = [code for code in BLOCKS if containing in code]
    return code


def execute(code: str) -> dict[str, Any]:
    """Run ``code`` as the body of a module of its own (dataclasses look their module up)."""
    module = types.ModuleType(f"readme_block_{id(code)}")
    sys.modules[module.__name__] = module
    exec(compile(code, "README.md", "exec"), module.__dict__)
    return module.__dict__


def run_block(containing: str) -> dict[str, Any]:
    return execute(block(containing))


def test_each_marker_finds_one_block() -> None:
    for marker in MARKERS:
        assert block(marker)


async def test_handler_example_counts_per_crawl(demo_url: str, capsys: Any) -> None:
    from eclaw.demo.shop import ShopSpider

    class Gone(Spider):
        name = "gone"

    namespace = run_block("async def alert(")
    engine: Engine = namespace["engine"]
    async with engine:
        crawl = engine.prepare(ShopSpider, base_url=demo_url)
        await engine.run_crawl(crawl)
        await engine.crawl(Gone, start_urls=[demo_url + "/no-such-page"])
    assert namespace["stored"][crawl.run_id] == 500
    assert "gave up on" in capsys.readouterr().out


async def test_middleware_list_example_adds_to_each_crawls_defaults() -> None:
    namespace = run_block("async def tag(")

    class Echo(Spider):
        name = "echo"

        def parse(self, response: Response) -> Any:
            yield response.json()["headers"]

    async with serve(fault_app()) as base:
        items, _ = await collect(Echo, engine=namespace["engine"], start_urls=[base + "/echo"])
    assert items[0]["X-Crawler"] == "eclaw" and items[0]["Accept-Language"]  # ours and UserAgent's (a default)


async def test_middleware_example(demo_url: str) -> None:
    namespace = run_block("class SignRequests")

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


async def test_pipeline_example_writes_both_outputs(demo_url: str, tmp_path: Path) -> None:
    from eclaw.demo.shop import ShopSpider

    engine: Engine = run_block("class RequirePrice")["engine"]
    async with engine:
        stats = await engine.crawl(ShopSpider, base_url=demo_url)
    assert stats.items_written == {"items.jsonl": 500, "items.csv": 500} and stats.clean
    assert len(read_jsonl(tmp_path / "items.jsonl")) == 500


def test_item_example_validates() -> None:
    from eclaw.items import item_key, validate

    product = run_block("class Product(Item)")["Product"]
    assert validate(product("a", 1.5)) is None and validate(product("a", 2, ["x"], None)) is None
    assert validate(product("a", "12.5")) == "field 'price' must be float, got str"
    assert validate(product(None, 1.0)) == "field 'sku' is required"
    assert item_key(product("a", 1.0), {"sku": "a"}) == "a"


async def test_flows_example(demo_url: str, tmp_path: Path) -> None:
    flow = run_block('Flow("shop", concurrency=2, timeout=3600)')["flow"]
    params = {"base_url": demo_url}
    records = await flow.run("readme", params=params, store=tmp_path / "flows.sqlite", data_dir=tmp_path)
    assert {name: r.state for name, r in records.items()} == dict.fromkeys(["categories", "lists", "report"], "success")
    assert json.loads(records["report"].result) == {"pages": 10, "products": 120}


async def test_embedding_example(demo_url: str) -> None:
    main = run_block("class Titles(Spider)")["main"]
    assert await main(demo_url) == ["finished", "About | Demo Shop"]


async def test_state_example(demo_url: str, tmp_path: Path) -> None:
    stats = await run_block("async def crawl_shop(")["crawl_shop"](demo_url)
    assert stats.items_stored == 500 and (tmp_path / "crawls" / "shop" / "state.sqlite").is_file()


async def test_testing_example() -> None:
    await run_block("async def test_my_spider(")["test_my_spider"]()
