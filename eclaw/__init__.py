"""Eclaw: an event-driven asyncio web-crawling framework.

The public API is deliberately small; events live in :mod:`eclaw.events`,
middlewares in :mod:`eclaw.middlewares`, test helpers in :mod:`eclaw.testing`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from eclaw.engine import Engine
from eclaw.exceptions import CloseSpider, ConfigError, DropItem, EclawError, IgnoreRequest
from eclaw.http import Request, Response
from eclaw.settings import Settings
from eclaw.spider import Spider
from eclaw.stats import Stats

__version__ = "0.1.0"

__all__ = [
    "CloseSpider",
    "ConfigError",
    "DropItem",
    "EclawError",
    "Engine",
    "IgnoreRequest",
    "Request",
    "Response",
    "Settings",
    "Spider",
    "Stats",
    "__version__",
    "run",
]


def run(
    spider: type[Spider] | Spider,
    *,
    outputs: Iterable[str | Path] = (),
    args: Mapping[str, Any] | None = None,
    **overrides: Any,
) -> Stats:
    """Crawl ``spider`` to the end from synchronous code and return its stats.

    ``args`` are the spider's arguments (what ``-a NAME=VALUE`` gives on the command
    line): ``eclaw.run(ShopSpider, args={"base_url": "http://..."})``. Settings come
    from the defaults, ``ECLAW_*`` environment variables, the spider's
    ``custom_settings`` and then ``overrides`` (``concurrency=32``). Items go to
    ``outputs``, or to the SQLite store when there are none; the run is recorded in
    the store either way (``store=""`` turns that off). Not for use inside a
    running event loop: there, use :class:`Engine`.
    """
    settings = Settings.from_env()
    store = settings.replace(overrides).store
    outputs = list(outputs) or ([store] if store else [])
    engine = Engine(settings, overrides=overrides, outputs=outputs, store=store or None)

    async def main() -> Stats:
        async with engine:
            return await engine.crawl(spider, **dict(args or {}))

    return asyncio.run(main())
