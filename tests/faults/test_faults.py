"""Every fault of the fault site, crawled at once: the promised outcome for each, and the
summary promises (every URL accounted for, no duplicates, nothing forbidden fetched)."""

from __future__ import annotations

import tracemalloc
from typing import Any
from urllib.parse import urlsplit

from eclaw import Engine, Response, Settings, Spider
from eclaw.events import RequestFailed, ResponseDownloaded
from eclaw.middlewares import Retry, UserAgent
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, read_jsonl, record_file, recorder
from tests.faults.site import ENCODED, LONG, MANY, TRACKED, FaultSite, bomb


class FaultSpider(Spider):
    name = "faults"
    allowed_domains = ["127.0.0.1"]

    def parse(self, response: Response) -> Any:
        path = urlsplit(response.url).path
        kind = response.headers.get("Content-Type", "")
        if not kind.startswith("text/html"):
            yield {"path": path, "binary": kind}
            return
        yield {"path": path, "title": response.css("title::text").get(), "price": response.css(".price::text").get()}
        yield from response.follow_all(css="a")


async def raise_on(request: Any, call_next: Any) -> Response:
    if request.url.endswith("/raise/middleware"):
        raise RuntimeError("a middleware bug")
    return await call_next(request)


async def failing_pipeline(item: dict[str, Any], spider: Spider) -> dict[str, Any]:
    if item.get("path") == "/raise/pipeline":
        raise ValueError("a pipeline bug")
    return item


async def failing_handler(event: ResponseDownloaded) -> None:
    if event.response.url.endswith("/raise/handler"):
        raise KeyError("a handler bug")


def fault_engine() -> tuple[Engine, list[RequestFailed]]:
    # a timeout well past a loaded machine's slowest local answer (a bomb inflated, 3,000 pages parsed in this
    # one process): at 4 s, /bomb and /malformed were fetched twice on a busy 2-core machine
    settings = Settings(timeout=12.0, max_response_size=1024 * 1024, concurrency=16)
    engine = Engine(
        settings,
        middlewares=[Retry(3, base=0.01, cap=0.05), UserAgent(), raise_on],
        pipelines=[failing_pipeline],
    )
    engine.subscribe(ResponseDownloaded, failing_handler)
    failures: list[RequestFailed] = []
    engine.subscribe(RequestFailed, recorder(failures))
    return engine, failures


async def test_every_fault_has_its_promised_outcome() -> None:
    site = FaultSite()
    engine, failures = fault_engine()
    async with serve(site.app()) as base:
        items, stats = await collect(FaultSpider, engine=engine, start_urls=[base + "/"])
    by_path = {item["path"]: item for item in items}

    # -- summary promises -------------------------------------------------------------
    assert_accounted(stats)
    parsed, failed = 3018, 9
    dropped = {"unsupported scheme": 4, "url too long": 1, "duplicate": 2 + MANY, "offsite": 1, "offsite redirect": 1}
    assert (stats.requests_parsed, stats.requests_failed, dict(stats.dropped_by_reason)) == (parsed, failed, dropped)
    assert stats.requests_generated == parsed + failed + sum(dropped.values())
    assert stats.items_stored == len(items) == parsed - 1  # /raise/pipeline's item was dead-lettered
    attempts = {"/flaky/2": 2, "/flaky/3": 3, "/limited": 2, "/slow-first": 2, "/reset-mid-body": 4, "/short-body": 4}
    assert {path: n for path, n in site.hits.items() if n != 1} == attempts  # no duplicate fetch anywhere
    assert LONG not in site.hits and not any(p.startswith("/never") for p in site.hits)  # nothing forbidden fetched
    assert site.hits[TRACKED] == 1  # a long tracking URL is fetched like any other
    drops = read_jsonl(record_file("faults", "drops"))  # in-scope pages dropped by a policy are named, not just counted
    assert [(d["url"][-9000:], d["reason"], d["spider"]) for d in drops] == [
        ("x" * 9000, "url too long", "faults"),
        (drops[1]["url"], "offsite redirect", "faults"),
    ]
    assert drops[1]["url"].endswith("/redirect/offsite")

    # -- per fault ----------------------------------------------------------------------
    final = {urlsplit(f.request.url).path: (f.reason, f.attempt) for f in failures if f.final}
    assert final == {
        "/gone/404": ("http 404", 1),
        "/gone/410": ("http 410", 1),
        "/reset-mid-body": (final["/reset-mid-body"][0], 4),
        "/short-body": ("truncated response", 4),
        "/redirect/loop/a": ("redirect loop", 1),
        "/redirect/mailto": ("redirect to unsupported scheme", 1),
        "/huge": ("too large", 1),
        "/bomb": ("too large", 1),
        "/raise/middleware": ("error: RuntimeError", 1),
    }
    assert final["/reset-mid-body"][0] in ("connection lost", "truncated response")
    assert {f.reason for f in failures if not f.final} >= {"http 503", "http 429", "timeout"}
    for path in ("/flaky/2", "/flaky/3", "/limited", "/slow-first", "/leaf/end-of-chain", "/same"):
        assert by_path[path]["price"] == "9.99", path
    assert by_path["/malformed"] == {"path": "/malformed", "title": "broken", "price": "12.50"}
    assert "/leaf/from-malformed" in by_path  # links still found in broken markup
    for path, _, _, title in ENCODED:
        assert by_path[path]["title"] == title  # no mojibake, declared in <meta> or not at all
    assert by_path["/file.pdf"]["binary"] == "application/pdf" and by_path["/image.png"]["binary"] == "image/png"
    assert sum(1 for p in by_path if p.startswith("/many/")) == MANY
    assert "/raise/handler" in by_path and stats.handler_errors == 1
    (dead,) = read_jsonl(record_file("faults", "dead-letter"))
    assert dead["item"]["path"] == "/raise/pipeline" and "a pipeline bug" in dead["error"]
    assert stats.items_dropped_by_reason == {"pipeline error: ValueError": 1}
    failed_urls = [r["url"] for r in read_jsonl(record_file("faults", "failures"))]
    assert len(failed_urls) == failed  # every final failure recorded for a later look


async def test_huge_bodies_are_refused_without_being_read_into_memory() -> None:
    class Two(Spider):
        name = "two"

        def parse(self, response: Response) -> Any:
            yield {"url": response.url}

    site = FaultSite()
    engine = Engine(Settings(max_response_size=1024 * 1024), middlewares=[])
    bomb()  # the site is in this process: its 100 MB of zeros, compressed once, is not the crawler's memory
    async with serve(site.app()) as base:
        tracemalloc.start()
        try:
            _, stats = await collect(Two, engine=engine, start_urls=[base + "/huge", base + "/bomb"])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert stats.failed_by_reason == {"too large": 2}
    assert peak < 12 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB: a 50 MB body or a 100 MB bomb was buffered"
