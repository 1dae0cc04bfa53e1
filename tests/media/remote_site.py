"""The site and spider of test_remote_store.py: a page, numbered files, a gated file and a slow one."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from eclaw import Spider
from eclaw.media import FilesPipeline

MB = 1024 * 1024


def content(name: str) -> bytes:
    return f"file {name} ".encode() * 2000


class Listed(Spider):
    """One item naming the files ``files`` (comma-separated paths) of the site at ``base``."""

    name = "listed"
    allowed_domains = ["127.0.0.1"]
    pipelines = [FilesPipeline]

    def __init__(self, base: str, files: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{base}/page"]
        self.files = [base + path for path in files.split(",")]

    def parse(self, response: Any) -> Any:
        yield {"file_urls": self.files}


def make_app(hits: dict[str, int], gates: dict[str, asyncio.Event]) -> web.Application:
    """``/f/NAME``: a small file; ``/gated/NAME``: waits for ``gates[NAME]``; ``/slow/NAME``: 1 MB, then
    waits for ``gates[NAME]``, then 1 MB more. ``hits`` counts the requests by NAME."""
    app = web.Application()

    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<html></html>", content_type="text/html")

    async def numbered(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        hits[name] = hits.get(name, 0) + 1
        return web.Response(body=content(name), content_type="application/octet-stream")

    async def gated(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        hits[name] = hits.get(name, 0) + 1
        await gates.setdefault(name, asyncio.Event()).wait()
        return web.Response(body=content(name), content_type="application/octet-stream")

    async def slow(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        hits[name] = hits.get(name, 0) + 1
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = 2 * MB
        await response.prepare(request)
        await response.write(b"a" * MB)
        await gates.setdefault(name, asyncio.Event()).wait()  # a run is killed here, half of the file written
        await response.write(b"b" * MB)
        return response

    app.router.add_get("/page", page)
    app.router.add_get("/f/{name}", numbered)
    app.router.add_get("/gated/{name}", gated)
    app.router.add_get("/slow/{name}", slow)
    return app
