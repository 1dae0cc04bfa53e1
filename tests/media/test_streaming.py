"""Streamed bodies: a file far bigger than memory should hold goes to the store at flat RSS, and a
callback can stream a response with ``meta["stream_to"]``."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from eclaw import Request, Settings, Spider
from eclaw.exceptions import ResponseTooLarge
from eclaw.fetchers.plain import PlainFetcher
from eclaw.testing import serve

pytestmark = pytest.mark.asyncio(loop_scope="module")

MB = 1024 * 1024
BIG = 200 * MB
CHUNK = bytes(range(256)) * 4096  # 1 MB


def _app() -> web.Application:
    app = web.Application()

    async def big(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = BIG
        await response.prepare(request)
        for _ in range(BIG // MB):
            await response.write(CHUNK)
        return response

    async def small(request: web.Request) -> web.Response:
        return web.Response(body=CHUNK, content_type="application/octet-stream")

    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<html><body>files</body></html>", content_type="text/html")

    app.router.add_get("/big.bin", big)
    app.router.add_get("/small.bin", small)
    app.router.add_get("/page", page)
    return app


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def site():
    async with serve(_app()) as base:
        yield base


class Sink:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.begun = 0

    async def begin(self) -> None:
        self.begun += 1
        self.chunks.clear()

    async def write(self, data: bytes) -> None:
        self.chunks.append(data)


async def test_a_request_streams_its_body_to_a_sink_under_its_own_bound(site: str) -> None:
    fetcher = PlainFetcher()
    await fetcher.open(Spider(name="s"), Settings(max_response_size=1000))
    try:
        sink = Sink()
        meta = {"stream_to": sink, "max_response_size": 2 * MB}
        response = await fetcher.fetch(Request(f"{site}/small.bin", meta=meta))
        assert response.status == 200 and response.body == b"" and b"".join(sink.chunks) == CHUNK
        with pytest.raises(ResponseTooLarge):
            await fetcher.fetch(Request(f"{site}/small.bin", meta={"stream_to": Sink()}))  # the setting's bound
    finally:
        await fetcher.close()


async def test_a_200_mb_file_is_stored_at_flat_rss(site: str, tmp_path: Path) -> None:
    child = Path(__file__).with_name("flat_rss_child.py")
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(child), site, str(tmp_path), stdout=asyncio.subprocess.PIPE, cwd=Path.cwd()
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0
    report = json.loads(out)
    (stored,) = report["files"]
    assert stored["status"] == "downloaded" and stored["size"] == BIG
    assert stored["checksum"] == hashlib.sha256(CHUNK * (BIG // MB)).hexdigest()
    assert report["after"] - report["before"] < 40 * 1024, report  # kB: the 200 MB never in memory
