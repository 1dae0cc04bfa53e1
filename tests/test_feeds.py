"""Feeds and JSON: RSS/Atom feeds as a discovery source (and the protocol every source
implements), XML node and CSV row iterators, ``response.jmespath``, and ``Request.to_curl`` /
``Request.from_curl``, each against a local site."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eclaw import ConfigError, Engine, Request, Response, Settings, Spider
from eclaw.discovery.feeds import Feeds
from eclaw.discovery.source import SourceOwner
from eclaw.events import ItemStored
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted

SETTINGS = Settings(store="", retries=0)

RSS = """<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><channel>
  <title>Posts</title><link>{base}/</link>
  <item><title>One</title><link>{base}/posts/1</link><pubDate>Wed, 10 Jan 2024 08:00:00 GMT</pubDate></item>
  <item><title>Two</title><link>/posts/2?a=1&b=2</link><pubDate>Sat, 01 Jun 2024 01:00:00 +0200</pubDate></item>
  <item><title>Three</title><guid>{base}/posts/3</guid></item>
  <item><title>Four</title><link>{base}/posts/4</link><dc:date>2024-07-01T00:00:00Z</dc:date></item>
</channel></rss>"""

ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xml:base="{base}/blog/">
  <title>Blog</title><link rel="self" href="atom.xml"/>
  <entry><title>A</title><link rel="alternate" href="entries/a.html"/><updated>2023-12-01T00:00:00Z</updated></entry>
  <entry xml:base="/archive/"><title>B</title><link href="b.html"/><updated>2024-06-02T00:00:00+00:00</updated></entry>
  <entry><title>C</title><link rel="enclosure" href="c.mp3"/><link href="entries/c.html"/></entry>
</feed>"""

PRODUCTS_XML = """<?xml version="1.0"?>
<rss xmlns:g="http://base.google.com/ns/1.0"><channel>
  <item><g:id>p1</g:id><title>Kettle</title><g:price>19.90 EUR</g:price></item>
  <item><g:id>p2</g:id><title>Toaster &amp; grill</title><g:price>34.00 EUR</g:price></item>
  <item><g:id>p3</g:id><title>Mug</title><g:price>4.50 EUR</g:price></item>
</channel></rss>"""

PRODUCTS_CSV = 'sku;name;price\r\np1;Kettle;19.90\r\np2;"Toaster; grill";34.00\r\n\r\nbroken;row\r\np3;Mug;4.50\r\n'

API = {"rows": [{"id": 1, "name": "Ada", "tags": ["x"]}, {"id": 2, "name": "Grace", "tags": []}], "next": None}


