"""Reliability promises the rest of the suite let through (found by a mutation audit):
robots.txt binds ``dont_filter`` requests too, fresh and after a resume; a transient status
the spider handles is still retried; a password in a URL reaches no log line and no file."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import web

from eclaw import Engine, Request, Response, Spider
from eclaw.events import ItemStored, RequestFailed
from eclaw.middlewares import Retry, UserAgent
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, gaps, recorder

ROBOTS = "User-agent: *\nDisallow: /staff\n"


class Library:
    """A lending library: a public catalogue, staff pages robots.txt forbids, and a desk
    that answers ``/desk/NAME?status=S&times=K`` with status S K times, then 200."""

    def __init__(self) -> None:
        self.robots_status = 200
        self.hits: Counter[str] = Counter()
        self.times: dict[str, list[float]] = {}

    async def handle(self, request: web.Request) -> web.Response:
        path = request.path
        self.hits[path] += 1
        self.times.setdefault(path, []).append(asyncio.get_running_loop().time())
        if path == "/robots.txt":
            return web.Response(status=self.robots_status, text=ROBOTS, content_type="text/plain")
        if path.startswith("/desk/") and self.hits[path] <= int(request.query.get("times", "0")):
            headers = {"Retry-After": request.query["after"]} if "after" in request.query else {}
            return web.Response(status=int(request.query["status"]), text="not now", headers=headers)
        return web.Response(text=f"<title>{path}</title>", content_type="text/html")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        return app

    def staff_hits(self) -> int:
        return sum(n for path, n in self.hits.items() if path.startswith("/staff"))


# -- robots.txt and dont_filter -------------------------------------------------------------------


class Catalogue(Spider):
    """Asks for staff pages with ``dont_filter=True`` (as a resumed crawl marks every request)."""

    name = "catalogue"
    allowed_domains = ["127.0.0.1"]
    custom_settings = {"obey_robots": True, "retries": 0}

    def start_requests(self) -> Any:
        yield Request(self.base + "/staff/rota", dont_filter=True)
        yield Request(self.base + "/catalogue")

    def parse(self, response: Response) -> Any:
        yield {"path": urlsplit(response.url).path}
        if response.url.endswith("/catalogue"):
            for n in range(3):
                yield Request(f"{self.base}/book/{n}")
                yield Request(f"{self.base}/staff/ledger/{n}", dont_filter=True)


async def test_robots_txt_binds_dont_filter_requests() -> None:
    library = Library()
    async with serve(library.app()) as base:
        items, stats = await collect(Catalogue, base=base)
    assert library.staff_hits() == 0
    assert sorted(i["path"] for i in items) == ["/book/0", "/book/1", "/book/2", "/catalogue"]
    assert stats.dropped_by_reason == {"robots": 4}
    assert_accounted(stats)


async def test_robots_txt_binds_the_requests_of_a_resumed_crawl(tmp_path: Path) -> None:
    """Paused with the staff pages queued; the resumed crawl restores them (``dont_filter``, as
    every restored request) and must still drop them, unfetched."""
    library = Library()

    async def run(pause: bool, **overrides: Any) -> Any:
        settings = {"checkpoint_interval": 60, "store": "", "failures": "", **overrides}
        engine = Engine(state_dir=tmp_path / "state", overrides=settings)

        async def stop_at_the_catalogue(event: ItemStored) -> None:
            if pause and event.item["path"] == "/catalogue":
                engine.stop("paused by the test")

        engine.subscribe(ItemStored, stop_at_the_catalogue)
        async with engine:
            return await engine.crawl(Catalogue, base=base)

    async with serve(library.app()) as base:
        first = await run(True, download_delay=0.3)  # one download every 0.3 s: the rest wait in the queue
        assert first.requests_pending == 6  # three books and three staff pages
        last = await run(False)
    assert library.staff_hits() == 0
    assert last.finish_reason == "finished" and last.dropped_by_reason == {"robots": 4}
    assert {path: n for path, n in library.hits.items() if path.startswith("/book/")} == {
        f"/book/{n}": 1 for n in range(3)
    }
    assert_accounted(last)


# -- retry --------------------------------------------------------------------------------------


class Desk(Spider):
    name = "desk"
    handle_httpstatus_list = [429, 503]

    def parse(self, response: Response) -> Any:
        yield {"path": urlsplit(response.url).path, "status": response.status}


async def crawl_desk(spider: type[Spider], paths: list[str], retry: Retry) -> tuple[Library, list[Any], Any, list[Any]]:
    library = Library()
    engine = Engine(middlewares=[retry, UserAgent()])
    failures: list[RequestFailed] = []
    engine.subscribe(RequestFailed, recorder(failures))
    async with serve(library.app()) as base:
        items, stats = await collect(spider, engine=engine, start_urls=[base + p for p in paths])
    assert_accounted(stats)
    return library, items, stats, failures


async def test_a_handled_transient_status_is_still_retried_and_the_callback_gets_the_200() -> None:
    library, items, stats, failures = await crawl_desk(Desk, ["/desk/a?status=503&times=2"], Retry(3, base=0.02))
    assert library.hits["/desk/a"] == 3
    assert stats.retries == 2 and [(f.attempt, f.final, f.reason) for f in failures] == [
        (1, False, "http 503"),
        (2, False, "http 503"),
    ]
    assert items == [{"path": "/desk/a", "status": 200}]
    assert stats.requests_parsed == 1 and stats.requests_failed == 0


async def test_a_handled_status_that_never_clears_reaches_the_callback_after_the_last_attempt() -> None:
    library, items, stats, _ = await crawl_desk(Desk, ["/desk/b?status=503&times=99"], Retry(2, base=0.01))
    assert library.hits["/desk/b"] == 3 and stats.retries == 2
    assert items == [{"path": "/desk/b", "status": 503}] and stats.requests_failed == 0


async def test_a_handled_429_waits_its_retry_after() -> None:
    library, items, _, _ = await crawl_desk(Desk, ["/desk/c?status=429&times=1&after=1"], Retry(3, base=0.01))
    assert items == [{"path": "/desk/c", "status": 200}]
    (wait,) = gaps(library.times["/desk/c"])
    assert wait >= 0.95  # the server's Retry-After, not the 0.01 s backoff


# -- secrets: no password from a URL in any log line or file ---------------------------------------------

SECRET = "s3cr3t-Pa55"


class Members(Spider):
    """Member pages behind a password in the URL, hitting every path that logs or records a URL:
    a retried 503, a callback that raises, an errback that raises, an item a pipeline fails on,
    and robots.txt (fetched for the host, with the URL's credentials)."""

    name = "members"
    custom_settings = {"obey_robots": True}

    def start_requests(self) -> Any:
        secret = self.base.replace("http://", f"http://member:{SECRET}@")
        yield Request(secret + "/desk/busy?status=503&times=1")
        yield Request(secret + "/book/raises")
        yield Request(secret + "/desk/gone?status=404&times=9", errback=self.on_error)
        yield Request(secret + "/book/item")

    def parse(self, response: Response) -> Any:
        if response.url.endswith("/raises"):
            raise ValueError("cannot parse this page")
        yield {"path": urlsplit(response.url).path}

    def on_error(self, failure: RequestFailed) -> Any:
        raise LookupError("an errback bug")


async def refuse(item: dict[str, Any], spider: Spider) -> dict[str, Any]:
    if item["path"] == "/book/item":
        raise OSError("disk on fire")
    return item


async def test_a_password_in_the_url_reaches_no_log_line_and_no_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    library = Library()
    library.robots_status = 404  # logged at DEBUG, with the robots.txt URL
    settings = {"retries": 1, "dead_letter": str(tmp_path / "dead.jsonl"), "failures": str(tmp_path / "failed.jsonl")}
    engine = Engine(overrides=settings, pipelines=[refuse])
    async with serve(library.app()) as base:
        items, stats = await collect(Members, engine=engine, base=base)
    assert items == [{"path": "/desk/busy"}] and library.hits["/robots.txt"] == 1
    assert stats.retries == 1 and stats.handler_errors == 1
    assert stats.failed_by_reason == {"callback error: ValueError": 1, "http 404": 1}
    assert stats.items_dropped_by_reason == {"pipeline error: OSError": 1}
    files = {name: (tmp_path / name).read_text() for name in ("dead.jsonl", "failed.jsonl")}
    assert all(files.values()) and all("member:***@" in text for text in files.values())
    for where, text in {"log": caplog.text, **files, "stats": stats.summary()}.items():
        assert SECRET not in text, f"the password is in the {where}"

    caplog.clear()  # robots.txt unreachable (503): a warning naming it, everything on the host dropped
    library.robots_status = 503
    async with serve(library.app()) as base:
        items, stats = await collect(Members, engine=Engine(overrides=settings), base=base)
    assert items == [] and stats.dropped_by_reason == {"robots": 4}
    assert "robots.txt unreachable (http 503)" in caplog.text and SECRET not in caplog.text
