"""Helpers for testing spiders and middlewares (no internet).

Against a local site::

    async with serve(my_app) as base_url:
        items, stats = await collect(MySpider, start_urls=[base_url + "/"])

With no sockets at all, answers from a mapping or a function (like httpx's MockTransport)::

    mock = MockFetcher({"https://shop.test/": "<a href='/p/1'>one</a>", "https://shop.test/p/1": "<h1>One</h1>"})
    items, stats = await collect(MySpider, engine=Engine(fetcher=lambda: mock))
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from eclaw._deprecated import renamed
from eclaw.engine import Engine
from eclaw.events import ItemStored
from eclaw.http import Request, Response
from eclaw.settings import Settings
from eclaw.spider import Spider
from eclaw.stats import Stats

__all__ = ["MockFetcher", "collect", "demo_site", "serve"]

Answer = Response | str | bytes | dict[str, Any] | list[Any] | tuple[int, Any] | BaseException
Answers = Mapping[str, Answer] | Callable[[Request], Answer | Awaitable[Answer]]


@asynccontextmanager
async def serve(app: web.Application, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve ``app`` on ``host`` (127.0.0.1; on Linux any 127.x.y.z is a host of its own), on a free
    port; yields the base URL (no trailing slash)."""
    server = TestServer(app, host=host, port=0)
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


class MockFetcher:
    """A fetcher with no sockets: each request is answered from ``answers``.

    ``answers`` maps URLs to answers, or is a function (sync or async) of the request.
    An answer is a :class:`~eclaw.Response`; a ``str`` (HTML, 200) or ``bytes``; a
    ``dict``/``list`` (JSON, 200); ``(status, body)``; or an exception to raise (an
    :class:`~eclaw.exceptions.DownloadError` to fail the download as a network error
    would). A URL the mapping lacks is a 404. Redirects are not followed: answers are
    final. ``requests`` lists what was asked for, in order (after the middlewares).
    """

    def __init__(self, answers: Answers) -> None:
        self._answers = answers
        self.requests: list[Request] = []

    async def open(self, spider: Spider, settings: Settings) -> None:
        return None

    async def close(self) -> None:
        return None

    async def fetch(self, request: Request) -> Response:
        self.requests.append(request)
        await asyncio.sleep(0)  # a real download yields to the loop too
        if callable(self._answers):
            answer = self._answers(request)
            if inspect.isawaitable(answer):
                answer = await answer
        else:
            answer = self._answers.get(request.url.partition("#")[0], (404, "not found"))
        return _response(request, answer)


def _response(request: Request, answer: Any) -> Response:
    if isinstance(answer, BaseException):
        raise answer
    if isinstance(answer, Response):
        return answer
    status, body = answer if isinstance(answer, tuple) else (200, answer)
    if isinstance(body, dict | list):
        data, kind = json.dumps(body).encode(), "application/json"
    elif isinstance(body, str):
        data, kind = body.encode(), "text/html; charset=utf-8"
    else:
        data, kind = bytes(body), "application/octet-stream"
    return Response(request.url, status=status, headers={"Content-Type": kind}, body=data, request=request)


__getattr__ = renamed(__name__, {"MockDownloader": "MockFetcher"})  # eclaw-rename: keep (old names, one release)
