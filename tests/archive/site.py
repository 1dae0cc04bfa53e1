"""A site to archive, and a spider for it (the CLI runs it): pages linking to each other, a redirect,
a gzip-encoded page, a binary file, a Latin-1 page, a 404, a page whose callback fails, a page
that changes on every visit, and a page fetched with credentials (which the archive must not keep).

:data:`SENT` holds the bytes the server sends for each path (for the gzip page: the compressed
bytes), so a test compares the archive with the site's own bytes.
"""

from __future__ import annotations

import gzip
import itertools
import os
import random
from collections.abc import Iterator
from typing import Any

from aiohttp import web

from eclaw import Request, Response, Spider

PAGES = 12
TOKEN = "s3cr3t-t0ken-value"  # sent in Authorization and Cookie: never in the archive
_rng = random.Random(38)


def _page(n: int) -> bytes:
    links = "".join(f'<a href="/page/{(n + k) % PAGES}">page {(n + k) % PAGES}</a>' for k in (1, 2, 5))
    return f"<html><head><title>page {n}</title></head><body><h1>Page {n}</h1>{links}</body></html>".encode()


_INDEX = (
    "<html><head><title>home</title></head><body>"
    + "".join(f'<a href="{path}">{path}</a>' for path in
              ["/page/0", "/moved", "/gz", "/file.bin", "/latin", "/missing", "/changing", "/private", "/broken"])
    + "</body></html>"
).encode()  # fmt: skip
_GZ_HTML = b"<html><head><title>gzipped</title></head><body>" + b"<p>compressed words</p>" * 200 + b"</body></html>"

SENT: dict[str, tuple[str, bytes]] = {  # path -> (content type, body as sent)
    "/": ("text/html; charset=utf-8", _INDEX),
    **{f"/page/{n}": ("text/html; charset=utf-8", _page(n)) for n in range(PAGES)},
    "/landing": ("text/html; charset=utf-8", b"<html><body><h1>Landed</h1></body></html>"),
    "/gz": ("text/html; charset=utf-8", gzip.compress(_GZ_HTML, mtime=0)),
    "/file.bin": ("application/octet-stream", bytes(_rng.randrange(256) for _ in range(50_000))),
    "/latin": ("text/html; charset=iso-8859-1", "<html><body><p>Café crème à Noël</p></body></html>".encode("latin-1")),
    "/private": ("text/html; charset=utf-8", b"<html><body><p>members only</p></body></html>"),
    "/broken": ("text/html; charset=utf-8", b"<html><body><p>the spider's callback fails here</p></body></html>"),
}
GZ_DECODED = _GZ_HTML
FAILED = {"/missing", "/broken"}  # a 404, a page whose callback raises: archived all the same
PARSED = {*SENT, "/changing"} - FAILED  # the pages whose requests end parsed
REDIRECTS = {"/moved"}  # a 302 to /landing: archived as a hop before the page it led to


def make_app() -> web.Application:
    visits = itertools.count()

    async def handler(request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/moved":
            raise web.HTTPFound("/landing")
        if path == "/changing":
            return web.Response(text=f"<html><body>visit {next(visits)}</body></html>", content_type="text/html")
        if path == "/private" and request.headers.get("Authorization") != f"Bearer {TOKEN}":
            raise web.HTTPUnauthorized()
        if path not in SENT:
            raise web.HTTPNotFound()
        kind, body = SENT[path]
        headers = {"Content-Type": kind, "X-Site": "archive-test"}
        if path == "/gz":
            headers["Content-Encoding"] = "gzip"
        if path == "/private":
            headers["Set-Cookie"] = f"session={TOKEN}; Path=/"
        return web.Response(body=body, headers=headers)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handler)
    return app


class ArchiveSpider(Spider):
    """Follows every link of the site; an item per page."""

    name = "archive-site"
    custom_settings: dict[str, Any] = {"concurrency": 4}

    def __init__(self, base_url: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url = base_url or os.environ.get("ARCHIVE_SITE", "")
        self.start_urls = [self.base_url + "/"]

    def parse(self, response: Response) -> Iterator[Any]:
        if response.url.endswith("/broken"):
            raise ValueError("a bug in the callback")
        yield {"url": response.url, "status": response.status}
        if not response.headers.get("Content-Type", "").startswith("text/html"):
            return
        for href in response.css("a::attr(href)").getall():
            headers = {"Authorization": f"Bearer {TOKEN}", "Cookie": f"token={TOKEN}"} if href == "/private" else {}
            yield Request(response.urljoin(href), headers=headers)
