"""The example spiders in spiders/, run against local copies of their sites."""

from __future__ import annotations

import filecmp
import hashlib
import hmac
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

from aiohttp import web

import eclaw.demo.shop
import eclaw.demo.site
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


async def test_signed_spider_writes_its_own_middlewares() -> None:
    from eclaw.demo.site import expected_products, make_app

    module = load(ROOT / "spiders" / "signed.py")
    key = "k3y"
    fetched: list[str] = []

    @web.middleware
    async def check_signature(request: web.Request, handler: Any) -> web.StreamResponse:
        fetched.append(request.path)
        wanted = hmac.new(key.encode(), request.path_qs.encode(), hashlib.sha256).hexdigest()
        if request.headers.get("X-Signature") != wanted:
            return web.Response(status=403, text="bad signature")
        return await handler(request)

    app = make_app()
    app.middlewares.append(check_signature)
    async with serve(app) as base:
        items, stats = await collect(module.SignedShopSpider, base_url=base, key=key)
        unsigned, unsigned_stats = await collect(module.SignedShopSpider, base_url=base, key="wrong")
    known = {p["sku"] for p in expected_products()}
    assert len(items) > 300 and {i["sku"] for i in items} <= known
    assert stats.status_counts.keys() == {200}  # every request was signed correctly
    assert not [path for path in fetched if path.startswith(("/category/books", "/category/music"))]
    assert stats.dropped_by_reason["blocked"] >= 2
    assert unsigned == [] and unsigned_stats.failed_by_reason == {"http 403": 1}  # the home page
    assert_accounted(stats)
    assert_accounted(unsigned_stats)


async def test_shop_sitemap_spider_reads_the_sitemaps_only() -> None:
    from datetime import date

    from eclaw.demo.site import expected_products, make_app
    from eclaw.demo.sitemap import product_lastmod

    module = load(ROOT / "spiders" / "shop_sitemap.py")
    fetched: list[str] = []

    @web.middleware
    async def count(request: web.Request, handler: Any) -> web.StreamResponse:
        fetched.append(request.path)
        return await handler(request)

    app = make_app()
    app.middlewares.append(count)
    async with serve(app) as base:
        items, stats = await collect(module.ShopSitemapSpider, base_url=base)
        assert sorted(({k: v for k, v in i.items() if k != "url"} for i in items), key=lambda i: i["sku"]) == (
            expected_products()
        )
        assert {path for path in fetched if not path.startswith("/product/")} == {
            "/sitemap.xml", "/sitemaps/pages.xml.gz", *(f"/sitemaps/{c}.xml.gz" for c in eclaw.demo.site.CATEGORIES)
        }  # fmt: skip
        assert stats.requests_parsed == 1 + 11 + 500
        assert_accounted(stats)

        fetched.clear()
        since = date(2025, 12, 1)
        recent, _ = await collect(module.ShopSitemapSpider, base_url=base, sitemap_since=since.isoformat())
    changed = {p["sku"] for p in expected_products() if product_lastmod(int(str(p["sku"])[4:])) >= since}
    assert {item["sku"] for item in recent} == changed and 0 < len(changed) < 100
    assert "/sitemaps/pages.xml.gz" not in fetched  # its lastmod is older: not even downloaded


async def test_shop_login_spider_signs_in_and_reads_the_members_page(demo_url: str) -> None:
    from eclaw.demo.account import ORDERS
    from eclaw.demo.site import expected_products

    spider_cls = load(ROOT / "spiders" / "shop_login.py").ShopLoginSpider
    items, stats = await collect(spider_cls, base_url=demo_url)
    assert items[0] == {"member": "demo", "orders": len(ORDERS)}
    skus = {product["sku"]: product["title"] for product in expected_products()}
    assert sorted((item["ordered"], item["title"]) for item in items[1:]) == [
        (f"SKU-{pid:05d}", skus[f"SKU-{pid:05d}"]) for pid in ORDERS
    ]
    assert_accounted(stats)
    refused, refused_stats = await collect(spider_cls, base_url=demo_url, password="guess")
    assert refused == [] and refused_stats.finish_reason == "closespider: login failed: Wrong user name or password."