class FeedSite:
    """Feeds, their entries' pages, product feeds, a JSON page, and an echo of what a request sent."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.seen: list[dict[str, Any]] = []  # what /echo received

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/rss.xml", self._feed(RSS, "application/rss+xml"))
        app.router.add_get("/blog/atom.xml", self._feed(ATOM, "application/atom+xml"))
        app.router.add_get("/big.xml", self._big)
        app.router.add_get("/products.xml", self._feed(PRODUCTS_XML, "application/xml"))
        app.router.add_get("/products.csv", self._feed(PRODUCTS_CSV, "text/csv; charset=utf-8"))
        app.router.add_get("/api.json", self._feed(json.dumps(API), "application/json"))
        app.router.add_route("*", "/echo", self._echo)
        app.router.add_get("/{path:.*}", self._page)
        return app

    def _feed(self, body: str, ctype: str) -> Any:
        async def handler(request: web.Request) -> web.Response:
            self.hits[request.path] += 1
            base = f"{request.scheme}://{request.host}"
            return web.Response(body=body.replace("{base}", base).encode(), content_type=ctype.split(";")[0])

        return handler

    async def _big(self, request: web.Request) -> web.Response:
        self.hits[request.path] += 1
        items = "".join(f"<item><link>/many/{n}</link></item>" for n in range(30))
        return web.Response(text=f"<rss><channel>{items}</channel></rss>", content_type="application/rss+xml")

    async def _page(self, request: web.Request) -> web.Response:
        self.hits[request.path_qs] += 1
        return web.Response(text=f"<html><h1>{request.path_qs}</h1></html>", content_type="text/html")

    async def _echo(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.seen.append(
            {"method": request.method, "headers": dict(request.headers), "body": body, "cookies": dict(request.cookies)}
        )
        return web.Response(text="ok")


@pytest.fixture
async def site() -> AsyncIterator[tuple[FeedSite, str]]:
    feeds = FeedSite()
    async with serve(feeds.app()) as base:
        yield feeds, base


class Posts(Spider):
    name = "posts"

    def parse_post(self, response: Response) -> Iterator[dict[str, Any]]:
        yield {"url": response.url, "title": response.css("h1::text").get()}


def urls(items: list[dict[str, Any]], base: str) -> set[str]:
    return {item["url"].removeprefix(base) for item in items}


async def test_a_spider_with_feeds_crawls_every_entry_of_rss_and_atom(site: tuple[FeedSite, str]) -> None:
    feeds, base = site
    source = Feeds(base + "/rss.xml", base + "/blog/atom.xml", callback="parse_post")
    items, stats = await collect(Posts, settings=SETTINGS, sources=[source])
    assert urls(items, base) == {
        "/posts/1", "/posts/2?a=1&b=2", "/posts/3", "/posts/4",  # RSS: <link> (relative too), a permalink <guid>
        "/blog/entries/a.html", "/archive/b.html", "/blog/entries/c.html",  # Atom: xml:base, alternate links only
    }  # fmt: skip
    assert feeds.hits["/rss.xml"] == feeds.hits["/blog/atom.xml"] == 1
    assert "/blog/c.mp3" not in feeds.hits and "/blog/atom.xml" not in urls(items, base)
    assert stats.requests_failed == stats.requests_dropped == 0
    assert_accounted(stats)


async def test_since_skips_older_entries_and_keeps_undated_ones(site: tuple[FeedSite, str]) -> None:
    feeds, base = site
    source = Feeds(base + "/rss.xml", base + "/blog/atom.xml", callback="parse_post", since="2024-06-01")
    items, _ = await collect(Posts, settings=SETTINGS, sources=[source])
    # Two: 01:00 +0200 is 2024-05-31T23:00Z, older; Three and C have no date: kept
    assert urls(items, base) == {"/posts/3", "/posts/4", "/archive/b.html", "/blog/entries/c.html"}
    assert "/posts/1" not in feeds.hits and "/blog/entries/a.html" not in feeds.hits


async def test_entries_past_the_cap_are_dropped_and_named(site: tuple[FeedSite, str]) -> None:
    feeds, base = site
    settings = Settings(store="", retries=0, sitemap_max_urls=4)  # the default cap, shared with sitemaps
    items, stats = await collect(Posts, settings=settings, sources=[Feeds(base + "/big.xml", callback="parse_post")])
    assert urls(items, base) == {f"/many/{n}" for n in range(4)}
    assert stats.dropped_by_reason == {"feed too many entries": 1}
    assert stats.counters["feed entries past the cap"] == 26
    assert_accounted(stats)

    items, _ = await collect(Posts, settings=settings, sources=[Feeds(base + "/big.xml", max_entries=2)])
    assert not items and {f"/many/{n}" for n in range(2)} <= set(feeds.hits)  # parse: no items, its own cap


async def test_bad_feeds_and_sources_are_one_line_errors_before_anything_is_fetched() -> None:
    with pytest.raises(ConfigError, match="not an http"):
        Feeds("ftp://example.com/feed.xml")
    with pytest.raises(ConfigError, match="since='last week'"):
        Feeds("https://example.com/feed.xml", since="last week")
    with pytest.raises(ConfigError, match="Feeds callback 'parse_nothing': spider Posts has no such method"):
        await collect(Posts, settings=SETTINGS, sources=[Feeds("http://127.0.0.1:9/f.xml", callback="parse_nothing")])
    with pytest.raises(ConfigError, match=r"sources\[0\] is 'http://127.0.0.1:9/f.xml', not a source"):
        await collect(Posts, settings=SETTINGS, sources="http://127.0.0.1:9/f.xml")  # as -a sources=URL gives it


class Listing:
    """A source of one's own, in no way known to Spider: a JSON list of pages, paged by ``next``
    (a request with no callback: read by this source again)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def start_requests(self, spider: SourceOwner) -> Iterable[Request]:
        return [Request(self.url)]

    def read(self, response: Response, spider: SourceOwner) -> Iterator[object]:
        data = response.json()
        for path in data["pages"]:
            yield Request(response.urljoin(path), callback=getattr(spider, "parse_post"))  # noqa: B009
        if data["next"]:
            yield Request(response.urljoin(data["next"]))


