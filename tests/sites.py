"""Small local aiohttp sites for tests."""

from __future__ import annotations

import asyncio
import email.utils
import gzip
import time
import zlib
from functools import cache

from aiohttp import web


def page(*links: str, title: str = "page", extra: str = "") -> web.Response:
    anchors = "".join(f'<a href="{href}">{href}</a>' for href in links)
    return web.Response(
        text=f"<html><head><title>{title}</title></head><body>{anchors}{extra}</body></html>", content_type="text/html"
    )


async def cut_short(
    request: web.Request, first: bytes, *, length: int | None = None, abort: bool = False
) -> web.StreamResponse:
    """Send ``first`` then drop the connection: short of ``length`` (Content-Length), or mid-chunk."""
    response = web.StreamResponse(headers={"Content-Type": "text/html"})
    if length is None:
        response.enable_chunked_encoding()
    else:
        response.content_length = length
    await response.prepare(request)
    await response.write(first)
    if request.transport is not None:
        request.transport.abort() if abort else request.transport.close()
    return response


class SlowSite:
    """``/slow/N`` pages that each take ``delay`` seconds; records peak concurrency."""

    def __init__(self, delay: float = 0.5) -> None:
        self.delay = delay
        self.active = 0
        self.peak = 0
        self.hits = 0

    async def slow(self, request: web.Request) -> web.Response:
        self.active += 1
        self.hits += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.active -= 1
        return page(title=request.match_info["n"])

    async def index(self, request: web.Request) -> web.Response:
        count = int(request.query.get("count", "20"))
        return page(*(f"/slow/{n}" for n in range(count)))

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self.index)
        app.router.add_get("/slow/{n}", self.slow)
        return app


@cache
def _bomb() -> bytes:
    return gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)


def fault_app() -> web.Application:
    """Redirects, errors, big bodies, encodings."""
    app = web.Application()

    async def redirect_chain(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n == 0:
            return page(title="end of chain")
        raise web.HTTPFound(f"/chain/{n - 1}")

    async def loop_a(request: web.Request) -> web.Response:
        raise web.HTTPFound("/loop/b")

    async def loop_b(request: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("/loop/a")

    async def offsite(request: web.Request) -> web.Response:
        raise web.HTTPFound("http://elsewhere.invalid/x")

    async def to_mailto(request: web.Request) -> web.Response:
        raise web.HTTPFound("mailto:someone@elsewhere.invalid")

    async def see_other(request: web.Request) -> web.Response:
        raise web.HTTPSeeOther("/echo")

    async def echo(request: web.Request) -> web.Response:
        body = await request.read()
        return web.json_response(
            {
                "method": request.method,
                "body": body.decode(),
                "headers": dict(request.headers),
                "cookies": dict(request.cookies),
            }
        )

    async def set_cookie(request: web.Request) -> web.Response:
        response = page(title="cookie")
        response.set_cookie("session", "abc123")
        return response

    async def status(request: web.Request) -> web.Response:
        return web.Response(status=int(request.match_info["code"]), text="status page", content_type="text/html")

    async def big(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_type = "text/html"
        await response.prepare(request)
        chunk = b"x" * 65536
        try:
            for _ in range(int(request.query.get("chunks", "800"))):  # 50 MB by default
                await response.write(chunk)
        except (ConnectionResetError, ConnectionError):
            pass
        return response

    async def big_declared(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 10, headers={"Content-Length": str(50 * 1024 * 1024)})

    async def gzip_bomb(request: web.Request) -> web.Response:
        return web.Response(body=_bomb(), headers={"Content-Encoding": "gzip", "Content-Type": "text/html"})

    async def gzipped(request: web.Request) -> web.Response:
        body = zlib.compress("<html><body><h1>zipped ünïcode</h1></body></html>".encode())
        return web.Response(body=body, headers={"Content-Encoding": "deflate", "Content-Type": "text/html"})

    async def sleepy(request: web.Request) -> web.Response:
        await asyncio.sleep(float(request.query.get("s", "5")))
        return page(title="late")

    async def truncated(request: web.Request) -> web.StreamResponse:
        return await cut_short(request, b"<html>" + b"a" * 1000, length=100_000)

    routes = {
        "/chain/{n}": redirect_chain,
        "/loop/a": loop_a,
        "/loop/b": loop_b,
        "/offsite": offsite,
        "/mailto": to_mailto,
        "/see-other": see_other,
        "/echo": echo,
        "/set-cookie": set_cookie,
        "/status/{code}": status,
        "/big": big,
        "/big-declared": big_declared,
        "/gzip-bomb": gzip_bomb,
        "/deflate": gzipped,
        "/sleepy": sleepy,
        "/truncated": truncated,
    }
    for path, handler in routes.items():
        app.router.add_route("*", path, handler)
    return app


class FlakySite:
    """Pages that fail on purpose, a given number of times, then work.

    ``/fail/{key}?times=N&status=S`` answers S (default 503) N times, then 200;
    ``/limited/{key}?after=SPEC`` answers 429 with ``Retry-After: SPEC`` once
    (``SPEC`` = ``date:N`` sends an HTTP date N seconds ahead);
    ``/reset/{key}?times=N`` resets the connection N times;
    ``/stall/{key}?times=N&s=S`` sleeps S seconds N times (past a timeout);
    ``/ok/{key}`` always works. ``hits[key]`` lists the loop time of each request.
    """

    def __init__(self) -> None:
        self.hits: dict[str, list[float]] = {}

    def _hit(self, request: web.Request) -> int:
        times = self.hits.setdefault(request.match_info["key"], [])
        times.append(asyncio.get_running_loop().time())
        return len(times)

    async def fail(self, request: web.Request) -> web.Response:
        if self._hit(request) <= int(request.query.get("times", "1")):
            return web.Response(status=int(request.query.get("status", "503")), text="try later")
        return page(title=request.match_info["key"])

    async def limited(self, request: web.Request) -> web.Response:
        if self._hit(request) == 1:
            spec = request.query.get("after", "1")
            if spec.startswith("date:"):
                when = time.time() + float(spec[5:])
                spec = email.utils.formatdate(when, usegmt=True)
            return web.Response(status=429, text="slow down", headers={"Retry-After": spec})
        return page(title="allowed")

    async def reset(self, request: web.Request) -> web.StreamResponse:
        if self._hit(request) <= int(request.query.get("times", "1")):
            assert request.transport is not None
            request.transport.abort()  # RST-like: the client sees the connection drop
            return web.StreamResponse()
        return page(title="after reset")

    async def stall(self, request: web.Request) -> web.Response:
        if self._hit(request) <= int(request.query.get("times", "1")):
            await asyncio.sleep(float(request.query.get("s", "3")))
        return page(title="after stall")

    async def ok(self, request: web.Request) -> web.Response:
        self._hit(request)
        return page(title=request.match_info["key"])

    def app(self) -> web.Application:
        app = web.Application()
        for name in ("fail", "limited", "reset", "stall", "ok"):
            app.router.add_get(f"/{name}/{{key}}", getattr(self, name))
        return app
