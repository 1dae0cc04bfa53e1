"""``eclaw report``: the HTML page of a traced crawl, read as a user reads it, in a real headless Chromium
at two widths (failing URLs whole, failures by reason, the latency histogram's axis values, the page's
full width), and each failure linked to the error snapshot the crawl saved for it."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from aiohttp import web
from lxml import html as lxml_html

from eclaw import Engine, Response, Spider
from eclaw.cli.main import main
from eclaw.testing import serve
from tests.conftest import headless_chromium

# Paths long enough to be cut by any fixed-width label (and to need wrapping at 800 px).
LONG = "-".join(f"segment{n}" for n in range(24))
PAGES = {
    f"/broken/{LONG}": "callback error: KeyError",
    f"/odd/{LONG}/one": "callback error: ValueError",
    f"/odd/{LONG}/two": "callback error: ValueError",
    f"/missing/{LONG}": "http 404",
}


def site() -> web.Application:
    """A home page linking to the failing pages and a few good ones; ``/missing/...`` answers 404."""

    async def home(request: web.Request) -> web.Response:
        links = [*PAGES, *(f"/ok/{n}" for n in range(6))]
        body = "".join(f'<a href="{link}">{n}</a>' for n, link in enumerate(links))
        return web.Response(text=f"<html><body>{body}</body></html>", content_type="text/html")

    async def page(request: web.Request) -> web.Response:
        if request.path.startswith("/missing/"):
            raise web.HTTPNotFound(text="no such page")
        return web.Response(text="<html><p>a page</p></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/", home)
    app.router.add_get("/{tail:.+}", page)
    return app


class Failing(Spider):
    """Follows the home page's links; two kinds of pages make its callback raise."""

    name = "failing"

    def parse(self, response: Response) -> Iterator[Any]:
        if "/broken/" in response.url:
            raise KeyError("price")
        if "/odd/" in response.url:
            raise ValueError("no title")
        yield from response.follow_all(css="a")
        yield {"url": response.url}


async def traced_report(tmp_path: Path, name: str = "report.html") -> tuple[str, Path]:
    """Crawl the site with ``--trace``, render ``eclaw report`` (in-process); the base URL and the page."""
    trace, out = tmp_path / "trace.jsonl", tmp_path / name
    async with serve(site()) as base, Engine(overrides={"trace": str(trace), "retries": 0}) as engine:
        stats = await engine.crawl(Failing, start_urls=[base + "/"])
    assert stats.requests_failed == len(PAGES)
    assert main(["report", str(trace), "-o", str(out)]) == 0
    return base, out


def failure_rows(page: str) -> list[tuple[str, str, str | None]]:
    """The failures table: (URL, reason, the snapshot link's target or None)."""
    rows = []
    for row in lxml_html.fromstring(page).cssselect("table.failures tr")[1:]:
        cells = row.findall("td")
        links = row.cssselect("a.snapshot")
        rows.append((cells[0].text_content(), cells[1].text_content(), links[0].get("href") if links else None))
    return rows


async def test_each_failure_links_to_the_snapshot_this_crawl_saved(tmp_path: Path) -> None:
    """A callback's failure links to its snapshot folder (``eclaw shell FOLDER`` opens it); a second
    run into the same folder links its own snapshots, never the first run's."""
    first = await traced_report(tmp_path, "first.html")
    second = await traced_report(tmp_path, "second.html")
    linked: dict[str, set[str]] = {}
    for base, name in (first, second):
        rows = failure_rows(name.read_text())
        assert {(url, reason) for url, reason, _ in rows} == {(base + path, r) for path, r in PAGES.items()}
        for url, reason, href in rows:
            if href is None:
                assert not reason.startswith("callback error")  # every callback's failure has its snapshot
                continue
            folder = Path(unquote(urlsplit(href).path))
            saved = json.loads((folder / "snapshot.json").read_text())
            assert (saved["request"]["url"], saved["reason"]) == (url, reason)
            linked.setdefault(name.name, set()).add(folder.name)
    assert len(linked["first.html"]) >= 3 and len(linked["second.html"]) >= 3  # the callbacks' (and HTTP's)
    assert linked["first.html"].isdisjoint(linked["second.html"])


async def test_the_report_reads_whole_in_chromium_at_two_widths(tmp_path: Path) -> None:
    base, report = await traced_report(tmp_path)
    failing = {base + path for path in PAGES}
    async with headless_chromium() as browser:
        for width in (800, 1600):
            page = await browser.new_page(viewport={"width": width, "height": 900})
            await page.goto(report.as_uri())
            seen = await page.evaluate(MEASURE)
            shot = tmp_path / f"report-{width}.png"
            await page.screenshot(path=str(shot), full_page=True)
            await page.close()
            assert {label["text"] for label in seen["urls"]} == failing
            assert all(label["fits"] and label["title"] == label["text"] for label in seen["urls"]), seen["urls"]
            assert seen["reasons"] == sorted(set(PAGES.values())), seen["reasons"]
            assert seen["bars"] == len(set(PAGES.values()))
            assert all(label["fits"] for label in seen["reason_labels"])
            ticks = [float(tick) for tick in seen["axis"]]  # every tick a number
            assert len(ticks) >= 5 and max(ticks) > 0
            assert abs(seen["main"] - seen["viewport"]) <= 1 and seen["scroll"] <= seen["viewport"], seen
            assert png_size(shot) == (width, seen["height"]) and shot.stat().st_size > 20_000


# What the page shows, measured in the browser: the failing URLs' cells (text, tooltip, whether the text
# fits its box), the failures-by-reason chart, the latency histogram's axis values, the page's width.
MEASURE = """() => {
  const section = title => [...document.querySelectorAll('section')]
    .find(s => s.querySelector('h2').textContent === title);
  const fits = e => ({text: e.textContent, title: e.title, fits: e.scrollWidth <= e.clientWidth});
  const reasons = section('Failures by reason');
  return {
    urls: [...section('Top failing URLs').querySelectorAll('td.url')].map(fits),
    reasons: [...reasons.querySelectorAll('.label')].map(e => e.textContent).sort(),
    reason_labels: [...reasons.querySelectorAll('.label')].map(fits),
    bars: reasons.querySelectorAll('.bar').length,
    axis: [...section('Download latency').querySelectorAll('.axis span')].map(e => e.textContent),
    main: document.querySelector('main').getBoundingClientRect().width,
    viewport: document.documentElement.clientWidth,
    scroll: document.documentElement.scrollWidth,
    height: document.documentElement.scrollHeight,
  };
}"""


def png_size(path: Path) -> tuple[int, int]:
    """A PNG's width and height (its IHDR chunk); fails on anything but a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height
