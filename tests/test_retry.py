"""Retry: attempts, backoff, Retry-After, slots freed while waiting, final failures recorded."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from eclaw import Engine, Request, Response, Settings, Spider
from eclaw.events import RequestFailed
from eclaw.middlewares import Retry, UserAgent
from eclaw.middlewares.retry import retry_after
from eclaw.testing import collect, serve
from tests.conftest import assert_accounted, gaps, read_jsonl, record_file, recorder
from tests.sites import FlakySite


class MaxJitter(random.Random):
    """Jitter that always takes the ceiling, so waits are predictable."""

    def uniform(self, a: float, b: float) -> float:
        return b


class Pages(Spider):
    name = "pages"

    def parse(self, response: Response) -> Any:
        yield {"url": response.url, "title": response.css("title::text").get()}


async def crawl(
    paths: list[str], retry: Retry | None = None, **settings: Any
) -> tuple[FlakySite, list[Any], Any, list[RequestFailed]]:
    site = FlakySite()
    retry = retry or Retry(3, base=0.2, rng=MaxJitter())
    engine = Engine(Settings(**settings), middlewares=[retry, UserAgent()])
    failures: list[RequestFailed] = []
    engine.subscribe(RequestFailed, recorder(failures))
    async with serve(site.app()) as base:
        items, stats = await collect(Pages, engine=engine, start_urls=[base + p for p in paths])
    assert_accounted(stats)
    return site, items, stats, failures


async def test_503_twice_then_200_with_exponential_backoff() -> None:
    site, items, stats, failures = await crawl(["/fail/a?times=2"])
    assert [i["title"] for i in items] == ["a"]
    assert [(f.attempt, f.final, f.reason) for f in failures] == [(1, False, "http 503"), (2, False, "http 503")]
    waits = gaps(site.hits["a"])
    assert waits[0] >= 0.19 and waits[1] >= 0.39  # base 0.2, doubled
    assert stats.retries == 2 and stats.requests_parsed == 1 and stats.requests_failed == 0
    assert read_jsonl(record_file("pages", "failures")) == []


async def test_429_retry_after_seconds_date_and_cap() -> None:
    retry = Retry(3, base=0.01, max_retry_after=1.5, rng=MaxJitter())
    site, items, _, _ = await crawl(["/limited/s?after=1", "/limited/d?after=date:2", "/limited/c?after=3600"], retry)
    assert len(items) == 3
    assert 0.95 <= gaps(site.hits["s"])[0] < 2.5
    assert 0.9 <= gaps(site.hits["d"])[0] <= 2.5  # an HTTP date has whole seconds; capped at 1.5
    assert 1.45 <= gaps(site.hits["c"])[0] < 3.0  # an hour asked, the cap given (slack for a loaded machine)


async def test_connection_reset_and_timeout_are_retried() -> None:
    site, items, _, failures = await crawl(["/reset/r?times=2", "/stall/t?times=1&s=4"], timeout=1.0)
    assert sorted(i["title"] for i in items) == ["after reset", "after stall"]
    assert len(site.hits["r"]) == 3 and len(site.hits["t"]) == 2
    reasons = {f.reason for f in failures}
    assert "timeout" in reasons and reasons & {"connection lost", "connect error", "truncated response"}
    assert all(not f.final for f in failures)


async def test_permanent_404_fails_once_and_is_recorded() -> None:
    site, items, _, failures = await crawl(["/fail/gone?times=99&status=404"])
    assert items == [] and len(site.hits["gone"]) == 1
    assert [(f.attempt, f.final, f.reason) for f in failures] == [(1, True, "http 404")]
    (record,) = read_jsonl(record_file("pages", "failures"))
    assert record["url"].endswith("/fail/gone?times=99&status=404")
    assert (record["reason"], record["attempts"], record["last_status"]) == ("http 404", 1, 404)


async def test_gives_up_after_max_retries_and_records_the_last_attempt() -> None:
    site, _, stats, failures = await crawl(["/fail/down?times=99"], Retry(2, base=0.01))
    assert len(site.hits["down"]) == 3
    assert [(f.attempt, f.final) for f in failures] == [(1, False), (2, False), (3, True)]
    assert stats.failed_by_reason == {"http 503": 1} and stats.retries == 2
    (record,) = read_jsonl(record_file("pages", "failures"))
    assert (record["attempts"], record["last_status"], record["reason"]) == (3, 503, "http 503")


async def test_request_meta_overrides_max_retries_and_disables_retry() -> None:
    class Meta(Spider):
        name = "meta"

        def start_requests(self) -> Any:
            yield Request(self.base + "/fail/none?times=99", meta={"max_retry_times": 0})
            yield Request(self.base + "/fail/more?times=4", meta={"max_retry_times": 5})
            yield Request(self.base + "/fail/off?times=99", meta={"dont_retry": True})

        def parse(self, response: Response) -> Any:
            yield {"url": response.url}

    site = FlakySite()
    engine = Engine(middlewares=[Retry(1, base=0.01)])
    async with serve(site.app()) as base:
        items, stats = await collect(Meta, engine=engine, base=base)
    assert {k: len(v) for k, v in site.hits.items()} == {"none": 1, "more": 5, "off": 1}
    assert len(items) == 1 and stats.requests_failed == 2
    assert_accounted(stats)


async def test_backoff_holds_no_download_slot() -> None:
    # One download at a time: while /limited/wait waits out its 2 s Retry-After,
    # the other pages must still be fetched.
    paths = ["/limited/wait?after=2"] + [f"/ok/{n}" for n in range(5)]
    site, items, _, _ = await crawl(paths, concurrency=1, concurrency_per_domain=1)
    first, second = site.hits["wait"]
    others = [site.hits[str(n)][0] for n in range(5)]
    assert all(first < t < second for t in others)
    assert second - first >= 1.95 and len(items) == 6


async def test_stop_during_backoff_counts_the_request_as_pending() -> None:
    site = FlakySite()
    engine = Engine(middlewares=[Retry(3, max_retry_after=30)])
    waiting = asyncio.Event()

    async def failed(event: RequestFailed) -> None:
        waiting.set()

    engine.subscribe(RequestFailed, failed)
    async with serve(site.app()) as base, engine:
        crawl = engine.prepare(Pages, start_urls=[base + "/limited/long?after=30"])
        task = asyncio.create_task(engine.run_crawl(crawl))
        await asyncio.wait_for(waiting.wait(), 5)
        engine.stop()
        stats = await asyncio.wait_for(task, 5)
    assert stats.requests_pending == 1 and stats.requests_failed == 0
    assert_accounted(stats)


def test_retry_after_parsing() -> None:
    assert retry_after("120") == 120.0
    assert retry_after(None) is None and retry_after("soon") is None and retry_after("") is None
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0  # in the past


def test_backoff_is_full_jitter_under_a_capped_ceiling() -> None:
    retry = Retry(10, base=0.5, cap=4.0, rng=random.Random(7))
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (8, 4.0)]:
        waits = [retry.backoff(attempt) for _ in range(200)]
        assert all(0 <= w <= ceiling for w in waits)
        assert max(waits) > 0.8 * ceiling and min(waits) < 0.2 * ceiling  # spread over the whole range
    with pytest.raises(ValueError, match="must not be negative"):
        Retry(-1)
