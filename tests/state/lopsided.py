"""A site unlike the shop for lending between processes (``--processes 2``): a Japanese word list in
Shift_JIS, one index page linking to every entry at once, entries from a few hundred bytes to 30 KB.
The pages of one process's part (``slow_part``) answer slowly and the other's at once, so one process
runs out of work long before the other; some slow entries answer 503 the first time (a retry).

Each item names the process that parsed it (``pid``), so a test sees who fetched what.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from aiohttp import web

from eclaw import Response, Spider

ENTRIES = 360
SLOW = 0.15  # seconds a page of the slow part takes
WORDS = ["桜", "山", "川", "空", "海", "森", "雪", "花", "風", "月"]


def flaky(n: int) -> bool:
    """Entries that answer 503 the first time they are asked for."""
    return n % 23 == 4


def make_app(slow: Callable[[str], bool], crowd: Callable[[int], None] = lambda n: None) -> web.Application:
    """The site; ``slow(path)`` says which entries take :data:`SLOW` seconds, and ``crowd(n)`` is told, as
    each slow entry starts, how many slow entries are being answered at once (itself included)."""
    asked: set[int] = set()
    answering = [0]

    async def index(request: web.Request) -> web.Response:
        links = "".join(f'<li><a href="/kotoba/{n}?yomi=1">{WORDS[n % 10]}{n}</a></li>' for n in range(ENTRIES))
        return _page("索引", f"<ul>{links}</ul>")

    async def entry(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if slow(request.path_qs):
            answering[0] += 1
            crowd(answering[0])
            try:
                await asyncio.sleep(SLOW)
            finally:
                answering[0] -= 1
        if flaky(n) and n not in asked:
            asked.add(n)
            return web.Response(status=503, text="busy")
        text = WORDS[n % 10] * (20 + (n * 97) % 5000)  # 60 bytes to 15 KB of two-byte characters
        return _page(f"言葉 第{n}号", f"<h1>{n}</h1><p>{text}</p>")

    app = web.Application()
    app.router.add_get("/", index)
    app.router.add_get("/kotoba/{n}", entry)
    return app


def _page(title: str, body: str) -> web.Response:
    html = f"<html><head><title>{title}</title></head><body>{body}</body></html>"
    return web.Response(body=html.encode("shift_jis"), content_type="text/html", charset="shift_jis")


class WordSpider(Spider):
    name = "kotoba"

    def __init__(self, base_url: str = "http://127.0.0.1:1", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{base_url}/"]

    def parse(self, response: Response) -> Any:
        yield from response.follow_all(css="li a", callback=self.parse_entry)

    def parse_entry(self, response: Response) -> Any:
        yield {"n": int(response.css("h1::text").get()), "title": response.css("title::text").get(), "pid": os.getpid()}
