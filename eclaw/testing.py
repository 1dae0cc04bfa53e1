"""Helpers for testing spiders against local sites (no internet).

async with serve(my_app) as base_url:
    items, stats = await collect(MySpider, start_urls=[base_url + "/"])
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from eclaw.engine import Engine
from eclaw.events import ItemStored
from eclaw.settings import Settings
from eclaw.spider import Spider
from eclaw.stats import Stats

__all__ = ["collect", "demo_site", "serve"]


@asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    """Serve ``app`` on 127.0.0.1, on a free port; yields the base URL (no trailing slash)."""
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


def demo_site() -> Any:
    """``async with demo_site() as base_url``: the bundled demo shop."""
    from eclaw.demo.site import make_app

    return serve(make_app())


async def collect(
    spider: type[Spider] | Spider,
    *,
    settings: Settings | None = None,
    engine: Engine | None = None,
    **spider_args: Any,
) -> tuple[list[Any], Stats]:
    """Crawl ``spider`` to the end; return the stored items and the stats."""
    engine = engine if engine is not None else Engine(settings)
    items: list[Any] = []

    async def keep(event: ItemStored) -> None:
        items.append(event.item)

    engine.subscribe(ItemStored, keep)
    async with engine:
        stats = await engine.crawl(spider, **spider_args)
    return items, stats
