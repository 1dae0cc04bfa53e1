"""Chromium's memory over many rendered pages, with browser contexts recycled and without.

    python -m bench.browser_memory [--pages 200] [--every 20]

A local site of script-built pages (each fetches 200 listings from a JSON API, renders
them, sets a cookie and a localStorage entry, as sites do) is rendered ``--pages`` times by
the browser fetcher, 4 pages at once, once with ``browser_context_pages=--every`` and once
with recycling off (0). After each page the proportional set size (PSS: shared pages
counted once) of every Chromium process this run started is summed; the report gives
the peak, the last sample and the wall time of each run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

from aiohttp import web

from bench.proctree import descendants, tree_pss
from eclaw import Request, Settings, Spider
from eclaw.fetchers.browser import BrowserFetcher, actions
from eclaw.testing import serve

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Listing</title></head><body>
<ul id="items"></ul><script>
const n = location.pathname.split('/').pop();
document.cookie = 'visit' + (n % 20) + '=' + n + '; path=/';
localStorage.setItem('seen' + n, 'x'.repeat(5000));
fetch('/api/items/' + n).then(r => r.json()).then(items => {
  document.getElementById('items').innerHTML = items.map(i =>
    `<li class="item"><img src="/img/${i.id}.png"><b>${i.name}</b> <i>${i.blurb}</i></li>`).join('');
});
</script></body></html>"""
READY = actions({"wait_for": "li.item"})


class Listing(Spider):
    name = "browser-memory"


def site() -> web.Application:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def items(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        rows = [{"id": n * 1000 + i, "name": f"Item {n}-{i}", "blurb": "lorem ipsum " * 10} for i in range(200)]
        return web.json_response(rows)

    app = web.Application()
    app.router.add_get("/p/{n}", page)
    app.router.add_get("/api/items/{n}", items)
    return app


def chromium_pss() -> int:
    """Bytes of PSS of the Chromium processes under this one."""
    return tree_pss(descendants([os.getpid()]), only=b"chromium")


async def run(base: str, pages: int, every: int) -> dict[str, Any]:
    fetcher = BrowserFetcher()
    await fetcher.open(Listing(), Settings(store="", browser_context_pages=every, browser_pages=4))
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(pages):
        queue.put_nowait(n)
    samples: list[int] = []

    async def worker() -> None:
        while not queue.empty():
            n = queue.get_nowait()
            response = await fetcher.fetch(Request(f"{base}/p/{n}", meta={"browser": READY}))
            assert len(response.css("li.item")) == 200
            samples.append(chromium_pss())

    started = time.perf_counter()
    try:
        await asyncio.gather(*(worker() for _ in range(4)))
        contexts = fetcher.contexts_created
    finally:
        await fetcher.close()
    mib = 1024 * 1024
    return {
        "browser_context_pages": every,
        "pages": pages,
        "contexts": contexts,
        "seconds": round(time.perf_counter() - started, 1),
        "peak_pss_mib": round(max(samples) / mib, 1),
        "last_pss_mib": round(samples[-1] / mib, 1),
        "first_pss_mib": round(samples[0] / mib, 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--every", type=int, default=20, help="browser_context_pages of the recycling run")
    args = parser.parse_args()
    async with serve(site()) as base:
        for every in (args.every, 0):
            print(json.dumps(await run(base, args.pages, every)))


if __name__ == "__main__":
    asyncio.run(main())