async def test_a_new_source_needs_no_edit_of_spider_and_sits_beside_sitemaps_and_rules() -> None:
    pages = {"/list/1": {"pages": ["/p/a", "/p/b"], "next": "/list/2"}, "/list/2": {"pages": ["/p/c"], "next": None}}

    async def listing(request: web.Request) -> web.Response:
        return web.json_response(pages[request.path])

    async def sitemap(request: web.Request) -> web.Response:
        base = f"http://{request.host}"
        text = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>{base}/p/s</loc></url></urlset>'
        return web.Response(text=text, content_type="application/xml")

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=f"<h1>{request.path}</h1>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/list/{n}", listing)
    app.router.add_get("/sitemap.xml", sitemap)
    app.router.add_get("/p/{x}", page)
    async with serve(app) as base:
        items, stats = await collect(
            Posts,
            settings=SETTINGS,
            sources=[Listing(base + "/list/1")],
            sitemap_urls=[base + "/sitemap.xml"],
            sitemap_rules=[("", "parse_post")],
        )
    assert urls(items, base) == {"/p/a", "/p/b", "/p/c", "/p/s"}
    assert stats.requests_failed == stats.requests_dropped == 0
    assert_accounted(stats)


async def test_a_paused_crawl_resumes_the_requests_a_source_made_for_itself(tmp_path: Path) -> None:
    """A source's own requests are saved by name (``_parse_source``) and read by it after a resume."""
    release = asyncio.Event()
    pages = {"/list/1": {"pages": ["/p/a"], "next": "/list/2"}, "/list/2": {"pages": ["/p/b"], "next": None}}
    hits: Counter[str] = Counter()

    async def listing(request: web.Request) -> web.Response:
        hits[request.path] += 1
        if request.path == "/list/2":
            await release.wait()  # held until the first run is paused: it is pending when the state is saved
        return web.json_response(pages[request.path])

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=f"<h1>{request.path}</h1>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/list/{n}", listing)
    app.router.add_get("/p/{x}", page)
    stored: list[Any] = []

    async def run(base: str, pause: bool) -> Any:
        # the held /list/2 is aborted at once when paused (it never answers before the resume): pending
        engine = Engine(state_dir=tmp_path / "state", overrides={"store": "", "retries": 0, "shutdown_timeout": 0.1})

        async def keep(event: ItemStored) -> None:
            stored.append(event.item)
            if pause:
                engine.stop("paused by the test")

        engine.subscribe(ItemStored, keep)
        async with engine:
            return await engine.crawl(Posts, sources=[Listing(base + "/list/1")])

    async with serve(app) as base:
        first = await run(base, pause=True)
        assert first.requests_pending >= 1 and hits["/list/2"] <= 1
        release.set()
        await run(base, pause=False)
    assert urls(stored, base) == {"/p/a", "/p/b"}
    assert hits["/list/1"] == 1  # not read again: the resume took up where the pause left it


async def test_xml_nodes_and_csv_rows_read_product_feeds(site: tuple[FeedSite, str]) -> None:
    _, base = site

    class Products(Spider):
        name = "products"
        start_urls = [base + "/products.xml", base + "/products.csv"]

        def parse(self, response: Response) -> Iterator[dict[str, Any]]:
            if response.url.endswith(".xml"):
                for node in response.xml_nodes("item"):
                    yield {"from": "xml", "sku": node.css("id::text").get(), "name": node.xpath("title/text()").get()}
            else:
                for row in response.csv_rows(delimiter=";"):
                    yield {"from": "csv", "sku": row["sku"], "name": row["name"]}

    items, _ = await collect(Products, settings=SETTINGS)
    by_source = {kind: [(i["sku"], i["name"]) for i in items if i["from"] == kind] for kind in ("xml", "csv")}
    assert by_source == {
        "xml": [("p1", "Kettle"), ("p2", "Toaster & grill"), ("p3", "Mug")],  # namespaced g:id read as id
        "csv": [("p1", "Kettle"), ("p2", "Toaster; grill"), ("p3", "Mug")],  # blank and broken rows skipped
    }


