"""The fault-injection site: one local aiohttp app with every kind of broken page.

``/`` links to every fault. Each path records its hits, so tests can assert
how many times the crawler asked for it (retries) and what it never asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
from collections import Counter
from functools import cache

from aiohttp import web

from tests.sites import cut_short

LONG = "/long/" + "x" * 9000  # over max_url_length (8192): dropped, and listed in the drops file
TRACKED = "/long/" + "utm-" * 1500  # a 6,006-character product URL, as real sites link: fetched
MANY = 3000  # links on /many

# Encoded pages: (path, charset used, how it is declared, title text)
ENCODED = [
    ("/enc/cp1251", "cp1251", "meta", "Привет, мир — проверка кодировки"),
    ("/enc/gbk", "gbk", "meta", "你好世界 编码测试页面"),
    ("/enc/shift_jis", "shift_jis", "none", "こんにちは世界、文字コードの試験ページです。"),
]
JAPANESE_BODY = "日本語の文章がここに続きます。文字コードの自動判定のために十分な長さの本文を置きます。" * 8


def html(title: str, *links: str, extra: str = "") -> str:
    anchors = "".join(f'<a href="{href}">link</a> ' for href in links)
    return (
        f'<html><head><title>{title}</title></head><body><h1 class="title">{title}</h1>'
        f'<span class="price">9.99</span>{anchors}{extra}</body></html>'
    )


@cache
def bomb() -> bytes:
    return gzip.compress(b"\0" * (100 * 1024 * 1024), compresslevel=9)  # 100 MB of zeros in ~100 KB


class FaultSite:
    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self._retried = asyncio.Event()  # /slow-first asked again: its first answer may go

    # -- pages that work ----------------------------------------------------------

    async def index(self, request: web.Request) -> web.Response:
        links = [
            "/flaky/2",  # 503 once, then fine
            "/flaky/3",  # 503 twice, then fine
            "/gone/404",
            "/gone/410",
            "/limited",
            "/slow-first",
            "/reset-mid-body",
            "/short-body",
            "/redirect/chain/3",
            "/redirect/loop/a",
            "/redirect/offsite",
            "/redirect/mailto",
            "/huge",
            "/bomb",
            "/malformed",
            *(path for path, *_ in ENCODED),
            "/file.pdf",
            "/image.png",
            "javascript:alert(1)",
            "mailto:shop@example.invalid",
            "data:text/html,<h1>x</h1>",
            "file:///etc/passwd",
            LONG,
            TRACKED,
            "/same?a=1&b=2",
            "/same?b=2&a=1#top",
            "/same?a=1&b=2#reviews",
            "http://offsite.invalid/never",
            "/many",
            "/raise/middleware",
            "/raise/pipeline",
            "/raise/handler",
        ]
        return web.Response(text=html("index", *links), content_type="text/html")

    async def leaf(self, request: web.Request) -> web.Response:
        return web.Response(text=html(request.path.strip("/")), content_type="text/html")

    async def many(self, request: web.Request) -> web.Response:
        links = [f"/many/{n}" for n in range(MANY)] * 2  # every link twice
        return web.Response(text=html("many", *links), content_type="text/html")

    async def malformed(self, request: web.Request) -> web.Response:
        body = (
            "<html><head><title>broken</title><body><h1 class=title>Broken <b>markup</h1>"
            "<span class=price>12.50</div><a href=/leaf/from-malformed>next<table><tr><td>cell"
        )
        return web.Response(text=body, content_type="text/html")

    async def encoded(self, request: web.Request) -> web.Response:
        _, charset, declared, title = next(e for e in ENCODED if e[0] == request.path)
        meta = f'<meta charset="{charset}">' if declared == "meta" else ""
        extra = f"<p>{JAPANESE_BODY}</p>" if charset == "shift_jis" else ""
        text = html(title, extra=extra).replace("<head>", f"<head>{meta}")
        return web.Response(body=text.encode(charset), headers={"Content-Type": "text/html"})

    async def binary(self, request: web.Request) -> web.Response:
        kind = "application/pdf" if request.path.endswith(".pdf") else "image/png"
        return web.Response(body=bytes(range(256)) * 64, content_type=kind)

    # -- faults ----------------------------------------------------------------------

    async def flaky(self, request: web.Request) -> web.Response:
        if self.hits[request.path] < int(request.match_info["n"]):
            return web.Response(status=503, text="busy")
        return await self.leaf(request)

    async def gone(self, request: web.Request) -> web.Response:
        return web.Response(status=int(request.match_info["code"]), text="gone")

    async def limited(self, request: web.Request) -> web.Response:
        if self.hits[request.path] == 1:
            return web.Response(status=429, text="slow down", headers={"Retry-After": "1"})
        return await self.leaf(request)

    async def slow_first(self, request: web.Request) -> web.Response:
        if self.hits[request.path] == 1:  # held past the crawl's timeout: until the retry comes (a minute at most)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._retried.wait(), 60)
        else:
            self._retried.set()
        return await self.leaf(request)

    async def reset_mid_body(self, request: web.Request) -> web.StreamResponse:
        return await cut_short(request, b"<html><body>" + b"a" * 5000, abort=True)

    async def short_body(self, request: web.Request) -> web.StreamResponse:
        return await cut_short(request, b"<html>" + b"a" * 1000, length=100_000)  # Content-Length > body

    async def redirect(self, request: web.Request) -> web.Response:
        what = request.match_info["what"]
        if what.startswith("chain/"):
            n = int(what.split("/")[1])
            raise web.HTTPFound(f"/redirect/chain/{n - 1}" if n else "/leaf/end-of-chain")
        targets = {
            "loop/a": "/redirect/loop/b",
            "loop/b": "/redirect/loop/a",
            "offsite": "http://offsite.invalid/stolen",
            "mailto": "mailto:someone@example.invalid",
        }
        raise web.HTTPFound(targets[what])

    async def huge(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        chunk = b"x" * 65536
        try:
            for _ in range(800):  # 50 MB, never announced
                await response.write(chunk)
        except (ConnectionResetError, ConnectionError):
            pass
        return response

    async def gzip_bomb(self, request: web.Request) -> web.Response:
        return web.Response(body=bomb(), headers={"Content-Encoding": "gzip", "Content-Type": "text/html"})

    def app(self) -> web.Application:
        @web.middleware
        async def count(request: web.Request, handler: web.RequestHandler) -> web.StreamResponse:
            self.hits[request.path] += 1
            return await handler(request)

        app = web.Application(middlewares=[count])
        routes = {
            "/": self.index,
            "/leaf/{name}": self.leaf,
            "/many": self.many,
            "/many/{n}": self.leaf,
            "/same": self.leaf,
            "/malformed": self.malformed,
            "/enc/{name}": self.encoded,
            "/file.pdf": self.binary,
            "/image.png": self.binary,
            "/flaky/{n}": self.flaky,
            "/gone/{code}": self.gone,
            "/limited": self.limited,
            "/slow-first": self.slow_first,
            "/reset-mid-body": self.reset_mid_body,
            "/short-body": self.short_body,
            "/redirect/{what:.+}": self.redirect,
            "/huge": self.huge,
            "/bomb": self.gzip_bomb,
            "/raise/{what}": self.leaf,
            "/long/{tail}": self.leaf,
        }
        for path, handler in routes.items():
            app.router.add_get(path, handler)
        return app
