"""Guards of docs/sitemaps.md: each listed page goes to the callback of the *first* ``sitemap_rules``
pattern it matches, a page no pattern matches is not fetched, and ``sitemap_follow`` picks the child
sitemaps of an index."""

from __future__ import annotations

from collections import Counter
from typing import Any

from aiohttp import web

from eclaw import Response, Settings, Spider
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted

URLSET = """<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{}</urlset>"""
INDEX = """<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{}</sitemapindex>"""
PAGES = ["/plants/sale/fern", "/plants/rose", "/plants/sale/ivy", "/about", "/plants/tulip"]


def nursery(hits: Counter[str]) -> web.Application:
    """A garden nursery: an index of two sitemaps (plants, news); each page says its path."""

    async def xml(request: web.Request) -> web.Response:
        base = f"http://{request.host}"
        hits[request.path] += 1
        if request.path == "/sitemap.xml":
            body = INDEX.format(
                "".join(f"<sitemap><loc>{base}/{name}.xml</loc></sitemap>" for name in ("plants", "news"))
            )
        else:
            paths = PAGES if request.path == "/plants.xml" else ["/news/spring"]
            body = URLSET.format("".join(f"<url><loc>{base}{path}</loc></url>" for path in paths))
        return web.Response(text=body, content_type="application/xml")

    async def page(request: web.Request) -> web.Response:
        hits[request.path] += 1
        return web.Response(text=f"<h1>{request.path}</h1>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{name}.xml", xml)
    app.router.add_get("/{tail:.*}", page)
    return app


class Nursery(Spider):
    name = "nursery"
    sitemap_rules = [(r"/sale/", "parse_sale"), (r"/plants/", "parse_plant")]  # a sale page matches both
    sitemap_follow = [r"/plants\.xml$"]

    def parse_sale(self, response: Response) -> Any:
        yield {"sale": response.css("h1::text").get()}

    def parse_plant(self, response: Response) -> Any:
        yield {"plant": response.css("h1::text").get()}


async def test_each_page_goes_to_the_first_rule_it_matches_and_no_rule_means_no_fetch() -> None:
    hits: Counter[str] = Counter()
    async with serve(nursery(hits)) as base:
        items, stats = await collect(Nursery, settings=Settings(store=""), sitemap_urls=[base + "/sitemap.xml"])
    assert_accounted(stats)
    assert sorted(item["sale"] for item in items if "sale" in item) == ["/plants/sale/fern", "/plants/sale/ivy"]
    assert sorted(item["plant"] for item in items if "plant" in item) == ["/plants/rose", "/plants/tulip"]
    assert hits["/about"] == 0  # matches no rule: not fetched
    assert hits["/news.xml"] == 0 and hits["/news/spring"] == 0  # sitemap_follow left it out
    assert stats.requests_failed == 0
