"""Embedding example: an aiohttp web app that runs a crawl per request and
streams the items to the client as they arrive (NDJSON).

    eclaw demo --serve --port 8080 &
    python spiders/webapp.py            # serves on 127.0.0.1:8081
    curl 'http://127.0.0.1:8081/crawl?site=http://127.0.0.1:8080'

The crawl runs inside the web app's own event loop; when the client goes
away, the crawl is cancelled and its session closed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from aiohttp import web

from eclaw import Engine, Settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shop import ShopSpider


async def crawl(request: web.Request) -> web.StreamResponse:
    site = request.query.get("site")
    if not site:
        raise web.HTTPBadRequest(text="pass ?site=BASE_URL of the demo shop")
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await response.prepare(request)
    async with Engine(Settings(concurrency=8)) as engine:
        async for item in engine.items(ShopSpider, base_url=site):
            await response.write(json.dumps(item).encode() + b"\n")
    await response.write_eof()
    return response


def make_app() -> web.Application:
    app = web.Application()
    app.router.add_get("/crawl", crawl)
    return app


if __name__ == "__main__":
    web.run_app(make_app(), host="127.0.0.1", port=8081)