def test_iterators_stream_namespaced_nodes_and_take_given_headers() -> None:
    body = PRODUCTS_XML.encode()
    response = Response("http://shop.example/feed.xml", body=body, headers={"Content-Type": "application/xml"})
    nodes = response.xml_nodes("item")
    first = next(nodes)  # one node read, not the whole document
    assert first.xpath("id/text()").get() == "p1" and first.css("price::text").get() == "19.90 EUR"
    assert [n.xpath("title/text()").get() for n in nodes] == ["Toaster & grill", "Mug"]
    assert [n.xpath("text()").get() for n in response.xml_nodes("{http://base.google.com/ns/1.0}id")] == [
        "p1", "p2", "p3",
    ]  # fmt: skip
    csv_page = Response("http://shop.example/p.csv", body=b"a,1\nb,2\n", headers={"Content-Type": "text/csv"})
    assert list(csv_page.csv_rows(headers=["name", "n"])) == [{"name": "a", "n": "1"}, {"name": "b", "n": "2"}]


async def test_jmespath_on_a_json_page(site: tuple[FeedSite, str]) -> None:
    _, base = site

    class Api(Spider):
        name = "api"
        start_urls = [base + "/api.json"]

        def parse(self, response: Response) -> Iterator[dict[str, Any]]:
            for row in response.jmespath("rows[?id < `2`]"):
                yield {"name": row.jmespath("name").get(), "tags": row.jmespath("tags").getall()}
            yield {"names": response.jmespath("rows[].name").getall(), "next": response.jmespath("next").get()}

    items, _ = await collect(Api, settings=SETTINGS)
    assert items == [{"name": "Ada", "tags": ["x"]}, {"names": ["Ada", "Grace"], "next": None}]


CURL = """curl '{base}/echo?q=1' -X PUT -H 'Content-Type: application/json' -H 'X-Token: s3cret' \\
  --data-raw '{{"a": "b c"}}' -b 'sid=42; lang=fr' -u 'bob:pw' --compressed -L"""


def test_from_curl_reads_what_a_browser_copies_and_to_curl_round_trips() -> None:
    request = Request.from_curl(CURL.format(base="http://api.example"), meta={"k": 1})
    assert (request.method, request.url, request.body) == ("PUT", "http://api.example/echo?q=1", b'{"a": "b c"}')
    assert request.headers == {
        "Content-Type": "application/json", "X-Token": "s3cret", "Authorization": "Basic Ym9iOnB3",
    }  # fmt: skip
    assert request.meta == {"k": 1, "cookies": {"sid": "42", "lang": "fr"}}
    again = Request.from_curl(request.to_curl())
    assert (again.method, again.url, again.headers, again.body) == (
        request.method, request.url, request.headers, request.body,
    )  # fmt: skip
    assert again.meta["cookies"] == {"sid": "42", "lang": "fr"}
    assert "X-Token: s3cret" in request.to_curl()  # not redacted: the user asked for the command
    posted = Request.from_curl("curl http://api.example/f -d a=1 --data b=2")
    assert (posted.method, posted.body) == ("POST", b"a=1&b=2")
    assert posted.headers["Content-Type"] == "application/x-www-form-urlencoded"
    with pytest.raises(ValueError, match="unsupported options: --proxy http://p:3128 -Z"):
        Request.from_curl("curl http://api.example/ --proxy http://p:3128 -Z")
    assert Request.from_curl("curl http://api.example/ -Z", ignore_unknown_options=True).url == "http://api.example/"
    with pytest.raises(ValueError, match="no URL"):
        Request.from_curl("curl -H 'A: b'")


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
async def test_curl_and_eclaw_send_the_same_request(site: tuple[FeedSite, str]) -> None:
    feeds, base = site
    request = Request.from_curl(CURL.format(base=base))

    class Echo(Spider):
        name = "echo"

        async def start_requests(self) -> AsyncIterator[Request]:
            yield request

        def parse(self, response: Response) -> Iterator[dict[str, Any]]:
            yield {"status": response.status}

    items, _ = await collect(Echo, settings=SETTINGS)
    assert items == [{"status": 200}]
    process = await asyncio.create_subprocess_shell(
        request.to_curl() + " --silent --output /dev/null", stdout=asyncio.subprocess.DEVNULL
    )
    assert await process.wait() == 0
    by_eclaw, by_curl = feeds.seen
    for seen in (by_eclaw, by_curl):
        assert seen["method"] == "PUT" and seen["body"] == b'{"a": "b c"}'
        assert seen["cookies"] == {"sid": "42", "lang": "fr"}
        for name in ("Content-Type", "X-Token", "Authorization"):
            assert seen["headers"][name] == request.headers[name]
