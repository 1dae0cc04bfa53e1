"""Hostile sites for the input-bound tests: a huge robots.txt, a sitemap index that nests itself,
a sitemap of 60,000 URLs, a page of 400,000 links. Real aiohttp servers on 127.0.0.1, port 0.

Each site records the paths it served (``Hostile.served``), so a test asserts what a crawl
fetched. Big bodies are built once per process and sent from memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import cache

from aiohttp import web

from eclaw.testing import serve

__all__ = [
    "LINKS",
    "ROBOTS_SIZE",
    "SITEMAP_URLS",
    "Hostile",
    "hostile_site",
    "links_page",
    "robots_txt",
]

ROBOTS_SIZE = 9_500_000  # bytes of the huge robots.txt
LINKS = 400_000  # links on the huge page
SITEMAP_URLS = 60_000  # URLs in the big sitemap
NEST_END = 200  # the self-nesting index ends there (so a crawl without a cap ends too)


@cache
def robots_txt() -> bytes:
    """9.5 MB of robots.txt: ``/early`` disallowed in its first line, ``/late`` past 500 KiB."""
    head = b"User-agent: *\nDisallow: /early\n"
    tail = b"Disallow: /late\n"
    lines = (ROBOTS_SIZE - len(head) - len(tail)) // 28  # whole lines of 28 bytes each
    return head + b"".join(b"Disallow: /filler/%08d/\n" % i for i in range(lines)) + tail


@cache
def links_page() -> bytes:
    """A ~9 MB page of 400,000 distinct same-host links."""
    links = b"".join(b'<a href="/l/%d">x</a>\n' % i for i in range(LINKS))
    return b"<!doctype html><html><head><title>links</title></head><body>\n" + links + b"</body></html>\n"


def _urlset(locs: list[str]) -> bytes:
    rows = "".join(f"<url><loc>{loc}</loc></url>\n" for loc in locs)
    return f'<?xml version="1.0"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n{rows}</urlset>\n'.encode()


@dataclass
class Hostile:
    """A running hostile site: its base URL and the paths it served, in order."""

    url: str
    served: list[str] = field(default_factory=list)


def _app(site: Hostile) -> web.Application:
    async def record(request: web.Request, handler: object) -> web.StreamResponse:
        site.served.append(request.path)
        return await handler(request)  # type: ignore[operator, no-any-return]

    async def robots(request: web.Request) -> web.Response:
        return web.Response(body=robots_txt(), content_type="text/plain")

    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<html><body><p>a page</p></body></html>", content_type="text/html")

    async def links(request: web.Request) -> web.Response:
        return web.Response(body=links_page(), content_type="text/html")

    async def nested(request: web.Request) -> web.Response:
        level = int(request.match_info["level"])
        child = f"<sitemap><loc>{site.url}/nest/{level + 1}.xml</loc></sitemap>\n" if level < NEST_END else ""
        body = (
            '<?xml version="1.0"?>\n<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{child}</sitemapindex>\n"
        )
        return web.Response(text=body, content_type="application/xml")

    async def big(request: web.Request) -> web.Response:
        # offsite pages: each taken URL ends as an offsite drop (counted), none is fetched
        body = _urlset([f"http://offsite.invalid/p/{i}" for i in range(SITEMAP_URLS)])
        return web.Response(body=body, content_type="application/xml")

    app = web.Application(middlewares=[web.middleware(record)])
    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/links", links)
    app.router.add_get("/nest/{level}.xml", nested)
    app.router.add_get("/big.xml", big)
    app.router.add_get("/{tail:.*}", page)
    return app


@asynccontextmanager
async def hostile_site() -> AsyncIterator[Hostile]:
    """The hostile site, served on 127.0.0.1 (port 0) while the block runs."""
    site = Hostile("")
    async with serve(_app(site)) as url:
        site.url = url.rstrip("/")
        yield site
