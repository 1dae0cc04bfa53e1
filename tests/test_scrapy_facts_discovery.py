"""Facts from Scrapy's and Protego's own tests about sitemaps, robots.txt and links (issue 37),
re-expressed against eclaw's public API and a local server: blank lines before a sitemap's
``<?xml``, ``meta["dont_obey_robotstxt"]``, a robots.txt ``Sitemap:`` line that is not UTF-8, and a
link's query encoded in the page's encoding."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import web

from eclaw import Engine, Request, Response, Spider
from eclaw.discovery import Rule
from eclaw.stats import Stats
from eclaw.testing import serve

LATIN1_PAGE = (
    b'<html><head><meta charset="iso-8859-1"></head><body>'
    b'<a class="f" href="/follow?q=caf\xe9">follow</a>'
    b'<a class="all" href="/all?q=na\xefve">all</a>'
    b'<a class="rule" href="/rule?q=\xe9t\xe9">rule</a>'
    b"</body></html>"
)


def _site(heard: list[str]) -> web.Application:
    """A site that records each request's path and raw query, as sent."""

    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        heard.append(request.raw_path)
        return await handler(request)  # type: ignore[no-any-return]

    async def robots(request: web.Request) -> web.Response:
        host = f"http://{request.host}"
        body = (
            b"User-agent: *\nDisallow: /secret\nDisallow: /closed\n"
            b"Sitemap: " + host.encode() + b"/bad\xff\xfe.xml\n"
            b"Sitemap: " + host.encode() + b"/good.xml\n"
        )
        return web.Response(body=body, content_type="text/plain")

    async def blank_first(request: web.Request) -> web.Response:
        host = f"http://{request.host}"
        body = (
            "\n\n   \n"
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<url><loc>{host}/one</loc></url><url><loc>{host}/two</loc></url></urlset>\n"
        )
        return web.Response(text=body, content_type="application/xml")

    async def good(request: web.Request) -> web.Response:
        host = f"http://{request.host}"
        body = (
            '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<url><loc>{host}/listed</loc></url></urlset>"
        )
        return web.Response(text=body, content_type="application/xml")

    async def latin1(request: web.Request) -> web.Response:
        return web.Response(body=LATIN1_PAGE, headers={"Content-Type": "text/html; charset=iso-8859-1"})

    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<html><body>page</body></html>", content_type="text/html")

    app = web.Application(middlewares=[web.middleware(record)])
    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/blank-first.xml", blank_first)
    app.router.add_get("/good.xml", good)
    app.router.add_get("/latin1", latin1)
    app.router.add_get("/{tail:.*}", page)
    return app


async def _crawl(tmp: Path, spider: type[Spider], **settings: Any) -> tuple[Stats, list[str]]:
    heard: list[str] = []
    overrides = {
        "store": "",
        "drops": str(tmp / "drops.jsonl"),
        "failures": str(tmp / "failures.jsonl"),
        "snapshots": str(tmp / "snapshots"),
        **settings,
    }
    async with serve(_site(heard)) as base, Engine(overrides=overrides) as engine:
        stats = await engine.crawl(spider, base=base)
    return stats, heard


async def test_a_sitemap_with_blank_lines_before_its_xml_declaration_is_read(tmp_path: Path) -> None:
    """Scrapy's Sitemap parses with lxml's recover mode: whitespace before ``<?xml`` is no error."""

    class Blank(Spider):
        name = "blank"

        def __init__(self, base: str = "", **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.sitemap_urls = [base + "/blank-first.xml"]

        def parse(self, response: Response) -> Any:
            yield {"url": response.url}

    stats, heard = await _crawl(tmp_path, Blank)
    assert stats.requests_failed == 0, stats.failed_by_reason
    assert "/one" in heard and "/two" in heard


async def test_dont_obey_robotstxt_in_meta_skips_the_robots_check_for_that_request(tmp_path: Path) -> None:
    class OptOut(Spider):
        name = "optout"
        base = ""

        def __init__(self, base: str = "", **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.base = base

        async def start_requests(self) -> AsyncIterator[Request]:
            yield Request(self.base + "/secret", meta={"dont_obey_robotstxt": True})
            yield Request(self.base + "/closed")

        def parse(self, response: Response) -> Any:
            yield {"url": response.url}

    stats, heard = await _crawl(tmp_path, OptOut, obey_robots=True)
    assert "/secret" in heard  # its own opt-out, as in Scrapy
    assert "/closed" not in heard and stats.dropped_by_reason == {"robots": 1}


async def test_a_robots_sitemap_line_that_is_not_utf8_is_dropped(tmp_path: Path) -> None:
    """Protego and Scrapy read robots.txt as UTF-8: a ``Sitemap:`` URL with bytes that are not
    is no URL of the site's; the valid line after it is still read."""

    class FromRobots(Spider):
        name = "from-robots"

        def __init__(self, base: str = "", **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.sitemap_urls = [base + "/robots.txt"]

        def parse(self, response: Response) -> Any:
            yield {"url": response.url}

    stats, heard = await _crawl(tmp_path, FromRobots)
    assert [path for path in heard if path.endswith(".xml")] == ["/good.xml"]
    assert "/listed" in heard and stats.requests_failed == 0


async def test_a_links_query_is_encoded_in_the_pages_encoding(tmp_path: Path) -> None:
    """Scrapy's link extractor and ``response.follow`` encode a link's query in the response's
    encoding (``safe_url_string(url, encoding)``): ``café`` on a Latin-1 page is ``caf%E9``."""

    class Latin(Spider):
        name = "latin"
        rules = [Rule(restrict_css="a.rule")]

        def __init__(self, base: str = "", **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.start_urls = [base + "/latin1"]

        def parse(self, response: Response) -> Any:
            if not response.url.endswith("/latin1"):
                return
            yield response.follow(response.css("a.f")[0])
            yield from response.follow_all(css="a.all")
            yield from super().parse(response)

    _, heard = await _crawl(tmp_path, Latin)
    assert "/follow?q=caf%E9" in heard
    assert "/all?q=na%EFve" in heard
    assert "/rule?q=%E9t%E9" in heard
