"""Controlling a crawl: budgets end it gracefully with their own reason (a pause with --state),
per-host overrides of concurrency and delay, and the spider seeing its own settings and stats."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from aiohttp import web

from eclaw import Engine, Response, Settings, Spider
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, assert_spaced


class Observatory:
    """A bird-observatory log: ``/day/N`` lists the day's sightings (JSON) and links the next two
    days; days divisible by 7 are closed (503); ``/quiet/N`` pages have no sightings at all.
    Each hit is logged per host with the time it arrived and how many were in flight."""

    def __init__(self, days: int = 120, delay: float = 0.0) -> None:
        self.days, self.delay = days, delay
        self.hits: dict[str, list[float]] = defaultdict(list)
        self.in_flight: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()

    def app(self) -> web.Application:
        async def day(request: web.Request) -> web.Response:
            host, n = request.host.split(":")[0], int(request.match_info["n"])
            self.hits[host].append(asyncio.get_running_loop().time())
            self.in_flight[host] += 1
            self.peak[host] = max(self.peak[host], self.in_flight[host])
            try:
                await asyncio.sleep(self.delay)
            finally:
                self.in_flight[host] -= 1
            if n % 7 == 6:
                return web.json_response({"closed": True}, status=503)
            kind = request.match_info["kind"]
            birds = [] if kind == "quiet" else [{"bird": f"sp{n % 5}", "count": n}]
            links = [f"/{kind}/{m}" for m in (n + 1, n + 2) if m < self.days]
            return web.json_response({"day": n, "sightings": birds, "next": links})

        app = web.Application()
        app.router.add_get("/{kind:day|quiet}/{n}", day)
        return app


class Sightings(Spider):
    name = "sightings"
    custom_settings = {"retries": 0}

    def parse(self, response: Response) -> Any:
        data = response.json()
        for sighting in data["sightings"]:
            yield {"day": data["day"], **sighting}
        yield from response.follow_all(data["next"])


async def crawl(base: str, path: str = "/day/0", **settings: Any) -> Any:
    async with Engine(Settings(store="", **settings)) as engine:
        stats = await engine.crawl(Sightings, start_urls=[base + path])
    assert_accounted(stats)
    return stats


async def test_each_budget_stops_the_crawl_with_its_own_reason() -> None:
    async with serve(Observatory().app()) as base:
        pages = await crawl(base, concurrency=1, max_pages=15)
        items = await crawl(base, concurrency=1, max_items=10)
        errors = await crawl(base, concurrency=1, max_errors=2)
        memory = await crawl(base, concurrency=1, max_memory_mb=1)
    # max_pages starts no download past the budget (tests/test_strict_budgets.py); the others let the
    # downloads under way finish (one more, at concurrency 1): they are parsed too
    assert pages.finish_reason == "max pages" and pages.requests_parsed + pages.requests_failed == 15
    assert items.finish_reason == "max items" and 10 <= items.items_stored <= 11
    assert errors.finish_reason == "max errors" and 2 <= errors.requests_failed <= 3
    assert memory.finish_reason == "memory ceiling" and memory.requests_parsed < 5  # over 1 MB from the start
    for stats in (pages, items, errors):
        assert stats.requests_pending > 0  # stopped early: the rest is counted, not lost


async def test_time_budgets_stop_a_slow_or_itemless_crawl() -> None:
    async with serve(Observatory(delay=0.05).app()) as base:
        slow = await crawl(base, concurrency=1, max_seconds=1.2)
        idle = await crawl(base, "/quiet/0", concurrency=1, max_idle_items_seconds=0.6)
    # the whole crawl takes 120 pages of 0.05 s: stopped well before, after a start (a loaded machine
    # may parse only a few pages in its 1.2 s)
    assert slow.finish_reason == "max seconds" and 0 < slow.requests_parsed < 40
    assert idle.finish_reason == "no new items" and idle.items_stored == 0


async def test_a_budget_with_state_is_a_pause_and_the_next_run_goes_on(tmp_path: Path) -> None:
    site = Observatory(days=60)
    runs = []
    async with serve(site.app()) as base:
        for _ in range(10):
            out = tmp_path / f"run{len(runs)}.jsonl"
            settings = Settings(store="", concurrency=2, max_pages=12)
            async with Engine(settings, outputs=[str(out)], state_dir=tmp_path / "s") as engine:
                stats = await engine.crawl(Sightings, start_urls=[base + "/day/0"])
            runs.append(stats)
            if stats.finish_reason in ("finished", "already finished"):
                break
    assert [s.finish_reason for s in runs[:-1]] == ["max pages"] * (len(runs) - 1) and len(runs) > 2
    assert len(site.hits["127.0.0.1"]) == 60  # every day once: a pause loses nothing and fetches nothing twice
    items = [line for run in range(len(runs)) for line in (tmp_path / f"run{run}.jsonl").read_text().splitlines()]
    assert len(items) == len(set(items)) == 60 - 60 // 7 - (1 if 60 % 7 == 0 else 0)


async def test_per_host_concurrency_and_delay_override_the_defaults() -> None:
    site = Observatory(days=24, delay=0.05)
    async with serve(site.app()) as base, serve(site.app(), host="127.0.0.2") as other:
        overrides = {"host_concurrency": "127.0.0.2=1", "host_delay": "127.0.0.1=0.15", "concurrency_per_domain": 4}
        async with Engine(Settings(store="", **overrides)) as engine:
            await asyncio.gather(
                engine.crawl(Sightings, start_urls=[other + "/day/0"]),
                engine.crawl(Sightings, start_urls=[base + "/day/0"]),
            )
    assert site.peak["127.0.0.2"] == 1 and len(site.hits["127.0.0.2"]) == 24
    assert_spaced(sorted(site.hits["127.0.0.1"]), 0.15)  # one start per 0.15 s at most


async def test_a_spider_sees_its_settings_and_stats() -> None:
    class Curious(Sightings):
        name = "curious"
        custom_settings = {"max_depth": 3, "retries": 0}

        def parse(self, response: Response) -> Any:
            yield {"depth_limit": self.settings.max_depth, "seen": self.stats.responses_downloaded}

    async with serve(Observatory().app()) as base:
        items, _ = await collect(Curious, settings=Settings(store=""), start_urls=[base + "/day/0"])
    assert items == [{"depth_limit": 3, "seen": 1}]
