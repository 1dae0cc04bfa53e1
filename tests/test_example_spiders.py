"""The example spiders in spiders/, run against local copies of their sites."""

from __future__ import annotations

import filecmp
import importlib.util
from pathlib import Path
from types import ModuleType

from aiohttp import web

import eclaw.demo.shop
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem + "_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def quotes_site() -> web.Application:
    pages = {"/": "page1.html", "/page/2/": "page2.html"}
    app = web.Application()

    async def handler(request: web.Request) -> web.Response:
        text = (DATA / "quotes" / pages[request.path]).read_text(encoding="utf-8")
        return web.Response(text=text, content_type="text/html")

    for path in pages:
        app.router.add_get(path, handler)
    return app


async def test_quotes_spider_offline() -> None:
    spider_cls = load(ROOT / "spiders" / "quotes.py").QuotesSpider
    async with serve(quotes_site()) as base:
        items, stats = await collect(spider_cls, start_urls=[base + "/"], allowed_domains=["127.0.0.1"])
    assert len(items) == 5
    assert items[0]["author"] == "Albert Einstein"
    assert items[0]["text"].startswith("“The world as we have created it")
    assert items[0]["tags"] == ["change", "deep-thoughts", "thinking", "world"]
    assert {item["author"] for item in items[3:]} == {"Marilyn Monroe", "J.K. Rowling"}
    assert stats.requests_parsed == 2
    assert_accounted(stats)


def test_shop_example_is_the_demo_spider() -> None:
    packaged = Path(eclaw.demo.shop.__file__)
    assert filecmp.cmp(packaged, ROOT / "spiders" / "shop.py", shallow=False)
    assert packaged.resolve() == (ROOT / "spiders" / "shop.py").resolve()  # one copy, linked


async def test_shop_example_from_its_file(demo_url: str) -> None:
    spider_cls = load(ROOT / "spiders" / "shop.py").ShopSpider
    items, stats = await collect(spider_cls, base_url=demo_url)
    assert len(items) == 500
    assert_accounted(stats)
