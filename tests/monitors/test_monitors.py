"""Monitors on real crawls of a local site through ``eclaw crawl --monitors``: passing, failing (each
kind), the comparison with the previous run, the results file, the exit code and the alerts."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from eclaw.exceptions import ConfigError
from eclaw.monitors import load_monitors
from eclaw.testing import serve
from tests.inprocess import eclaw_inprocess

SPIDER = """
from eclaw import Spider

class Shop(Spider):
    name = "shop"
    n = "10"

    async def start_requests(self):
        from eclaw import Request
        for i in range(int(self.n)):
            yield Request(f"{self.base_url}/item/{i}")
        yield Request(f"{self.base_url}/broken")
        if getattr(self, "slow", ""):
            yield Request(f"{self.base_url}/item/999", priority=-10)

    async def parse(self, response):
        i = int(response.url.rsplit("/", 1)[1])
        yield {"id": i, "price": None if i % 5 == 0 else i * 2}
"""


RELEASE: dict[str, asyncio.Event] = {}  # item 999 waits for this (a crawl still running)


def _site() -> web.Application:
    async def item(request: web.Request) -> web.Response:
        if request.match_info["i"] == "999" and "slow" in RELEASE:
            await asyncio.wait_for(RELEASE["slow"].wait(), 30)
        return web.Response(text="<html>item</html>", content_type="text/html")

    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=404)

    app = web.Application()
    app.router.add_get("/item/{i}", item)
    app.router.add_get("/broken", broken)
    return app


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def site() -> AsyncIterator[str]:
    async with serve(_site()) as base:
        yield base


async def crawl(
    tmp: Path, base: str, toml: str, n: int = 10, *extra: str, subprocess_: bool = False
) -> tuple[int, str, dict[str, object]]:
    """``eclaw crawl`` of the shop with the monitors of ``toml`` (in ``tmp``, the working directory): its exit
    code, its console, its results file. In this process; ``subprocess_``: as ``python -m eclaw``, for
    the exit code the shell sees."""
    spider, monitors = tmp / "shop.py", tmp / "monitors.toml"
    spider.write_text(SPIDER)
    monitors.write_text(toml)
    args = ["crawl", str(spider), "-a", f"base_url={base}", "-a", f"n={n}", "--monitors", str(monitors)]
    args += ["-s", "retries=0", "--log-level", "WARNING", *extra]
    if subprocess_:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "eclaw", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode is not None
        code, output = process.returncode, out.decode() + err.decode()
    else:
        code, out_text, err_text = await eclaw_inprocess(*args, wait=60)
        output = out_text + err_text
    results = tmp / "eclaw-data" / "shop.monitors.json"
    record = json.loads(results.read_text()) if results.exists() else {}
    return code, output, record


def _verdicts(record: dict[str, object]) -> dict[str, bool]:
    results = record["results"]
    assert isinstance(results, list)
    return {r["name"]: r["ok"] for r in results}


PASSING = """
[monitors]
items = { min = 5, max = 100 }
coverage = { id = 1.0, price = 0.75 }
validation_error_rate = 0.0
http_error_rate = 0.2
finish_reason = "finished"
retries = 0
duration = 120
"""

FAILING = """
[monitors]
items = { min = 50 }
coverage = { price = 0.95 }
http_error_rate = 0.01
http_errors = 0
finish_reason = ["closespider_timeout"]
duration = 0.000001
"""


async def test_monitors_pass_and_exit_zero(site: str, tmp_path: Path) -> None:
    code, output, record = await crawl(tmp_path, site, PASSING)
    assert code == 0, output
    assert record["ok"] is True and record["spider"] == "shop"
    assert set(_verdicts(record)) >= {"item_count", "coverage.id", "coverage.price", "http_error_rate", "retries"}
    assert "monitor coverage.price: ok" in output


async def test_failing_monitors_exit_three_and_say_why(site: str, tmp_path: Path) -> None:
    code, output, record = await crawl(tmp_path, site, FAILING, subprocess_=True)  # the exit status itself
    assert code == 3, output
    verdicts = _verdicts(record)
    assert record["ok"] is False
    failed = {"item_count", "coverage.price", "http_error_rate", "http_errors", "finish_reason", "duration"}
    assert {name for name, ok in verdicts.items() if not ok} == failed
    assert "monitor coverage.price: FAILED - 'price' in 80.0% of 10 items" in output


async def test_items_down_against_the_previous_run(site: str, tmp_path: Path) -> None:
    toml = "[monitors]\nitems_drop = 0.3\n"
    code, output, record = await crawl(tmp_path, site, toml, n=10)
    assert code == 0 and _verdicts(record) == {"change.items": True}, output
    code, output, record = await crawl(tmp_path, site, toml, n=8)  # -20 %: within the bound
    assert code == 0, output
    code, output, record = await crawl(tmp_path, site, toml, n=4)  # -50 % against the last run (8)
    assert code == 3, output
    assert "items 8 -> 4 (-50.0%" in output


async def test_a_failed_monitor_sends_an_alert(site: str, tmp_path: Path) -> None:
    posts: list[dict[str, object]] = []

    async def receive(request: web.Request) -> web.Response:
        posts.append(await request.json())
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/hook/secret-token-123", receive)
    async with serve(app) as hooks:
        toml = f'{FAILING}\n[alerts]\n[[alerts.channel]]\ntype = "webhook"\nurl = "{hooks}/hook/secret-token-123"\n'
        code, output, _ = await crawl(tmp_path, site, toml)
    assert code == 3, output
    kinds = {post["kind"] for post in posts}
    assert kinds <= {"monitor_failed", "alerts_held"} and "monitor_failed" in kinds
    assert any("coverage.price" in str(post["title"]) for post in posts)
    assert "secret-token-123" not in output


async def test_an_early_monitor_alerts_while_the_crawl_runs(site: str, tmp_path: Path) -> None:
    """http_errors = 0 fails once /broken failed; the crawl still waits on item 999 until the alert came."""
    RELEASE["slow"] = asyncio.Event()
    titles: list[str] = []

    async def receive(request: web.Request) -> web.Response:
        titles.append((await request.json())["title"])
        if "during the run" in titles[-1]:
            RELEASE["slow"].set()
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/hook", receive)
    try:
        async with serve(app) as hooks:
            hook = f'[alerts]\n[[alerts.channel]]\ntype = "webhook"\nurl = "{hooks}/hook"\n'
            toml = f"[monitors]\nhttp_errors = 0\ninterval = 0.05\n{hook}"
            code, output, record = await crawl(tmp_path, site, toml, 10, "-a", "slow=1")
    finally:
        RELEASE.pop("slow")
    assert code == 3, output
    assert titles == ["eclaw: monitor http_errors failed for shop (during the run)"]  # alerted once
    assert record["ok"] is False


async def test_a_hanging_receiver_does_not_hold_the_crawl(site: str, tmp_path: Path) -> None:
    hang = asyncio.Event()
    calls: list[str] = []

    async def receive(request: web.Request) -> web.Response:
        calls.append(request.path)
        await hang.wait()
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/hook", receive)
    async with serve(app) as hooks:
        toml = f'{FAILING}\n[alerts]\ndrain = 0.5\n[[alerts.channel]]\ntype = "webhook"\nurl = "{hooks}/hook"\n'
        code, output, record = await crawl(tmp_path, site, toml, 30)
        hang.set()
    assert code == 3, output
    assert "items stored" in output and record["ok"] is False  # the crawl ran to its end and reported
    assert "alerts: " in output and "not sent within" in output  # the drain gave up, bounded
    assert calls  # the receiver was reached, and never answered


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[monitors]\nitemz = 3\n", "unknown [monitors] keys ['itemz']"),
        ("[monitors]\ncoverage = { price = 1.5 }\n", "coverage.price must be between 0 and 1"),
        ("[monitors]\nitems = 3\n", "items must be a table"),
        ("[monitors\n", "is not valid TOML"),
    ],
)
async def test_bad_monitor_files_are_one_clear_error(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "m.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=r".*" + message.replace("[", r"\[").replace("]", r"\]")):
        load_monitors(path)


async def test_bad_monitor_file_exits_two(site: str, tmp_path: Path) -> None:
    code, output, record = await crawl(tmp_path, site, "[monitors]\nitemz = 1\n")
    assert code == 2 and "unknown [monitors] keys" in output and not record


async def test_the_report_of_a_trace_shows_the_monitors_results(site: str, tmp_path: Path) -> None:
    code, output, _ = await crawl(tmp_path, site, FAILING, 10, "--trace", str(tmp_path / "trace.jsonl"))
    assert code == 3, output
    trace = str(tmp_path / "trace.jsonl")
    results = str(tmp_path / "eclaw-data" / "shop.monitors.json")
    code, _, err = await eclaw_inprocess("report", trace, "-o", str(tmp_path / "report.html"), "--monitors", results)
    assert code == 0, err
    page = (tmp_path / "report.html").read_text()
    assert "Monitors" in page and "coverage.price" in page
    code, _, err = await eclaw_inprocess("report", trace, "--monitors", str(tmp_path / "none.json"))
    assert code == 2 and "--monitors" in err and "cannot read its results" in err
