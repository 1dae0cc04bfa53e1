"""The rendered-pages benchmark (bench/browser.py) at a tiny size: its JavaScript site, its eclaw
side end to end with a real Chromium, and the checks that keep a wrong run from counting.
Crawlee's side is not run here (it needs npm packages; ``make bench-browser`` installs them)."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest

from bench.browser import run_once
from bench.browser_site import app, expected_items
from bench.run import check_items
from bench.site import app_process
from eclaw import ConfigError, Request, Settings, Spider
from eclaw.fetchers.browser import BrowserFetcher, actions, find_chromium
from eclaw.testing import serve

PAGES = 5  # one list page and 4 products: a crawl is a Chromium launch and a few tenths of a CPU-second a page
HIDDEN = 2  # the product no list links to, for the crawl that misses a page


class Shop(Spider):
    name = "bench-shop"


@pytest.fixture(scope="module")
def chromium() -> str:
    """No Chromium is a failure, never a skip: ``make test`` installs it."""
    try:
        return find_chromium("")
    except ConfigError as exc:
        pytest.fail(f"{exc} (make test installs it)")


async def test_the_site_has_no_item_and_no_link_until_its_script_ran() -> None:
    async with serve(app(PAGES)) as base, aiohttp.ClientSession() as session:
        async with session.get(f"{base}/list/0") as shell:
            html = await shell.text()
        async with session.get(f"{base}/api/list/0") as api:
            listed = await api.json()
    assert "<a " not in html and "LIST-0000" not in html and "app.js" in html
    assert [p["id"] for p in listed["products"]] == list(range(PAGES - 1)) and listed["next"] is None
    assert len(expected_items(PAGES)) == PAGES and expected_items(PAGES)[0]["sku"] == "LIST-0000"


async def test_the_site_counts_images_and_fonts_a_browser_did_not_block(chromium: str) -> None:
    """The bench refuses a run whose crawler let images or fonts through: the count must see them."""
    fetcher = BrowserFetcher()
    await fetcher.open(Shop(), Settings(store="", browser_block="", browser_screenshots=""))
    try:
        async with serve(app(PAGES)) as base:
            page = Request(f"{base}/p/3", meta={"browser": actions({"wait_for": "h1.title"}, wait_until="networkidle")})
            response = await fetcher.fetch(page)
            async with aiohttp.ClientSession() as session, session.get(f"{base}/stats") as stats:
                served = await stats.json()
    finally:
        await fetcher.close()
    assert response.css("span.sku::text").get() == "SKU-000003"
    assert served["images"] == 3 and served["fonts"] == 1 and served["api"] == 1


def test_eclaw_crawls_the_whole_site_and_its_tree_is_measured(chromium: str, tmp_path: Path) -> None:
    with app_process("bench.browser_site", "--pages", str(PAGES)) as base:
        run = run_once("eclaw", base, PAGES, 4, chromium, work=tmp_path)
    assert run.pages == PAGES and run.pages_per_s > 0
    assert run.peak_pss_mb > 150  # Chromium's processes are in the tree: the crawler alone is ~60 MB
    assert run.cpu_seconds > 1 and max(done for _, done, _ in run.samples) == PAGES  # samples until the end


def test_a_page_the_crawl_missed_keeps_the_run_from_counting(chromium: str, tmp_path: Path) -> None:
    wrong = f"{PAGES - 1} items for {PAGES} pages; 1 pages missing \\(SKU-{HIDDEN:06d}\\)$"
    missing = rf"eclaw: incomplete or wrong crawl: {wrong}"
    hidden = app_process("bench.browser_site", "--pages", str(PAGES), "--hide", str(HIDDEN))  # nothing links to it
    with hidden as base, pytest.raises(SystemExit, match=missing):
        run_once("eclaw", base, PAGES, 4, chromium, work=tmp_path)


def test_duplicate_and_wrong_items_are_named(tmp_path: Path) -> None:
    expected = expected_items(20)  # no crawl: the checks alone, on the site of 20 pages
    items = [*expected[1:], expected[3]]  # the list page missing, product 2 twice
    items[4] = {**expected[5], "price": 1.0}  # product 4 wrong
    out = tmp_path / "items.jsonl"
    out.write_text("".join(json.dumps(item) + "\n" for item in items))
    with pytest.raises(SystemExit) as failed:
        check_items("crawler", out, expected)
    assert str(failed.value) == (
        "crawler: incomplete or wrong crawl: 1 duplicate items; 1 pages missing (LIST-0000); "
        f"SKU-000004: expected {expected[5]}, got {expected[5] | {'price': 1.0}}"
    )
