"""Several crawls in one engine keep their own state: middleware instances, settings, events, log
files; and the files of record name the spider and the run, a new run starting them afresh."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import web

from eclaw import Engine, Request, Response, Spider
from eclaw.contracts import CrawlContext, Fetch
from eclaw.events import ResponseDownloaded
from eclaw.middlewares import defaults
from eclaw.testing import serve
from tests.conftest import assert_accounted, read_jsonl, record_file


def station_app(readings: int, hits: Counter[str] | None = None) -> web.Application:
    """A weather-station JSON API: ``/api/stations`` lists station ids, ``/api/station/N`` one reading each;
    ``/api/flaky`` answers 503 until its third call; ``/api/gone`` 410."""
    hits = Counter() if hits is None else hits

    async def stations(request: web.Request) -> web.Response:
        return web.json_response({"stations": list(range(readings))})

    async def station(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        return web.json_response({"id": n, "celsius": -5 + n * 0.5})

    async def flaky(request: web.Request) -> web.Response:
        hits["flaky"] += 1
        if hits["flaky"] < 3:
            return web.json_response({"error": "busy"}, status=503)
        return web.json_response({"id": -1, "celsius": 0.0})

    async def gone(request: web.Request) -> web.Response:
        return web.json_response({"error": "gone"}, status=410)

    app = web.Application()
    app.router.add_get("/api/stations", stations)
    app.router.add_get("/api/station/{n}", station)
    app.router.add_get("/api/flaky", flaky)
    app.router.add_get("/api/gone", gone)
    return app


class CountResponses:
    """The README's middleware pattern: an instance listed on the spider class, counting into the crawl's stats."""

    def __init__(self) -> None:
        self.seen = 0
        self.crawl: CrawlContext | None = None

    async def open(self, crawl: CrawlContext) -> None:
        self.crawl = crawl

    async def __call__(self, request: Request, call_next: Fetch) -> Response:
        response = await call_next(request)
        self.seen += 1
        assert self.crawl is not None
        self.crawl.stats.counters["responses counted"] = self.seen
        return response


class Stations(Spider):
    name = "stations"
    middlewares = [CountResponses()]

    def start_requests(self) -> Any:
        yield Request(self.base + "/api/stations")

    def parse(self, response: Response) -> Any:
        for n in response.json()["stations"]:
            yield Request(f"{self.base}/api/station/{n}", callback=self.parse_reading)

    def parse_reading(self, response: Response) -> Any:
        yield response.json()


async def test_concurrent_crawls_of_one_spider_keep_their_own_middlewares_and_events() -> None:
    engine = Engine()
    per_crawl: Counter[str] = Counter()

    @engine.on(ResponseDownloaded)
    async def count(event: ResponseDownloaded) -> None:
        assert event.crawl is not None
        per_crawl[event.crawl.run_id] += 1

    async with serve(station_app(4)) as small, serve(station_app(11)) as large, engine:
        crawls = [engine.prepare(Stations, base=small), engine.prepare(Stations, base=large)]
        results = await asyncio.gather(*(engine.run_crawl(crawl) for crawl in crawls))
    assert [stats.counters["responses counted"] for stats in results] == [5, 12]
    assert [per_crawl[crawl.run_id] for crawl in crawls] == [5, 12]  # events say which crawl they come from
    assert Stations.middlewares[0].seen == 0  # the class's own instance is left alone: each crawl has a copy
    for stats in results:
        assert_accounted(stats)


class Flaky(Spider):
    name = "flaky"
    custom_settings = {"retries": 0}

    def start_requests(self) -> Any:
        yield Request(self.base + "/api/flaky")

    def parse(self, response: Response) -> Any:
        yield response.json()


async def crawl_flaky(engine: Engine, spider: type[Spider] = Flaky) -> tuple[int, Any]:
    hits: Counter[str] = Counter()
    async with serve(station_app(0, hits)) as base, engine:
        stats = await engine.crawl(spider, base=base)
    assert_accounted(stats)
    return hits["flaky"], stats


async def test_a_middleware_added_to_the_defaults_respects_each_crawls_settings() -> None:
    seen: list[str] = []

    async def mine(request: Request, call_next: Fetch) -> Response:
        seen.append(request.url)
        return await call_next(request)

    hits, stats = await crawl_flaky(Engine(middlewares=[*defaults(), mine]))  # custom_settings: retries=0
    assert (hits, stats.failed_by_reason, len(seen)) == (1, {"http 503": 1}, 1)

    class Patient(Flaky):
        name = "patient"
        custom_settings = {}

    hits, stats = await crawl_flaky(Engine(middlewares=[*defaults(), mine], overrides={"retries": 0}), Patient)
    assert (hits, stats.failed_by_reason) == (1, {"http 503": 1})  # -s retries=0
    hits, stats = await crawl_flaky(Engine(middlewares=[*defaults(), mine]), Patient)
    assert (hits, stats.requests_parsed, stats.retries) == (3, 1, 2)  # the defaults' Retry, as usual


class Gone(Spider):
    name = "gone"

    def start_requests(self) -> Any:
        yield Request(self.base + "/api/gone")
        yield Request(self.base + "/api/station/1?" + "q" * 9000)  # over max_url_length: dropped, listed

    def parse(self, response: Response) -> Any:
        yield response.json()


async def test_files_of_record_name_spider_and_run_and_a_new_run_starts_them_afresh(tmp_path: Path) -> None:
    runs = []
    async with serve(station_app(1)) as base:
        for _ in range(2):
            async with Engine() as engine:
                crawl = engine.prepare(Gone, base=base)
                await engine.run_crawl(crawl)
                runs.append(crawl.run_id)
        for kind, reason in (("failures", "http 410"), ("drops", "url too long")):
            (record,) = read_jsonl(record_file("gone", kind))  # the second run only: not mixed with the first
            assert (record["spider"], record["run"], record["reason"]) == ("gone", runs[1], reason)
        async with Engine(overrides={"failures": str(tmp_path / "{spider}-{run_key}.jsonl")}) as engine:
            await engine.crawl(Gone, base=base)
    assert [r["reason"] for r in read_jsonl(tmp_path / "gone-default.jsonl")] == ["http 410"]


async def test_two_crawls_with_log_files_keep_them_apart_and_each_ends_with_its_finish_line(
    tmp_path: Path, caplog: Any
) -> None:
    caplog.set_level(logging.INFO, logger="eclaw")

    def logged(name: str) -> type[Spider]:
        settings = {"log_file": str(tmp_path / f"{name}.log"), "log_format": "json"}
        return type(name, (Stations,), {"name": name, "custom_settings": settings})

    async with serve(station_app(3)) as first, serve(station_app(30)) as second, Engine() as engine:
        crawls = [engine.prepare(logged("north"), base=first), engine.prepare(logged("south"), base=second)]
        await asyncio.gather(*(engine.run_crawl(crawl) for crawl in crawls))
    for crawl in crawls:
        lines = [json.loads(line) for line in (tmp_path / f"{crawl.spider.name}.log").read_text().splitlines()]
        assert {line["run_id"] for line in lines} == {crawl.run_id}  # none of the other crawl's lines
        assert lines[-1]["message"].startswith(f"crawl {crawl.spider.name!r} finished: ")
