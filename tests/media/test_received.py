"""``response.received``: the exchange as on the wire, kept only when asked (eclaw.http.wire)."""

from __future__ import annotations

import gzip
import zlib

import pytest
import pytest_asyncio
from aiohttp import web

from eclaw import Request, Settings, Spider
from eclaw.exceptions import ResponseTooLarge
from eclaw.fetchers.plain import PlainFetcher
from eclaw.http.wire import Received, decoder_for
from eclaw.testing import serve

pytestmark = pytest.mark.asyncio(loop_scope="module")

PAGE = "<html><body><h1>zipped ünïcode</h1></body></html>".encode()


class Local(Spider):
    name = "local"
    allowed_domains = ["127.0.0.1"]


def _app() -> web.Application:
    app = web.Application()

    async def gzipped(request: web.Request) -> web.Response:
        headers = [("Content-Encoding", "gzip"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"), ("X-Z", "last")]
        response = web.Response(body=gzip.compress(PAGE), content_type="text/html", reason="Fine Thanks")
        for name, value in headers:
            response.headers.add(name, value)
        return response

    async def raw_deflate(request: web.Request) -> web.Response:
        squeeze = zlib.compressobj(wbits=-15)
        body = squeeze.compress(PAGE) + squeeze.flush()
        return web.Response(body=body, headers={"Content-Encoding": "deflate", "Content-Type": "text/html"})

    async def bomb(request: web.Request) -> web.Response:
        body = gzip.compress(b"\0" * (8 * 1024 * 1024), compresslevel=9)
        return web.Response(body=body, headers={"Content-Encoding": "gzip", "Content-Type": "text/html"})

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read(), content_type="text/plain")

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPFound("/gzip")

    app.router.add_get("/gzip", gzipped)
    app.router.add_get("/raw-deflate", raw_deflate)
    app.router.add_get("/bomb", bomb)
    app.router.add_post("/echo", echo)
    app.router.add_get("/moved", moved)
    return app


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def site():
    async with serve(_app()) as base:
        yield base


async def _fetcher(**settings: object) -> PlainFetcher:
    fetcher = PlainFetcher()
    await fetcher.open(Local(), Settings(max_response_size=1024 * 1024, **settings))  # type: ignore[arg-type]
    return fetcher


async def test_off_by_default(site: str) -> None:
    fetcher = await _fetcher()
    try:
        response = await fetcher.fetch(Request(f"{site}/gzip"))
    finally:
        await fetcher.close()
    assert response.body == PAGE and response.received is None


async def test_meta_flag_keeps_the_wire_bytes_and_raw_headers(site: str) -> None:
    fetcher = await _fetcher()
    try:
        response = await fetcher.fetch(Request(f"{site}/gzip", meta={"keep_received": True}))
    finally:
        await fetcher.close()
    received = response.received
    assert isinstance(received, Received)
    assert response.body == PAGE  # decoded as always
    assert gzip.decompress(received.body) == PAGE  # still content-encoded
    assert (received.version, received.status, received.reason) == ("1.1", 200, "Fine Thanks")
    names = [name for name, _ in received.headers]
    assert ("Set-Cookie", "a=1") in received.headers and ("Set-Cookie", "b=2") in received.headers
    assert names.index("Set-Cookie") < names.index("X-Z")  # order and duplicates kept
    assert received.ip == "127.0.0.1" and received.date.tzinfo is not None
    sent = received.request
    assert (sent.method, sent.url, sent.body) == ("GET", f"{site}/gzip", b"")
    assert any(name.lower() == "accept-encoding" for name, _ in sent.headers)
    assert ("Host", site.removeprefix("http://")) in sent.headers


async def test_setting_keeps_and_follows_redirects_to_the_final_hop(site: str) -> None:
    fetcher = await _fetcher(keep_received=True)
    try:
        response = await fetcher.fetch(Request(f"{site}/moved"))
        posted = await fetcher.fetch(Request(f"{site}/echo", method="POST", body=b"x=1"))
    finally:
        await fetcher.close()
    assert response.received is not None and response.received.request.url == f"{site}/gzip"
    assert posted.received is not None and posted.received.request.body == b"x=1"
    assert posted.received.body == b"x=1" == posted.body  # not encoded: the same bytes, no copy


async def test_raw_deflate_is_decoded(site: str) -> None:
    fetcher = await _fetcher(keep_received=True)
    try:
        response = await fetcher.fetch(Request(f"{site}/raw-deflate"))
    finally:
        await fetcher.close()
    assert response.body == PAGE and response.received is not None
    assert zlib.decompress(response.received.body, wbits=-15) == PAGE


async def test_gzip_bomb_is_cut_off_after_decoding(site: str) -> None:
    fetcher = await _fetcher(keep_received=True)
    try:
        with pytest.raises(ResponseTooLarge, match="decoded body over max_response_size"):
            await fetcher.fetch(Request(f"{site}/bomb"))
    finally:
        await fetcher.close()


async def test_decoder_bounds_output_chunk_by_chunk() -> None:
    decoder = decoder_for("gzip", 1000, "http://x/")
    assert decoder is not None
    data = gzip.compress(b"a" * 999)
    assert b"".join(decoder.feed(data[i : i + 7]) for i in range(0, len(data), 7)) == b"a" * 999
    assert decoder_for("identity", 10, "u") is None and decoder_for(None, 10, "u") is None
    over = decoder_for("gzip", 1000, "http://x/")
    assert over is not None
    with pytest.raises(ResponseTooLarge):
        over.feed(gzip.compress(b"a" * 1001))
